//! A session woken from outside its chat (see [`super::SessionMessage`]): the bot takes a turn
//! on the nested lane, and its reply goes to the session's chat, so the people who asked see
//! the late answer, streamed in like any chat reply. Sessions with no chat (bot backchannels) keep the reply in the transcript;
//! sessions of MCP clients only record the message, since no backend stands behind them.

use std::sync::Arc;

use serde_json::json;

use super::SessionMessage;
use crate::deliver::Target;
use crate::engine::{
    Attached, ChatReply, Heard, History, Recall, Seat, Services, SessionTurn, TurnEnd, TurnPlan,
    journal,
};
use crate::lanes::Lane;
use crate::store::{EntryKind, Notify};

/// Run the woken turn and deliver what it says.
pub(super) async fn run(shared: &Arc<Services>, message: SessionMessage) {
    let key = &message.session;
    let Some(bot) = shared.roster().bot(&key.bot) else {
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
        journal(shared, key, message.run_id.clone())
            .await
            .heard(heard.speaker, heard.origin, heard.text, None, heard.meta)
            .await;
        notified(shared, delivery.as_deref()).await;
        return;
    }
    let seat = Seat {
        session: key,
        run_id: message.run_id.clone(),
        lane: Lane::Nested,
    };
    let turn = SessionTurn::enter(shared, seat).await;
    let plan = TurnPlan {
        bot,
        caller: message.caller,
        history: History::NONE,
        heard,
        limit: shared.turn_limit(),
        recall: Recall::SessionTail,
    };
    // A session with a chat gets the reply there, streamed like any chat reply (nobody there
    // addressed the bot with this message, so no typing); a backchannel keeps it on record.
    let account = shared.roster().account(key.platform, &key.account);
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
            };
            // A failure to post is recorded by the post.
            let _ = turn.answer(plan, reply).await;
            notified(shared, delivery.as_deref()).await;
        }
        None => {
            let end = turn.take(plan).await;
            notified(shared, delivery.as_deref()).await;
            if let TurnEnd::Reply { text, model, .. } = end {
                let meta = json!({"model": model, "posted": false});
                turn.journal().bot_did(EntryKind::Answer, &text, meta).await;
            }
        }
    }
}

/// The pushed outcome of `delivery` is on record in the sender's session.
async fn notified(shared: &Services, delivery: Option<&str>) {
    let Some(run_id) = delivery else { return };
    if let Err(err) = shared.store().delivery_notify(run_id, Notify::Done).await {
        tracing::error!(run = run_id, %err, "could not record that the reply was pushed");
    }
}
