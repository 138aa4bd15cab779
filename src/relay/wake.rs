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
