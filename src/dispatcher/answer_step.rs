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

#[cfg(test)]
mod tests {
    use super::super::testing::{asked, inbound, to_bot};
    use super::*;
    use crate::engine::testing::transcript;
    use crate::gateway::testing::{echo_config, parts, until_idle};
    use crate::store::EscalationState;

    /// Step 5½ for message `n` saying `text` from `from` to bot `to` in `room`.
    async fn answered(
        d: &super::super::Dispatcher,
        to: &str,
        n: u32,
        from: &str,
        mode: Mode,
    ) -> Step<()> {
        let inbound = inbound(d, to_bot(to, n, "room", from, "main"));
        answer(d.engine(), &inbound, mode).await
    }

    /// In a chat with no question, or for a bot's message, the step lets the message go on and
    /// leaves the question waiting.
    #[tokio::test]
    async fn only_a_humans_message_in_a_chat_with_a_question_is_taken() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let d = &gw.dispatcher;
        assert_eq!(answered(d, "alpha", 1, "ann", Mode::Act).await, Ok(()));
        let question = asked(&gw.engine, "beta").await;
        assert_eq!(answered(d, "alpha", 2, "beta", Mode::Act).await, Ok(()));
        let still = gw.engine.store().escalation(&question.id).await.unwrap();
        assert_eq!(still.unwrap().state, EscalationState::Pending);
    }

    /// Asked, a human's message in a chat with a question stops without looking for which:
    /// the question is still waiting.
    #[tokio::test]
    async fn asked_a_message_that_may_answer_stops_without_answering() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let d = &gw.dispatcher;
        assert_eq!(answered(d, "alpha", 1, "ann", Mode::Ask).await, Ok(()));
        let question = asked(&gw.engine, "beta").await;
        let stop = answered(d, "alpha", 2, "ann", Mode::Ask).await.unwrap_err();
        assert_eq!(stop.handled, Handled::Answered(String::new()));
        let still = gw.engine.store().escalation(&question.id).await.unwrap();
        assert_eq!(still.unwrap().state, EscalationState::Pending);
    }

    /// A human's next message answers the question and goes no further: it is recorded where
    /// the question was posted, as the answer; the copy another bot's account received is
    /// taken too, and recorded nowhere again.
    #[tokio::test]
    async fn a_humans_answer_is_taken_once_and_goes_no_further() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let d = &gw.dispatcher;
        let question = asked(&gw.engine, "beta").await;
        let stop = answered(d, "alpha", 1, "ann", Mode::Act).await.unwrap_err();
        assert_eq!(stop.handled, Handled::Answered(question.id.clone()));
        let copy = answered(d, "beta", 1, "ann", Mode::Act).await.unwrap_err();
        assert_eq!(copy.handled, Handled::Answered(question.id.clone()));
        let now = gw
            .engine
            .store()
            .escalation(&question.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(now.state, EscalationState::Answered);
        assert_eq!(now.answer.as_deref(), Some("main"));
        until_idle(&gw.engine).await;
        let heard = transcript(&gw.engine, &question.origin).await;
        let answers: Vec<_> = heard
            .iter()
            .filter(|e| e.meta["answers"] == question.id.as_str())
            .map(|e| (e.speaker.as_str(), e.text.as_str()))
            .collect();
        assert_eq!(answers, [("ann", "main")], "recorded once: {heard:?}");
    }
}
