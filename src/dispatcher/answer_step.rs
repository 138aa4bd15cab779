//! Between policy and activation: a human's answer to a question a bot asked with
//! `escalate_to_user` is routed back to the asking bot instead of waking bots.
//!
//! A human message answers a pending question of its chat when it replies to the posted
//! question, is in the question's thread, or — with neither, as in the local channel — is the
//! next human message where the question was posted (the rules are
//! [`Store::answer_escalation`](crate::store::Store::answer_escalation)'s). The answer is
//! recorded in the transcript of the session the question was posted from and handed to the
//! asker's session through [`crate::relay::post_to_session`]; the message goes no further.
//! Every bot account in the chat receives the same message: the store lets exactly one of them
//! take it, and the others drop their copies.
//!
//! Approval decisions (`/baton approve|deny`, `resolve_agent_approval`) are routed back the
//! same way, through [`crate::escalation::decide_approval`].

use serde_json::json;

use super::Inbound;
use super::stop::{Handled, Mode, Step, Stop};
use crate::engine::{Engine, journal};
use crate::escalation::route_back;
use crate::store::{AnswerCandidate, AnswerMatch, Origin};
use crate::timing::now_ms;

/// Take the event if it answers a pending question; `None` lets it go on down the pipeline.
pub(crate) async fn intercept(engine: &Engine, inbound: &Inbound<'_>) -> Option<Handled> {
    if !may_answer(engine, inbound) {
        return None;
    }
    // Boxed: routing an answer back is a future of kilobytes, which every event's task would
    // otherwise carry (and copy) although nearly every message stops above.
    Box::pin(answer_pending(engine, inbound)).await
}

/// Whether `inbound` may answer a pending question: a human's message in a chat that may have
/// one (known without a read).
pub(crate) fn may_answer(engine: &Engine, inbound: &Inbound<'_>) -> bool {
    inbound.speaker.origin == Origin::Human
        && engine.store().may_have_escalation(&inbound.settings_key)
}

/// [`intercept`] in a chat that has had a question.
async fn answer_pending(engine: &Engine, inbound: &Inbound<'_>) -> Option<Handled> {
    let speaker = &inbound.speaker;
    let event = &inbound.event;
    let candidate = AnswerCandidate {
        chat: inbound.settings_key.clone(),
        chat_key: inbound.chat_key.clone(),
        reply_to: event.reply_to.as_ref().map(ToString::to_string),
        message_id: event.message_id.to_string(),
        sent_ms: event.timestamp_ms,
        by: speaker.label.clone(),
        text: event.text.clone(),
    };
    let escalation = match engine.store().answer_escalation(candidate, now_ms()).await {
        Ok(None) => return None,
        Ok(Some(AnswerMatch::Copy(escalation))) => return Some(Handled::Answered(escalation.id)),
        Ok(Some(AnswerMatch::First(escalation))) => escalation,
        Err(err) => {
            tracing::error!(
                %err,
                "could not look for a pending question; handling the message as usual"
            );
            return None;
        }
    };
    tracing::info!(
        escalation = %escalation.id, asker = %escalation.bot,
        "a human answered a bot's question"
    );
    let meta = json!({"name": speaker.name, "answers": escalation.id, "raw": event.raw});
    journal(engine, &escalation.origin, escalation.id.clone())
        .await
        .heard(
            &speaker.label,
            Origin::Human,
            &event.text,
            Some(event.message_id.as_str()),
            meta,
        )
        .await;
    let text = format!(
        "Answer from {} to your question {}: {}",
        speaker.name, escalation.id, event.text
    );
    let meta =
        json!({"escalation": escalation.id, "message_id": event.message_id, "name": speaker.name});
    route_back(
        engine,
        &escalation,
        &speaker.label,
        Origin::Human,
        text,
        meta,
    );
    Some(Handled::Answered(escalation.id))
}

/// Step 5½: a human's answer to a bot's question goes back to that bot, and no further.
/// Asked, a message that may answer one stops without looking (which question, only acting
/// finds out).
pub(super) async fn answer(engine: &Engine, inbound: &Inbound<'_>, mode: Mode) -> Step<()> {
    if mode == Mode::Ask {
        return match may_answer(engine, inbound) {
            true => Err(Stop::handled(Handled::Answered(String::new()))),
            false => Ok(()),
        };
    }
    match intercept(engine, inbound).await {
        Some(answered) => Err(Stop::handled(answered)),
        None => Ok(()),
    }
}
