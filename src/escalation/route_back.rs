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

    use serde_json::json;

    use super::*;
    use crate::engine::testing::transcript;
    use crate::gateway::testing::{echo_config, parts, until_idle};
    use crate::session::{A2aCaller, SessionKey};
    use crate::store::{EntryKind, EscalationKind, EscalationState};

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

    /// An escalation asked in an A2A task continues that task; one asked in another task of
    /// the conversation, or in a chat, continues none.
    #[test]
    fn only_an_escalation_asked_in_the_askers_own_task_continues_it() {
        let caller = A2aCaller::parse("acme").unwrap();
        let conversation = SessionKey::a2a(&"beta".parse().unwrap(), "beta".into(), &caller, "c1");
        let asked_in = |origin: SessionKey| Escalation {
            session: conversation.clone(),
            origin,
            ..approval(None)
        };
        let task = asked_in(conversation.a2a_task("run-1"));
        assert_eq!(task_of(&task).as_deref(), Some("run-1"));
        let other = SessionKey::a2a(&"beta".parse().unwrap(), "beta".into(), &caller, "c2");
        assert_eq!(task_of(&asked_in(other.a2a_task("run-2"))), None);
        assert_eq!(task_of(&approval(Some("t1"))), None, "asked in a chat");
    }

    /// What became of an escalation wakes the asker's session, spoken by who resolved it and
    /// tied to the escalation: the asker's bot takes a turn on it.
    #[tokio::test]
    async fn an_answer_wakes_the_askers_session_as_told() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let escalation = Escalation {
            session: "bot:beta:local:beta:ops".parse().unwrap(),
            origin: "bot:alpha:local:alpha:room".parse().unwrap(),
            ..approval(None)
        };
        let text = "Answer from Ann to your question ap-7kq2xd: main".to_owned();
        route_back(
            &gw.engine,
            &escalation,
            "ann",
            Origin::Human,
            text.clone(),
            json!({}),
        );
        until_idle(&gw.engine).await;
        let woken = transcript(&gw.engine, &escalation.session).await;
        let heard = woken
            .iter()
            .find(|e| e.kind == EntryKind::Inbound)
            .expect("the asker heard it");
        assert_eq!(
            (heard.speaker.as_str(), heard.text.as_str()),
            ("ann", text.as_str())
        );
        assert_eq!(heard.run_id.as_deref(), Some("ap-7kq2xd"));
        assert!(
            woken.iter().any(|e| e.kind == EntryKind::Reply),
            "the asker took a turn: {woken:?}"
        );
    }
}
