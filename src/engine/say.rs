//! A line posted through a bot's account that is not the bot's turn: the gateway's notices,
//! admin answers and error replies, a chain's own lines and posts, a bot's question to the
//! humans. Each is remembered before it is sent, so no bot in the chat takes it for a message
//! to answer (and no arrival can race it), then delivered and recorded in the account's session
//! under the line's run id.

use baton_contract::{ChatKey, MessageId};
use serde_json::json;

use super::Engine;
use super::journal::journal;
use crate::post::{DeliveryFailed, Target, deliver};
use crate::roster::Account;
use crate::session::SessionKey;
use crate::store::EntryKind;

/// One line to post.
pub(crate) struct Line<'a> {
    /// Whose account posts it.
    pub account: &'a Account,
    /// The account's session there, where the line is recorded.
    pub session: &'a SessionKey,
    /// The run it is recorded under; derived from its cause, so a replay posts nothing twice.
    pub run_id: String,
    /// The chat key (`<platform>:<chat>[:thread:<id>]`) in which the line must wake no bot.
    pub quiet_in: ChatKey,
    /// Where it goes.
    pub target: Target,
    /// What kind of line, as a failure to post it is recorded (`notice`, `chain`, ...).
    pub stage: &'static str,
    /// The words.
    pub text: &'a str,
}

/// Post `line`. A failure is logged and recorded in the session's transcript, and returned.
pub(crate) async fn say(engine: &Engine, line: Line<'_>) -> Result<Vec<MessageId>, DeliveryFailed> {
    let bot = line.account.bot.id();
    engine
        .own_notices()
        .remember(&line.quiet_in, bot, line.text);
    let journal = journal(engine, line.session, line.run_id).await;
    let handover = engine.handover(line.account);
    let adapter = &*line.account.adapter;
    let posted = deliver(adapter, &handover, &line.target, line.text, journal.pen()).await;
    if let Err(err) = &posted {
        tracing::warn!(%bot, %err, stage = line.stage, "line not delivered");
        let meta = json!({"stage": line.stage});
        journal
            .bot_did(EntryKind::Failure, &err.to_string(), meta)
            .await;
    }
    posted
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use baton_contract::{Platform, SendError, StubAdapter};

    use super::*;
    use crate::engine::testing::{account_on, bot, kinds, target, transcript};
    use crate::gateway::testing::{echo_config, parts};
    use crate::session::test_key;

    fn line<'a>(account: &'a Account, session: &'a SessionKey, text: &'a str) -> Line<'a> {
        Line {
            account,
            session,
            run_id: "notice-1".into(),
            quiet_in: ChatKey::new(Platform::Local, &"room".into(), None),
            target: target("room"),
            stage: "notice",
            text,
        }
    }

    /// A bot in the chat must not take the gateway's line for a message to answer.
    #[tokio::test]
    async fn a_line_is_posted_as_the_gateways_own_under_its_run() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let session = test_key("room");
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b"));
        let account = account_on(&bot(&gw.engine, "b"), &stub);
        let said = line(&account, &session, "Budget used up until midnight.");
        let quiet_in = said.quiet_in.clone();
        let posted = say(&gw.engine, said).await;
        assert_eq!(posted.ok(), Some(vec!["m0".into()]));
        let sent: Vec<_> = stub.sent().into_iter().map(|m| m.text).collect();
        assert_eq!(sent, ["Budget used up until midnight."]);
        let own = gw.engine.own_notices();
        assert!(own.is_notice(&quiet_in, &session.bot, "Budget used up until midnight."));
        let entries = transcript(&gw.engine, &session).await;
        assert_eq!(kinds(&entries), [EntryKind::Reply]);
        assert_eq!(entries[0].run_id.as_deref(), Some("notice-1"));
    }

    #[tokio::test]
    async fn a_line_that_fails_to_post_is_recorded_with_its_stage_and_returned() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let session = test_key("room");
        let refused = Err(SendError::Rejected {
            code: "not_in_channel".into(),
            message: "the bot is not in the channel".into(),
        });
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b").answering(vec![refused]));
        let account = account_on(&bot(&gw.engine, "b"), &stub);
        let failed = say(&gw.engine, line(&account, &session, "hello")).await;
        let err = failed.expect_err("the platform refused it");
        let entries = transcript(&gw.engine, &session).await;
        assert_eq!(kinds(&entries), [EntryKind::Failure]);
        assert_eq!(entries[0].text, err.to_string());
        assert_eq!(entries[0].meta["stage"], "notice");
    }
}
