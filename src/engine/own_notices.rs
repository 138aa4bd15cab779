//! Lines the gateway itself posts through a bot's account — admin answers, rate-limit and
//! policy notices, the short error reply — are not that bot speaking. Other bots in the chat see
//! them as the bot's messages, so without this an admin's `/baton activation always` answer
//! would wake every `always` bot and start a bot chain.
//!
//! Each such line is remembered *before* it is sent (so no arrival can race it) and matched by
//! chat, author and text for a few minutes.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::bot_id::BotId;

/// How long a posted notice is recognised.
const REMEMBER_FOR: Duration = Duration::from_secs(300);
/// Bound on remembered notices.
const CAPACITY: usize = 1024;

struct Notice {
    chat: String,
    bot: BotId,
    text: String,
    at: Instant,
}

/// Recently posted gateway lines.
#[derive(Default)]
pub(crate) struct OwnNotices {
    recent: Mutex<VecDeque<Notice>>,
}

impl OwnNotices {
    /// `bot` is about to post `text` in `chat` on the gateway's behalf.
    pub(crate) fn remember(&self, chat: &str, bot: &BotId, text: &str) {
        let mut recent = self.recent.lock().expect("notice list poisoned");
        let now = Instant::now();
        while recent
            .front()
            .is_some_and(|n| now.duration_since(n.at) > REMEMBER_FOR || recent.len() >= CAPACITY)
        {
            recent.pop_front();
        }
        recent.push_back(Notice {
            chat: chat.to_owned(),
            bot: bot.clone(),
            text: text.trim().to_owned(),
            at: now,
        });
    }

    /// Whether a message by `bot` in `chat` is (a chunk of) a gateway line.
    pub(crate) fn is_notice(&self, chat: &str, bot: &BotId, text: &str) -> bool {
        let text = text.trim();
        let recent = self.recent.lock().expect("notice list poisoned");
        recent.iter().any(|n| {
            n.chat == chat
                && &n.bot == bot
                && !text.is_empty()
                && n.at.elapsed() <= REMEMBER_FOR
                && n.text.contains(text)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_a_notice_and_its_chunks_only_in_its_chat_and_author() {
        let notices = OwnNotices::default();
        let (alpha, beta): (BotId, BotId) = ("alpha".parse().unwrap(), "beta".parse().unwrap());
        notices.remember(
            "local:room",
            &alpha,
            "Activation is now `always`.\n\nSecond part.",
        );
        assert!(notices.is_notice("local:room", &alpha, "Second part."));
        assert!(notices.is_notice("local:room", &alpha, " Activation is now `always`."));
        assert!(!notices.is_notice("local:other", &alpha, "Second part."));
        assert!(!notices.is_notice("local:room", &beta, "Second part."));
        assert!(!notices.is_notice("local:room", &alpha, "something the bot said"));
    }
}
