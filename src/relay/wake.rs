//! A session woken from outside its chat (see [`super::SessionMessage`]): the bot takes a turn
//! on the nested lane, and its reply goes to the session's chat, so the people who asked see
//! the late answer, streamed in like any chat reply. Sessions with no chat (bot backchannels) keep the reply in the transcript;
//! sessions of MCP clients only record the message, since no backend stands behind them.
//!
//! It is woken on the home instance of the session's bot (`home.rs`), where its socket is: a
//! message arriving elsewhere (an answer to its question received through another bot's
//! socket, a late reply from a run on another instance) is kept in the store and handed over
//! ([`on_home`]); the home claims it, wakes the session and deletes it ([`take_up`]).

use serde_json::json;

use super::SessionMessage;
use super::home::{Home, home_of};
use crate::engine::{
    Attached, ChatReply, Engine, Heard, History, Recall, Seat, SessionTurn, TurnEnd, TurnPlan,
    journal,
};
use crate::lanes::Lane;
use crate::post::Target;
use crate::store::{EntryKind, Notify};
use crate::trace::{Span, SpanKind, attr, in_span};

/// Wake the session here if this instance is its bot's home, else hand the message to the home.
/// Should handing it over fail, it is woken here: a reply from the wrong instance beats none.
pub(super) async fn on_home(engine: &Engine, message: SessionMessage) {
    let bot = message.session.bot.clone();
    let Home::There(home) = home_of(engine, &bot).await else {
        return run(engine, message).await;
    };
    let id = format!("wake_{}", uuid::Uuid::new_v4().simple());
    let handed = match serde_json::to_string(&message) {
        Ok(json) => engine
            .store()
            .wake_hand(&id, bot.as_str(), json, crate::timing::now_ms())
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match handed {
        Ok(()) => {
            tracing::debug!(session = %message.session, %home, "session wake handed to its bot's home instance")
        }
        Err(err) => {
            tracing::warn!(session = %message.session, %home, %err, "could not hand the session's wake to its bot's home instance; waking it here");
            run(engine, message).await;
        }
    }
}

/// Wake `id`, handed to this instance (or left by `from`, an instance that is gone): claimed,
/// so exactly one instance runs it, then run and deleted.
pub(super) async fn take_up(engine: &Engine, id: &str, from: Option<&str>) {
    let store = engine.store();
    let message = match store.wake_claim(id, from, engine.instance()).await {
        Ok(Some(json)) => json,
        Ok(None) => return,
        Err(err) => {
            tracing::error!(wake = id, %err, "could not claim a session wake handed to this instance");
            return;
        }
    };
    match serde_json::from_str::<SessionMessage>(&message) {
        Ok(message) => run(engine, message).await,
        Err(err) => {
            tracing::error!(wake = id, %err, "a session wake on record is not a message this baton reads; dropped")
        }
    }
    if let Err(err) = store.wake_done(id).await {
        tracing::error!(wake = id, %err, "could not delete a session wake that ran");
    }
}

/// Run the woken turn and deliver what it says, under a span linked to the trace of what it
/// answers (a late reply to a `sessions_send`).
pub(super) async fn run(engine: &Engine, message: SessionMessage) {
    let span = Span::linked(
        message.trace_parent.as_deref(),
        "wake",
        SpanKind::Consumer,
        || {
            vec![
                attr("baton.session", message.session.render()),
                attr("baton.run_id", message.run_id.clone()),
            ]
        },
    );
    in_span!(span, woken(engine, message));
}

async fn woken(engine: &Engine, message: SessionMessage) {
    let key = &message.session;
    let Some(bot) = engine.roster().bot(&key.bot) else {
        tracing::error!(session = %message.session, "cannot wake a session of an unknown bot");
        return;
    };
    let heard = Heard {
        attached: Attached::NONE,
        speaker: &message.speaker,
        name: &message.speaker,
        origin: message.origin,
        text: &message.text,
        message_id: None,
        meta: message.meta.clone(),
    };
    let delivery = message.delivery.clone();
    if key.is_mcp() {
        journal(engine, key, message.run_id.clone())
            .await
            .heard(heard.speaker, heard.origin, heard.text, None, heard.meta)
            .await;
        notified(engine, delivery.as_deref()).await;
        return;
    }
    let seat = Seat {
        session: key,
        run_id: message.run_id.clone(),
        lane: Lane::Nested,
    };
    let turn = SessionTurn::enter(engine, seat).await;
    let plan = TurnPlan {
        bot,
        caller: message.caller,
        history: History::NONE,
        heard,
        deadline: None,
        recall: Recall::SessionTail,
        delivery: None,
    };
    if let Some(run_id) = &message.task {
        // An answer in an A2A task: the task goes on, and this turn's answer settles it.
        if let Some(d) = super::resume_task(engine, run_id).await {
            return super::task_resume::continued(engine, turn, plan, &d).await;
        }
    }
    // A session with a chat gets the reply there, streamed like any chat reply (nobody there
    // addressed the bot with this message, so no typing); a backchannel keeps it on record.
    let account = engine.roster().account(key.platform, &key.account);
    match account.filter(|_| !key.is_backchannel()) {
        Some(account) => {
            let reply = ChatReply {
                account,
                target: Target {
                    chat: key.chat.clone(),
                    thread: key.thread.clone(),
                    reply_to: None,
                    ephemeral: None,
                },
                answering: None,
                typing_at: None,
                gate: None,
                asker: None,
            };
            // A failure to post is recorded by the post.
            let _ = turn.answer(plan, reply).await;
            notified(engine, delivery.as_deref()).await;
        }
        None => {
            let end = turn.take(plan).await;
            notified(engine, delivery.as_deref()).await;
            if let TurnEnd::Reply { text, model, .. } = end {
                let meta = json!({"model": model, "posted": false});
                turn.journal().bot_did(EntryKind::Answer, &text, meta).await;
            }
        }
    }
}

/// The pushed outcome of `delivery` is on record in the sender's session.
async fn notified(engine: &Engine, delivery: Option<&str>) {
    let Some(run_id) = delivery else { return };
    if let Err(err) = engine.store().delivery_notify(run_id, Notify::Done).await {
        tracing::error!(run = run_id, %err, "could not record that the reply was pushed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Caller;
    use crate::gateway::testing::{
        Parts, begun, echo_config, held_elsewhere, new_delivery, parts, room_texts, until_idle,
    };
    use crate::session::SessionKey;
    use crate::store::{Origin, TranscriptQuery};

    async fn two_bots() -> Parts {
        parts(&echo_config(&["alpha", "beta"], "")).await
    }

    /// Beta's late word `text` for alpha's session in `chat`, telling the outcome of delivery
    /// `delivery`.
    fn late(chat: &str, text: &str, delivery: Option<&str>) -> SessionMessage {
        let session: SessionKey = format!("bot:alpha:local:alpha:{chat}").parse().unwrap();
        SessionMessage {
            caller: Caller::from_chat(&session),
            session,
            speaker: "bot:beta".into(),
            origin: Origin::Bot,
            text: format!("Message from bot 'beta': {text}"),
            run_id: "reply:r1".into(),
            meta: json!({}),
            delivery: delivery.map(str::to_owned),
            trace_parent: None,
            task: None,
        }
    }

    async fn transcript(engine: &Engine, session: &SessionKey) -> Vec<crate::store::Entry> {
        let query = TranscriptQuery::session(session.clone());
        engine.store().transcript(query).await.unwrap()
    }

    /// On SQLite this instance is every bot's home: the session is woken here, its reply is
    /// posted to its chat, and the delivery it tells of is marked pushed.
    #[tokio::test]
    async fn a_woken_chat_session_answers_in_its_chat() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        begun(engine, new_delivery("r1", "alpha", "beta", "ping"), None).await;
        on_home(engine, late("room", "late news", Some("r1"))).await;
        until_idle(engine).await;
        assert_eq!(room_texts(&gw, "room").await, ["late news"]);
        let d = engine.store().delivery("r1").await.unwrap().unwrap();
        assert_eq!(d.notify, Notify::Done);
        let handed = engine.store().wakes_left("", false, 60_000).await.unwrap();
        assert!(handed.is_empty(), "{handed:?}");
    }

    /// A backchannel is read by nobody: the reply stays on record, marked not posted.
    #[tokio::test]
    async fn a_backchannel_keeps_the_reply_on_record() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        let message = late("a2a:beta", "late news", None);
        let session = message.session.clone();
        run(engine, message).await;
        assert!(room_texts(&gw, "a2a:beta").await.is_empty());
        let entries = transcript(engine, &session).await;
        let answer = entries.iter().find(|e| e.kind == EntryKind::Answer);
        let answer = answer.expect("an answer on record");
        assert_eq!(
            (answer.text.as_str(), &answer.meta["posted"]),
            ("late news", &json!(false))
        );
    }

    /// No backend stands behind an MCP client's session: the message is recorded, no turn.
    #[tokio::test]
    async fn an_mcp_session_only_records_the_message() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        let message = late("mcp:client", "late news", None);
        let session = message.session.clone();
        run(engine, message).await;
        let said: Vec<_> = transcript(engine, &session)
            .await
            .into_iter()
            .map(|e| (e.kind, e.text))
            .collect();
        assert_eq!(
            said,
            [(
                EntryKind::Inbound,
                "Message from bot 'beta': late news".to_owned()
            )]
        );
    }

    /// A wake handed to this instance is run once, however often it is taken up, and then
    /// deleted; one this baton cannot read is deleted too.
    #[tokio::test]
    async fn a_handed_wake_runs_once_and_is_deleted() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        let store = engine.store();
        let message = serde_json::to_string(&late("room", "late news", None)).unwrap();
        store.wake_hand("w1", "alpha", message, 1).await.unwrap();
        store
            .wake_hand("w2", "alpha", "{\"not\": \"a message\"}".into(), 2)
            .await
            .unwrap();
        take_up(engine, "w1", None).await;
        take_up(engine, "w1", None).await;
        take_up(engine, "w2", None).await;
        until_idle(engine).await;
        assert_eq!(room_texts(&gw, "room").await, ["late news"]);
        let left = store.wakes_left(engine.instance(), true, 60_000).await;
        assert_eq!(left.unwrap(), []);
    }

    /// A session whose bot's socket another live instance holds is woken there: the message
    /// is handed over intact, and nothing runs here.
    #[tokio::test]
    async fn a_wake_for_a_bot_homed_elsewhere_is_handed_to_its_home() {
        let db = crate::store::testing::TestDb::postgres().await;
        let gw = held_elsewhere(&["alpha", "beta"], &db).await;
        let engine = &gw.engine;
        on_home(engine, late("room", "late news", None)).await;
        until_idle(engine).await;
        assert!(room_texts(&gw, "room").await.is_empty());
        let handed = engine.store().wakes_left("other", false, 60_000).await;
        let handed = handed.unwrap();
        assert_eq!(
            handed
                .iter()
                .map(|w| (w.bot.as_str(), w.runner.as_deref()))
                .collect::<Vec<_>>(),
            [("alpha", None)]
        );
        // The home takes it up (here standing in for it).
        take_up(engine, &handed[0].id, None).await;
        assert_eq!(room_texts(&gw, "room").await, ["late news"]);
    }
}
