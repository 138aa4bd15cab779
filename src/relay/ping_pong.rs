//! `max_ping_pong_turns`: after a send is answered, the two bots may go back and
//! forth a few more times, each side able to stop by answering `REPLY_SKIP`.
//!
//! The exchange runs after the sender's tool call has returned, in the two sessions of the send
//! (the sender's first), on the nested lane. Nothing of it is posted to a chat: it refines the
//! answer between the bots, and both transcripts keep it. Neither side may `sessions_send` the
//! other during it (the passive-reply rule), so it cannot grow past its bound.

use serde_json::json;

use super::from_bot;
use crate::bot_id::BotId;
use crate::engine::{
    Attached, Caller, Engine, Heard, History, Recall, Seat, SessionTurn, TurnEnd, TurnPlan,
};
use crate::lanes::Lane;
use crate::outcome::is_reply_skip;
use crate::session::SessionKey;
use crate::store::{Delivery, EntryKind, Origin};

/// The config allows at most this many extra exchanges.
const MAX_TURNS: u32 = 5;

/// Start the exchange after `d` was answered with `reply`, when the config asks for one.
pub(super) fn start(engine: &Engine, d: &Delivery, reply: &str) {
    let turns = engine.config().limits.max_ping_pong_turns.min(MAX_TURNS);
    if turns == 0 || reply.trim().is_empty() || is_reply_skip(reply) {
        return;
    }
    let task_shared = engine.clone();
    let (d, reply) = (d.clone(), reply.to_owned());
    engine
        .tasks()
        .spawn(async move { exchange(&task_shared, &d, reply, turns).await });
}

async fn exchange(engine: &Engine, d: &Delivery, mut last: String, turns: u32) {
    for n in 1..=turns {
        let (bot, session, other) = if n % 2 == 1 {
            (&d.sender, &d.sender_session, &d.target)
        } else {
            (&d.target, &d.target_session, &d.sender)
        };
        match turn(engine, d, n, bot, session, other, &last).await {
            Some(text) => last = text,
            None => return,
        }
    }
}

/// One exchange: `bot` answers `other`'s last words. `None` ends the exchange.
async fn turn(
    engine: &Engine,
    d: &Delivery,
    n: u32,
    bot: &BotId,
    session: &SessionKey,
    other: &BotId,
    last: &str,
) -> Option<String> {
    let taker = engine.roster().bot(bot)?;
    let seat = Seat {
        session,
        run_id: format!("{}:pp{n}", d.run_id),
        lane: Lane::Nested,
    };
    let turn = SessionTurn::enter(engine, seat).await;
    let speaker = format!("bot:{other}");
    let text = from_bot(other, last);
    let plan = TurnPlan {
        bot: taker,
        caller: Caller {
            bot: bot.clone(),
            session: session.clone(),
            depth: d.depth,
            passive_to: Some(other.clone()),
            origin: d.origin.clone(),
            run_id: None,
            trigger: d.trigger.clone(),
        },
        history: History::NONE,
        heard: Heard {
            attached: Attached::NONE,
            speaker: &speaker,
            name: &speaker,
            origin: Origin::Bot,
            text: &text,
            message_id: None,
            meta: json!({"name": speaker, "run_id": d.run_id, "ping_pong": n}),
        },
        deadline: None,
        recall: Recall::SessionTail,
        delivery: None,
    };
    let TurnEnd::Reply { text, model, .. } = turn.take(plan).await else {
        return None;
    };
    let journal = turn.journal();
    if is_reply_skip(&text) {
        journal
            .bot_did(
                EntryKind::Silent,
                "",
                json!({"reason": "REPLY_SKIP", "ping_pong": n}),
            )
            .await;
        return None;
    }
    journal
        .bot_did(
            EntryKind::Answer,
            &text,
            json!({"to": other, "model": model, "ping_pong": n}),
        )
        .await;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::testing::{begun, echo_config, new_delivery, parts, until_idle};
    use crate::outcome::REPLY_SKIP;
    use crate::store::TranscriptQuery;

    fn with_turns(turns: u32) -> String {
        echo_config(
            &["alpha", "beta"],
            &format!("\n[limits]\nmax_ping_pong_turns = {turns}\n"),
        )
    }

    /// Alpha's send to beta, on record.
    async fn answered(engine: &Engine) -> Delivery {
        begun(engine, new_delivery("r1", "alpha", "beta", "ping"), None).await
    }

    /// What the bot of `session` said in the exchange: each entry's kind, text and exchange
    /// number.
    async fn exchanges(engine: &Engine, session: &SessionKey) -> Vec<(EntryKind, String, u64)> {
        let entries = engine
            .store()
            .transcript(TranscriptQuery::session(session.clone()))
            .await
            .unwrap();
        entries
            .into_iter()
            .filter(|e| e.kind != EntryKind::Inbound)
            .filter_map(|e| Some((e.kind, e.text, e.meta["ping_pong"].as_u64()?)))
            .collect()
    }

    #[tokio::test]
    async fn the_bots_take_turns_sender_first_up_to_the_bound() {
        let gw = parts(&with_turns(3)).await;
        let d = answered(&gw.engine).await;
        start(&gw.engine, &d, "pong");
        until_idle(&gw.engine).await;
        let said = |n| (EntryKind::Answer, "pong".to_owned(), n);
        assert_eq!(
            exchanges(&gw.engine, &d.sender_session).await,
            [said(1), said(3)]
        );
        assert_eq!(exchanges(&gw.engine, &d.target_session).await, [said(2)]);
    }

    #[tokio::test]
    async fn nothing_is_exchanged_unless_configured_and_answered_in_words() {
        for (turns, reply) in [(0, "pong"), (2, "  "), (2, REPLY_SKIP)] {
            let gw = parts(&with_turns(turns)).await;
            let d = answered(&gw.engine).await;
            start(&gw.engine, &d, reply);
            until_idle(&gw.engine).await;
            for session in [&d.sender_session, &d.target_session] {
                let none: [(EntryKind, String, u64); 0] = [];
                assert_eq!(
                    exchanges(&gw.engine, session).await,
                    none,
                    "{turns} {reply:?}"
                );
            }
        }
    }

    /// A side answering `REPLY_SKIP` ends the exchange: its silence is on record, and the other
    /// side is not asked again.
    #[tokio::test]
    async fn a_skip_ends_the_exchange() {
        let gw = parts(&with_turns(3)).await;
        let d = answered(&gw.engine).await;
        // Alpha's echo drops the mention: it answers `REPLY_SKIP`.
        start(&gw.engine, &d, &format!("@beta {REPLY_SKIP}"));
        until_idle(&gw.engine).await;
        assert_eq!(
            exchanges(&gw.engine, &d.sender_session).await,
            [(EntryKind::Silent, String::new(), 1)]
        );
        let none: [(EntryKind, String, u64); 0] = [];
        assert_eq!(exchanges(&gw.engine, &d.target_session).await, none);
    }
}
