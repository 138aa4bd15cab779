//! Who a turn calls tools as: the bot, its session, how deep in a chain of sends it is, and the
//! human-facing session the work started from. Every flow that takes a turn says which; the
//! guards and the escalation tool read it.

use crate::bot_id::BotId;
use crate::session::SessionKey;

/// Who is calling a tool, and in what turn. Serialized with a session's wake handed to another
/// instance (`relay/wake.rs`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Caller {
    /// The calling bot's id.
    pub bot: BotId,
    /// The calling bot's session: where a late reply to its send lands.
    pub session: SessionKey,
    /// How many bots the chain of sends leading to this turn holds: 1 for a turn a human (or a
    /// schedule, or an MCP client) started, +1 for each `sessions_send` hop.
    pub depth: u32,
    /// The bot whose `sessions_send` caused this turn. The passive-reply rule forbids sending
    /// back to it: this turn's answer *is* the reply.
    pub passive_to: Option<BotId>,
    /// The human-facing session the chain of turns started from, where `escalate_to_user`
    /// posts. `None` for callers with no chat behind them (an MCP client).
    pub origin: Option<SessionKey>,
    /// The run the calls are made in, set when the turn starts: what an artifact put in it was
    /// made by. `None` outside any turn (an MCP client).
    pub run_id: Option<String>,
    /// The trigger the turn's model calls are charged to (SPEC 12): the run id of the turn a
    /// human, a schedule or an API request started, carried across every hop. `None` until the
    /// first turn of a trigger starts, which takes its own run id.
    #[serde(default)]
    pub trigger: Option<String>,
}

impl Caller {
    /// A caller at the start of a chain: a turn a human woke in `session`.
    pub fn from_chat(session: &SessionKey) -> Caller {
        Caller {
            bot: session.bot.clone(),
            session: session.clone(),
            depth: 1,
            passive_to: None,
            origin: Some(session.clone()),
            run_id: None,
            trigger: None,
        }
    }

    /// A caller with no chat behind it: an external runtime over `/mcp`, speaking as the bot
    /// of `session`. A late reply to its send is recorded in that session, not turned into a
    /// turn, and `escalate_to_user` has no human to ask.
    pub fn external(session: &SessionKey) -> Caller {
        Caller {
            bot: session.bot.clone(),
            session: session.clone(),
            depth: 1,
            passive_to: None,
            origin: None,
            run_id: None,
            trigger: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> SessionKey {
        "bot:scout:local:local-scout:dm:x".parse().unwrap()
    }

    #[test]
    fn a_chat_caller_escalates_to_its_chat_and_an_external_one_nowhere() {
        let chat = Caller::from_chat(&session());
        assert_eq!(chat.origin, Some(session()));
        assert_eq!(chat.bot, session().bot);
        let external = Caller::external(&session());
        assert_eq!(external.origin, None);
        for caller in [chat, external] {
            assert_eq!(caller.depth, 1, "a chain of sends starts one bot deep");
            assert_eq!(caller.passive_to, None);
            assert_eq!((caller.run_id, caller.trigger), (None, None));
        }
    }

    #[test]
    fn a_wake_handed_over_without_a_trigger_still_reads() {
        let mut handed = serde_json::to_value(Caller::from_chat(&session())).unwrap();
        handed.as_object_mut().unwrap().remove("trigger");
        let read: Caller = serde_json::from_value(handed).unwrap();
        assert_eq!(read, Caller::from_chat(&session()));
    }
}
