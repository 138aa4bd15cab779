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
//! same way, through [`decide_approval`].

use std::sync::Arc;

use baton_contract::Platform;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Handled, Inbound, Shared};
use crate::mirror::{Journal, now_ms};
use crate::relay::{SessionMessage, post_to_session};
use crate::session::SessionKey;
use crate::store::{
    AnswerCandidate, AnswerMatch, Escalation, EscalationKind, EscalationState, Origin, StoreError,
};
use crate::tools::Caller;

/// Take the event if it answers a pending question; `None` lets it go on down the pipeline.
pub(crate) async fn intercept(shared: &Arc<Shared>, inbound: &Inbound<'_>) -> Option<Handled> {
    let speaker = &inbound.speaker;
    if speaker.origin != Origin::Human {
        return None;
    }
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
    let escalation = match shared.store.answer_escalation(candidate, now_ms()).await {
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
    let origin = Journal::new(
        shared.store.clone(),
        escalation.origin.key.clone(),
        escalation.origin.bot.clone(),
        escalation.id.clone(),
    );
    let meta = json!({"name": speaker.name, "answers": escalation.id, "raw": event.raw});
    origin
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
        shared,
        &escalation,
        &speaker.label,
        Origin::Human,
        text,
        meta,
    );
    Some(Handled::Answered(escalation.id))
}

/// An approval decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Decision {
    /// Go ahead.
    Approve,
    /// Do not.
    Deny,
}

impl Decision {
    fn state(self) -> EscalationState {
        match self {
            Decision::Approve => EscalationState::Approved,
            Decision::Deny => EscalationState::Denied,
        }
    }
}

/// Who decides an approval request.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Resolver<'a> {
    /// A person (an admin's `/baton approve`): platform id and display name.
    Human {
        /// Platform user id.
        id: &'a str,
        /// Display name.
        name: &'a str,
    },
    /// A bot calling `resolve_agent_approval`.
    Bot(&'a str),
}

impl Resolver<'_> {
    /// Transcript attribution: the human's id, or `bot:<id>`.
    fn label(&self) -> String {
        match self {
            Resolver::Human { id, .. } => (*id).to_owned(),
            Resolver::Bot(bot) => format!("bot:{bot}"),
        }
    }

    fn name(&self) -> &str {
        match self {
            Resolver::Human { name, .. } => name,
            Resolver::Bot(bot) => bot,
        }
    }

    fn origin(&self) -> Origin {
        match self {
            Resolver::Human { .. } => Origin::Human,
            Resolver::Bot(_) => Origin::Bot,
        }
    }
}

/// Why an approval request could not be decided.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DecideError {
    /// No escalation has that id.
    #[error("no approval request `{0}`; check the id (it looks like ap-xxxxxx)")]
    Unknown(String),
    /// The id is a question's, which the human answers in the chat.
    #[error("`{0}` is a question, not an approval request; it is answered in the chat")]
    NotAnApproval(String),
    /// Already decided (or it failed to post).
    #[error("approval request `{0}` is already {1}; there is nothing left to decide")]
    NotPending(String, EscalationState),
    /// A bot tried to decide its own request.
    #[error(
        "you cannot approve or deny your own request `{0}`; a person (`/baton approve|deny`) or \
         another bot has to"
    )]
    SelfApproval(String),
    /// The store failed; nothing was decided.
    #[error("the store failed, nothing was decided: {0}")]
    Store(#[from] StoreError),
}

/// Approve or deny the pending approval request `id` and tell the requesting bot.
pub(crate) async fn decide_approval(
    shared: &Arc<Shared>,
    id: &str,
    decision: Decision,
    by: Resolver<'_>,
    note: Option<&str>,
) -> Result<Escalation, DecideError> {
    let store = &shared.store;
    let Some(request) = store.escalation(id).await? else {
        return Err(DecideError::Unknown(id.trim().to_owned()));
    };
    if request.kind != EscalationKind::Approval {
        return Err(DecideError::NotAnApproval(request.id));
    }
    if matches!(by, Resolver::Bot(bot) if bot == request.bot) {
        return Err(DecideError::SelfApproval(request.id));
    }
    let note = note.map(str::trim).filter(|n| !n.is_empty());
    let decided = store
        .resolve_escalation(&request.id, decision.state(), note, &by.label(), now_ms())
        .await?;
    let Some(decided) = decided else {
        let now = store
            .escalation(&request.id)
            .await?
            .map_or(request.state, |e| e.state);
        return Err(DecideError::NotPending(request.id, now));
    };
    tracing::info!(
        escalation = %decided.id, decision = %decided.state, by = %by.label(),
        "approval request decided"
    );
    let text = decision_text(&decided, by.name(), note);
    let meta = json!({"escalation": decided.id, "decision": decided.state});
    route_back(shared, &decided, &by.label(), by.origin(), text, meta);
    Ok(decided)
}

/// What the requesting bot is told about a decision.
fn decision_text(decided: &Escalation, by: &str, note: Option<&str>) -> String {
    let mut text = format!("Approval {} {} by {by}", decided.id, decided.state);
    match note {
        Some(note) => text.push_str(&format!(": {note}")),
        None => text.push('.'),
    }
    text
}

/// Wake the asking bot's session with `text`, as the asker, still tied to the conversation it
/// escalated to (so it can ask again).
fn route_back(
    shared: &Arc<Shared>,
    escalation: &Escalation,
    speaker: &str,
    origin: Origin,
    text: String,
    meta: Value,
) {
    let caller = Caller {
        bot: escalation.bot.clone(),
        session: escalation.session.clone(),
        depth: 1,
        passive_to: None,
        origin: origin_key(escalation),
    };
    post_to_session(
        shared,
        SessionMessage {
            session: escalation.session.clone(),
            speaker: speaker.to_owned(),
            origin,
            text,
            run_id: escalation.id.clone(),
            meta,
            caller,
            delivery: None,
        },
    );
}

/// The session key the escalation was posted from, from its stored parts.
fn origin_key(escalation: &Escalation) -> Option<SessionKey> {
    let o = &escalation.origin;
    let platform: Platform = o.platform.parse().ok()?;
    Some(SessionKey {
        bot: o.bot.clone(),
        platform,
        account: o.account.as_str().into(),
        chat: o.chat.as_str().into(),
        thread: o.thread.as_deref().map(Into::into),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SessionRef;

    fn approval(thread: Option<&str>) -> Escalation {
        let key = SessionKey {
            bot: "alpha".into(),
            platform: Platform::Slack,
            account: "alpha-slack".into(),
            chat: "C1".into(),
            thread: thread.map(Into::into),
        };
        Escalation {
            id: "ap-7kq2xd".into(),
            kind: EscalationKind::Approval,
            bot: "beta".into(),
            session: "bot:beta:slack:beta:C9".into(),
            origin: SessionRef {
                key: key.render(),
                bot: "alpha".into(),
                platform: "slack".into(),
                account: "alpha-slack".into(),
                chat: "C1".into(),
                thread: thread.map(str::to_owned),
            },
            chat_key: key.chat_key(),
            posted_message_id: None,
            text: "deploy?".into(),
            state: EscalationState::Approved,
            answer: None,
            answered_by: None,
            answer_message_id: None,
            created_ms: 0,
            resolved_ms: None,
        }
    }

    #[test]
    fn the_origin_key_is_rebuilt_from_its_parts() {
        for thread in [None, Some("1700.1")] {
            let escalation = approval(thread);
            let key = origin_key(&escalation).unwrap();
            assert_eq!(key.render(), escalation.origin.key);
            assert_eq!(key.chat_key(), escalation.chat_key);
        }
    }

    #[test]
    fn a_decision_names_who_and_why() {
        let decided = approval(None);
        assert_eq!(
            decision_text(&decided, "Ada", Some("looks safe")),
            "Approval ap-7kq2xd approved by Ada: looks safe"
        );
        let denied = Escalation {
            state: EscalationState::Denied,
            ..decided
        };
        assert_eq!(
            decision_text(&denied, "caid", None),
            "Approval ap-7kq2xd denied by caid."
        );
    }

    #[test]
    fn resolvers_are_attributed_like_transcript_speakers() {
        let human = Resolver::Human {
            id: "U1",
            name: "Ada",
        };
        assert_eq!(
            (human.label(), human.name(), human.origin()),
            ("U1".to_owned(), "Ada", Origin::Human)
        );
        let bot = Resolver::Bot("caid");
        assert_eq!(
            (bot.label(), bot.name(), bot.origin()),
            ("bot:caid".to_owned(), "caid", Origin::Bot)
        );
    }
}
