//! [`ChatKey`]: one place in a chat, the same for every bot and account there.

use std::fmt;

use serde::Serialize;

use crate::{ChatId, Platform, ThreadId};

/// A chat, or one thread of it, as every bot there shares it: `<platform>:<chat>` or
/// `<platform>:<chat>:thread:<id>`. The history buffer, chat settings, bot-to-bot chains,
/// escalations and the gateway's own notices are kept per chat key. Built only from its parts,
/// so every module spells it the same; it is text only where it is stored or shown.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ChatKey(String);

impl ChatKey {
    /// The key of `chat` on `platform`, or of `thread` in it: built in one allocation of its
    /// length, since every event makes a few (`format!` grew it two or three times).
    pub fn new(platform: Platform, chat: &ChatId, thread: Option<&ThreadId>) -> ChatKey {
        let (platform, chat) = (platform.as_str(), chat.as_str());
        let thread = thread.map(ThreadId::as_str);
        let len =
            platform.len() + 1 + chat.len() + thread.map_or(0, |t| ":thread:".len() + t.len());
        let mut key = String::with_capacity(len);
        key.push_str(platform);
        key.push(':');
        key.push_str(chat);
        if let Some(thread) = thread {
            key.push_str(":thread:");
            key.push_str(thread);
        }
        ChatKey(key)
    }

    /// The key as stored and shown.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ChatKey {
    /// Honours width and alignment (`{:<20}`) for tables.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_the_platform_the_chat_and_the_thread() {
        let chat = ChatId::from("C1");
        assert_eq!(
            ChatKey::new(Platform::Slack, &chat, None).as_str(),
            "slack:C1"
        );
        let thread = ThreadId::from("1700.1");
        let key = ChatKey::new(Platform::Slack, &chat, Some(&thread));
        assert_eq!(key.to_string(), "slack:C1:thread:1700.1");
        assert_eq!(key.0.capacity(), key.0.len(), "sized up front");
    }
}
