//! Session keys: the conversation state of one bot in one chat.
//!
//! The key is `bot:<bot>:<platform>:<account>:<chat>[:thread:<id>]` (SPEC.md section 1). It is
//! built in one place so that every module (transcript, lanes, tools, CLI) spells it the same.

use std::fmt;

use baton_contract::{AccountId, ChatId, Platform, ThreadId};

/// Where a session lives: one bot's account in one chat, optionally one thread of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    /// The bot.
    pub bot: String,
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
    /// The key as stored and shown.
    pub fn render(&self) -> String {
        self.to_string()
    }

    /// The key of the chat (and thread) this session is in, shared by every bot there:
    /// `<platform>:<chat>[:thread:<id>]`. History buffers, chat settings and bot chains use it.
    pub fn chat_key(&self) -> String {
        chat_key(self.platform, &self.chat, self.thread.as_ref())
    }
}

/// `<platform>:<chat>[:thread:<id>]`.
pub fn chat_key(platform: Platform, chat: &ChatId, thread: Option<&ThreadId>) -> String {
    match thread {
        Some(thread) => format!("{platform}:{chat}:thread:{thread}"),
        None => format!("{platform}:{chat}"),
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bot:{}:{}:{}:{}",
            self.bot, self.platform, self.account, self.chat
        )?;
        if let Some(thread) = &self.thread {
            write!(f, ":thread:{thread}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_follows_the_spec_layout() {
        let mut key = SessionKey {
            bot: "snark".into(),
            platform: Platform::Slack,
            account: "snark".into(),
            chat: "C1".into(),
            thread: None,
        };
        assert_eq!(key.render(), "bot:snark:slack:snark:C1");
        key.thread = Some("1700.1".into());
        assert_eq!(key.render(), "bot:snark:slack:snark:C1:thread:1700.1");
        assert_eq!(key.chat_key(), "slack:C1:thread:1700.1");
    }
}
