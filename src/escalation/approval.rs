//! Approval decisions (`/baton approve|deny`, `resolve_agent_approval`): who may decide, the
//! decision on record, and the requesting bot told.

use serde::Deserialize;
use serde_json::json;

use super::route_back::route_back;
use crate::bot_id::BotId;
use crate::engine::Engine;
use crate::store::{Escalation, EscalationKind, EscalationState, Origin, StoreError};
use crate::timing::now_ms;

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
    Bot(&'a BotId),
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
            Resolver::Bot(bot) => bot.as_str(),
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
    engine: &Engine,
    id: &str,
    decision: Decision,
    by: Resolver<'_>,
    note: Option<&str>,
) -> Result<Escalation, DecideError> {
    let store = engine.store();
    let Some(request) = store.escalation(id).await? else {
        return Err(DecideError::Unknown(id.trim().to_owned()));
    };
    if request.kind != EscalationKind::Approval {
        return Err(DecideError::NotAnApproval(request.id));
    }
    if matches!(by, Resolver::Bot(bot) if *bot == request.bot) {
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
    route_back(engine, &decided, &by.label(), by.origin(), text, meta);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::escalation::route_back::tests::approval;

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
        let caid: BotId = "caid".parse().unwrap();
        let bot = Resolver::Bot(&caid);
        assert_eq!(
            (bot.label(), bot.name(), bot.origin()),
            ("bot:caid".to_owned(), "caid", Origin::Bot)
        );
    }
}
