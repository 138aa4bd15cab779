//! Session keys: the conversation state of one bot in one chat.
//!
//! The key is `bot:<bot>:<platform>:<account>:<chat>[:thread:<id>]`. It is
//! built in one place so that every module (transcript, lanes, tools, CLI) spells it the same.
//!
//! Flows carry the key typed. It becomes a string only where it leaves the process: the store
//! renders it on write and parses it on read (a row that does not parse is an error naming the
//! row), and JSON (tool results, the HTTP API) shows it rendered. A key given as text by a user
//! or a model is parsed once, where it arrives ([`str::parse`]), and a wrong one is answered
//! with [`NotASessionKey`].

use std::fmt;
use std::str::FromStr;

use crate::bot_id::BotId;
use baton_contract::{AccountId, ChatId, ChatKey, Platform, ThreadId};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where a session lives: one bot's account in one chat, optionally one thread of it.
///
/// Every session baton keeps is a bot's: chats on a platform, the local rooms and `/v1`
/// conversations (a local direct message with the bot), bot-to-bot backchannels, MCP clients
/// speaking as a bot and a bot's private scheduled turns are all keyed this way, which is why
/// one type (not an enum of kinds) says what a session is. The kinds that are not chats people
/// read are told apart by their chat id ([`SessionKey::is_backchannel`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    /// The bot.
    pub bot: BotId,
    /// The platform.
    pub platform: Platform,
    /// The bot's account on it.
    pub account: AccountId,
    /// The chat.
    pub chat: ChatId,
    /// The thread, where the platform has threads.
    pub thread: Option<ThreadId>,
}

impl SessionKey {
    /// The key as stored and shown, in one allocation of its length: it is rendered several
    /// times a turn (each entry recorded, each notice), and `to_string` grew it two or three
    /// times on the way (BENCHMARKS.md, issue 23).
    pub fn render(&self) -> String {
        let parts = [
            self.bot.as_str(),
            self.platform.as_str(),
            self.account.as_str(),
            self.chat.as_str(),
        ];
        let thread = self.thread.as_ref().map(|t| t.as_str());
        let len = "bot".len()
            + parts.iter().map(|p| 1 + p.len()).sum::<usize>()
            + thread.map_or(0, |t| ":thread:".len() + t.len());
        let mut key = String::with_capacity(len);
        key.push_str("bot");
        for part in parts {
            key.push(':');
            key.push_str(part);
        }
        if let Some(thread) = thread {
            key.push_str(":thread:");
            key.push_str(thread);
        }
        key
    }

    /// The key of the chat (and thread) this session is in, shared by every bot there:
    /// `<platform>:<chat>[:thread:<id>]`. History buffers, chat settings and bot chains use it.
    pub fn chat_key(&self) -> ChatKey {
        ChatKey::new(self.platform, &self.chat, self.thread.as_ref())
    }

    /// `bot`'s session for messages `sender` hands it with `sessions_send`: one per pair, on
    /// the bot's local account, apart from every human conversation.
    pub fn backchannel(bot: &BotId, account: AccountId, sender: &BotId) -> SessionKey {
        SessionKey {
            bot: bot.clone(),
            platform: Platform::Local,
            account,
            chat: ChatId::from(format!("{BACKCHANNEL_PREFIX}{sender}")),
            thread: None,
        }
    }

    /// The session of an MCP client speaking as `bot` (through the bot's local account): the
    /// sender session of its `sessions_send` calls, where late replies are recorded.
    pub fn mcp(bot: &BotId, account: AccountId) -> SessionKey {
        SessionKey {
            bot: bot.clone(),
            platform: Platform::Local,
            account,
            chat: ChatId::from(format!("{MCP_PREFIX}client")),
            thread: None,
        }
    }

    /// `bot`'s private session for scheduled `job` (a heartbeat with `target = "none"`): on the
    /// bot's local account, recorded and never posted.
    pub fn scheduled(bot: &BotId, account: AccountId, job: &str) -> SessionKey {
        SessionKey {
            bot: bot.clone(),
            platform: Platform::Local,
            account,
            chat: ChatId::from(format!("{SCHEDULE_PREFIX}{job}")),
            thread: None,
        }
    }

    /// `bot`'s session for one conversation (A2A `contextId` `context`) with the external A2A
    /// agent `caller`: on the bot's local account, keyed apart from bot-to-bot backchannels so
    /// a caller named like a bot is never taken for it.
    pub fn a2a(bot: &BotId, account: AccountId, caller: &A2aCaller, context: &str) -> SessionKey {
        SessionKey {
            bot: bot.clone(),
            platform: Platform::Local,
            account,
            chat: ChatId::from(format!("{A2A_PREFIX}{caller}:{context}")),
            thread: None,
        }
    }

    /// The sender session of the A2A caller's deliveries to `bot`: where nothing is pushed (the
    /// caller reads its task), kept apart from its conversations.
    pub fn a2a_caller(bot: &BotId, account: AccountId, caller: &A2aCaller) -> SessionKey {
        SessionKey {
            bot: bot.clone(),
            platform: Platform::Local,
            account,
            chat: ChatId::from(format!("{A2A_PREFIX}{caller}")),
            thread: None,
        }
    }

    /// The record of `sender`'s conversation with the A2A agent outside baton `peer`
    /// (`sessions_send(target = "a2a:<peer>")`): the target session of those deliveries. No
    /// bot's session: nothing runs in it here.
    pub fn a2a_out(peer: &BotId, sender: &BotId) -> SessionKey {
        SessionKey {
            bot: peer.clone(),
            platform: Platform::Local,
            account: AccountId::from(peer.as_str()),
            chat: ChatId::from(format!("{A2A_OUT_PREFIX}{sender}")),
            thread: None,
        }
    }

    /// The A2A agent outside baton this session is the record of a conversation with, if it is.
    pub fn a2a_out_peer(&self) -> Option<&BotId> {
        (self.platform == Platform::Local && self.chat.as_str().starts_with(A2A_OUT_PREFIX))
            .then_some(&self.bot)
    }

    /// The external A2A agent this session is with (or sends as), if it is one's.
    pub fn a2a_peer(&self) -> Option<&str> {
        if self.platform != Platform::Local {
            return None;
        }
        let rest = self.chat.as_str().strip_prefix(A2A_PREFIX)?;
        Some(rest.split_once(':').map_or(rest, |(caller, _)| caller))
    }

    /// Where a question the bot asks in A2A task `run_id` of this session waits for the
    /// caller's answer: the task, as a thread of its conversation (no chat people read).
    pub fn a2a_task(&self, run_id: &str) -> SessionKey {
        SessionKey {
            thread: Some(ThreadId::from(run_id)),
            ..self.clone()
        }
    }

    /// The A2A task (its run id) this key is, when it is one ([`SessionKey::a2a_task`]), and
    /// the conversation it belongs to.
    pub fn a2a_task_of(&self) -> Option<(&str, SessionKey)> {
        self.a2a_peer()?;
        let run_id = self.thread.as_ref()?.as_str();
        let conversation = SessionKey {
            thread: None,
            ..self.clone()
        };
        Some((run_id, conversation))
    }

    /// Whether the session belongs to an MCP client: no backend stands behind it, so a
    /// message for it is recorded but wakes no turn.
    pub fn is_mcp(&self) -> bool {
        self.platform == Platform::Local && self.chat.as_str().starts_with(MCP_PREFIX)
    }

    /// Whether the session is a caller's outside baton (an A2A agent, an MCP client): what it
    /// is told leaves the process at once, with no later write of baton's to come first.
    pub fn is_external(&self) -> bool {
        self.a2a_peer().is_some() || self.is_mcp()
    }

    /// Whether the session is a conversation among bots (or with an MCP client, or a bot's
    /// private scheduled turns) rather than a chat people read: nothing said in it is posted
    /// anywhere.
    pub fn is_backchannel(&self) -> bool {
        self.platform == Platform::Local
            && [BACKCHANNEL_PREFIX, MCP_PREFIX, SCHEDULE_PREFIX, A2A_PREFIX]
                .iter()
                .any(|p| self.chat.as_str().starts_with(p))
    }

    /// A rendered key read back; `None` for anything that is not
    /// `bot:<bot>:<platform>:<account>:<chat>[:thread:<id>]`.
    fn read(key: &str) -> Option<SessionKey> {
        let rest = key.strip_prefix("bot:")?;
        let mut parts = rest.splitn(4, ':');
        let bot: BotId = parts.next()?.parse().ok()?;
        let platform: Platform = parts.next()?.parse().ok()?;
        let account = parts.next().filter(|s| !s.is_empty())?;
        let place = parts.next().filter(|s| !s.is_empty())?;
        let (chat, thread) = match place.rsplit_once(":thread:") {
            Some((chat, thread)) if !chat.is_empty() && !thread.is_empty() => {
                (chat, Some(ThreadId::from(thread)))
            }
            _ => (place, None),
        };
        Some(SessionKey {
            bot: bot.clone(),
            platform,
            account: AccountId::from(account),
            chat: ChatId::from(chat),
            thread,
        })
    }
}

/// Text that was given as a session key and is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a session key: write bot:<bot>:<platform>:<account>:<chat>[:thread:<id>] \
     (sessions_list and `baton sessions` show them)"
)]
pub struct NotASessionKey(pub String);

impl FromStr for SessionKey {
    type Err = NotASessionKey;

    fn from_str(key: &str) -> Result<SessionKey, NotASessionKey> {
        SessionKey::read(key).ok_or_else(|| NotASessionKey(key.to_owned()))
    }
}

/// Shown rendered in JSON (API rows, tool results), as it is stored.
impl Serialize for SessionKey {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// Read from JSON as rendered, refused like any other text that is not a key.
impl<'de> Deserialize<'de> for SessionKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Chat ids of [`SessionKey::backchannel`] sessions start with this, then the sender's id.
const BACKCHANNEL_PREFIX: &str = "a2a:";
/// Chat ids of sessions with external A2A agents start with this, then the caller's name.
const A2A_PREFIX: &str = "a2a-in:";
/// Chat ids of [`SessionKey::a2a_out`] records start with this, then the sender's id.
const A2A_OUT_PREFIX: &str = "a2a-out:";
/// Chat ids of sessions of MCP clients start with this.
const MCP_PREFIX: &str = "mcp:";
/// Chat ids of [`SessionKey::scheduled`] sessions start with this, then the job.
const SCHEDULE_PREFIX: &str = "schedule:";

/// The name an external A2A agent is known by (`a2a:<caller>` on the record): lowercase
/// letters, digits, `-` and `_`, like a bot's, so it can stand in a session key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct A2aCaller(String);

impl A2aCaller {
    /// A caller that did not name itself.
    pub fn anonymous() -> A2aCaller {
        A2aCaller("client".into())
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `name` as a caller's name, if it can be one.
    pub fn parse(name: &str) -> Option<A2aCaller> {
        (BotId::is_valid(name) && name.len() <= 64).then(|| A2aCaller(name.to_owned()))
    }
}

impl fmt::Display for A2aCaller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.render())
    }
}

/// Bot `b`'s session in local chat `chat`: for tests that need some session.
#[cfg(test)]
pub(crate) fn test_key(chat: &str) -> SessionKey {
    SessionKey {
        bot: "b".parse().unwrap(),
        platform: Platform::Local,
        account: "b".into(),
        chat: chat.into(),
        thread: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_follows_the_spec_layout() {
        let mut key = SessionKey {
            bot: "snark".parse().unwrap(),
            platform: Platform::Slack,
            account: "snark".into(),
            chat: "C1".into(),
            thread: None,
        };
        assert_eq!(key.render(), "bot:snark:slack:snark:C1");
        key.thread = Some("1700.1".into());
        let rendered = key.render();
        assert_eq!(rendered, "bot:snark:slack:snark:C1:thread:1700.1");
        assert_eq!(rendered.capacity(), rendered.len(), "sized up front");
        assert_eq!(key.to_string(), rendered);
        assert_eq!(key.chat_key().as_str(), "slack:C1:thread:1700.1");
        assert_eq!(key.render().parse(), Ok(key.clone()));
        key.thread = None;
        assert_eq!(key.render().parse(), Ok(key));
    }

    #[test]
    fn parse_refuses_what_is_not_a_key_and_keeps_colons_in_chats() {
        for wrong in ["caid", "bot:caid:nowhere:caid:C1", "bot:caid:local:caid:"] {
            assert_eq!(
                wrong.parse::<SessionKey>(),
                Err(NotASessionKey(wrong.to_owned()))
            );
        }
        let back = SessionKey::backchannel(
            &"caid".parse().unwrap(),
            "caid".into(),
            &"snark".parse().unwrap(),
        );
        assert_eq!(back.render(), "bot:caid:local:caid:a2a:snark");
        assert_eq!(back.render().parse(), Ok(back.clone()));
        assert!(back.is_backchannel());
        let dm: SessionKey = "bot:caid:local:caid:dm:alice".parse().unwrap();
        assert_eq!(dm.chat.as_str(), "dm:alice");
        assert!(!dm.is_backchannel());
        let private = SessionKey::scheduled(&"caid".parse().unwrap(), "caid".into(), "heartbeat");
        assert_eq!(private.render(), "bot:caid:local:caid:schedule:heartbeat");
        assert_eq!(private.render().parse(), Ok(private.clone()));
        assert!(private.is_backchannel());
    }

    /// An external A2A caller named like a bot is kept apart from that bot's backchannel, and
    /// its sessions are never posted.
    #[test]
    fn an_a2a_caller_named_like_a_bot_is_not_that_bot() {
        let caid: BotId = "caid".parse().unwrap();
        let snark = A2aCaller::parse("snark").unwrap();
        let talk = SessionKey::a2a(&caid, "caid".into(), &snark, "c1");
        let from = SessionKey::a2a_caller(&caid, "caid".into(), &snark);
        let bot = SessionKey::backchannel(&caid, "caid".into(), &"snark".parse().unwrap());
        assert_eq!(talk.render(), "bot:caid:local:caid:a2a-in:snark:c1");
        assert_eq!(talk.render().parse(), Ok(talk.clone()));
        assert_ne!(talk, bot);
        assert_ne!(from, bot);
        assert_eq!(
            (talk.a2a_peer(), from.a2a_peer()),
            (Some("snark"), Some("snark"))
        );
        assert_eq!(bot.a2a_peer(), None);
        assert!(talk.is_backchannel() && from.is_backchannel());
        assert!(A2aCaller::parse("Not A Name").is_none());
    }

    /// Callers outside baton are an A2A agent and an MCP client; a bot's own sessions, its
    /// backchannels and its chats are not.
    #[test]
    fn a2a_agents_and_mcp_clients_are_outside_baton() {
        let caid: BotId = "caid".parse().unwrap();
        let snark = A2aCaller::parse("snark").unwrap();
        assert!(SessionKey::a2a(&caid, "caid".into(), &snark, "c1").is_external());
        assert!(SessionKey::a2a_caller(&caid, "caid".into(), &snark).is_external());
        assert!(SessionKey::mcp(&caid, "caid".into()).is_external());
        let bot = SessionKey::backchannel(&caid, "caid".into(), &"snark".parse().unwrap());
        let chat: SessionKey = "bot:caid:slack:caid:C1".parse().unwrap();
        let private = SessionKey::scheduled(&caid, "caid".into(), "heartbeat");
        for inside in [bot, chat, private] {
            assert!(!inside.is_external(), "{inside}");
        }
    }
}
