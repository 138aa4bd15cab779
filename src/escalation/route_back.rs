//! Handing the asking bot what became of its escalation: a human's answer or a decision on its
//! approval request wakes the asker's session, tied to the conversation it escalated to. Asked
//! in an A2A task, it continues that task.

use serde_json::Value;

use crate::engine::{Caller, Engine};
use crate::relay::{SessionMessage, post_to_session};
use crate::store::{Escalation, Origin};

/// Wake the asking bot's session with `text`, as the asker, still tied to the conversation it
/// escalated to (so it can ask again).
pub(crate) fn route_back(
    engine: &Engine,
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
        origin: Some(escalation.origin.clone()),
        run_id: None,
        trigger: None,
    };
    post_to_session(
        engine,
        SessionMessage {
            trace_parent: None,
            session: escalation.session.clone(),
            speaker: speaker.to_owned(),
            origin,
            text,
            run_id: escalation.id.clone(),
            meta,
            caller,
            delivery: None,
            task: task_of(escalation),
        },
    );
}

/// The A2A task the escalation was asked in, when the asker's session is that task's: what
/// comes of it continues the task (`relay/task_resume.rs`).
fn task_of(escalation: &Escalation) -> Option<String> {
    let (run_id, conversation) = escalation.origin.a2a_task_of()?;
    (conversation == escalation.session).then(|| run_id.to_owned())
}

#[cfg(test)]
pub(super) mod tests {
    use baton_contract::Platform;

    use super::*;
    use crate::session::SessionKey;
    use crate::store::{EscalationKind, EscalationState};

    /// An approval request posted from a Slack chat (in `thread`, if given).
    pub(in crate::escalation) fn approval(thread: Option<&str>) -> Escalation {
        let key = SessionKey {
            bot: "alpha".parse().unwrap(),
            platform: Platform::Slack,
            account: "alpha-slack".into(),
            chat: "C1".into(),
            thread: thread.map(Into::into),
        };
        Escalation {
            id: "ap-7kq2xd".into(),
            kind: EscalationKind::Approval,
            bot: "beta".parse().unwrap(),
            session: "bot:beta:slack:beta:C9".parse().unwrap(),
            chat_key: key.chat_key(),
            origin: key,
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
}
