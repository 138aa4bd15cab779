//! Handing the asking bot what became of its escalation: a human's answer or a decision on its
//! approval request wakes the asker's session, tied to the conversation it escalated to.

use std::sync::Arc;

use baton_contract::Platform;
use serde_json::Value;

use crate::engine::{Caller, Services};
use crate::relay::{SessionMessage, post_to_session};
use crate::session::SessionKey;
use crate::store::{Escalation, Origin};

/// Wake the asking bot's session with `text`, as the asker, still tied to the conversation it
/// escalated to (so it can ask again).
pub(crate) fn route_back(
    shared: &Arc<Services>,
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
        run_id: None,
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
pub(crate) fn origin_key(escalation: &Escalation) -> Option<SessionKey> {
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
pub(super) mod tests {
    use super::*;
    use crate::store::{EscalationKind, EscalationState, SessionRef};

    /// An approval request posted from a Slack chat (in `thread`, if given).
    pub(in crate::escalation) fn approval(thread: Option<&str>) -> Escalation {
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
}
