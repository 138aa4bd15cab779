//! Saying things in a chain's chat: a bot's post under its own account, and baton's own lines
//! (opened, a turn timed out, closed) through the chain's voice account.
//!
//! Every line is remembered as the gateway's before it is sent, so no bot in the chat takes it
//! as a message to answer: in a chain, turns are given by the chain, never by the chat. Without
//! this, a chain post mentioning another bot (or any post, for an `always` bot) would wake bots
//! out of turn — the very noise chains exist to stop.

use baton_contract::MessageId;

use super::place::Place;
use crate::engine::{self, Engine, Line};
use crate::roster::Account;

/// Post `text` in `place` through `account`, recorded in that account's session there under
/// `run_id` (which makes a replay post nothing twice). Returns the first posted message's id; a
/// failure is recorded in the transcript and logged, never silently lost.
pub(super) async fn say(
    engine: &Engine,
    place: &Place,
    account: &Account,
    run_id: String,
    text: &str,
) -> Option<MessageId> {
    let session = place.session(account);
    let line = Line {
        account,
        session: &session,
        run_id,
        quiet_in: place.chat_key(),
        target: place.target(),
        stage: "chain",
        text,
    };
    let posted = engine::say(engine, line).await.ok()?;
    posted.into_iter().next()
}

/// baton's own line about a chain, through the chain's voice account.
pub(super) async fn baton_says(
    engine: &Engine,
    place: &Place,
    run_id: String,
    text: &str,
) -> Option<MessageId> {
    let Some(account) = place.voice(engine) else {
        tracing::warn!(account = %place.account, "the chain's account is gone; line not posted");
        return None;
    };
    say(engine, place, account, run_id, text).await
}

#[cfg(test)]
mod tests {
    use baton_contract::{AccountId, MessageId};

    use super::super::testing::room;
    use super::*;
    use crate::gateway::testing::{Parts, echo_config, parts};
    use crate::local::RoomMessage;
    use crate::store::TranscriptQuery;

    async fn posted(gw: &Parts) -> Vec<RoomMessage> {
        gw.hub.messages("room", None).await.unwrap()
    }

    /// A bot's chain post is its own message answering the chain's anchor, recorded in its
    /// session of the chat, and known as a chain line there so it wakes no bot.
    #[tokio::test]
    async fn a_post_is_the_bots_own_answer_to_the_anchor_and_wakes_no_bot() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let engine = &gw.engine;
        let place = Place {
            anchor: Some(MessageId::from("m0")),
            ..room()
        };
        let alpha = place.account_of(engine, &"alpha".parse().unwrap()).unwrap();
        let id = say(
            engine,
            &place,
            alpha,
            "chain:ch-1:m1".into(),
            "@lead the migration",
        )
        .await
        .expect("posted");

        let [message] = &posted(&gw).await[..] else {
            panic!("one post: {:?}", posted(&gw).await);
        };
        assert_eq!(
            (message.id.as_str(), message.author.as_str(), message.is_bot),
            (id.as_str(), "alpha", true)
        );
        assert_eq!(message.text, "@lead the migration");
        assert_eq!(message.reply_to.as_deref(), Some("m0"));
        let bot = alpha.bot.id();
        assert!(
            engine
                .own_notices()
                .is_notice(&place.chat_key(), bot, "@lead the migration"),
            "a chain post must not wake the bot it mentions"
        );
        engine.store().flush().await.unwrap();
        let query = TranscriptQuery::session(place.session(alpha));
        let transcript = engine.store().transcript(query).await.unwrap();
        assert!(
            transcript
                .iter()
                .any(|e| e.run_id.as_deref() == Some("chain:ch-1:m1")),
            "recorded under its run: {transcript:?}"
        );
    }

    #[tokio::test]
    async fn the_same_run_posts_nothing_twice() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let (engine, place) = (&gw.engine, room());
        let alpha = place.account_of(engine, &"alpha".parse().unwrap()).unwrap();
        let first = say(engine, &place, alpha, "chain:ch-1:m1".into(), "once").await;
        let again = say(engine, &place, alpha, "chain:ch-1:m1".into(), "once").await;
        assert!(first.is_some());
        assert_eq!(again, first);
        assert_eq!(posted(&gw).await.len(), 1);
    }

    /// baton's own lines go through the account the chain names; when that account is gone
    /// nothing is posted rather than borrowing another bot's.
    #[tokio::test]
    async fn baton_speaks_through_the_chains_account_or_not_at_all() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let engine = &gw.engine;
        let said = baton_says(engine, &room(), "chain:ch-1:open".into(), "Chain started").await;
        assert!(said.is_some());
        let gone = Place {
            account: AccountId::from("gone"),
            ..room()
        };
        let unsaid = baton_says(engine, &gone, "chain:ch-1:close".into(), "Chain closed").await;
        assert_eq!(unsaid, None);
        let authors: Vec<(String, String)> = posted(&gw)
            .await
            .into_iter()
            .map(|m| (m.author, m.text))
            .collect();
        assert_eq!(authors, [("lead".to_owned(), "Chain started".to_owned())]);
    }
}
