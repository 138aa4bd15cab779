//! `[feedback]`, and a bot's `feedback = { ... }` over it: what people see while a bot works
//! (a typing indicator, and a reply that streams in by editing its post).

use serde::Deserialize;

/// How a reply reaches the chat while the model writes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StreamMode {
    /// The whole reply is posted when the turn ends.
    Off,
    /// The reply appears while it is written: one post, edited in place.
    #[default]
    Edit,
    /// The platform's own way where it has one (Telegram's drafts in private chats: the reply
    /// shown as a draft, then posted whole); `edit` elsewhere.
    Native,
}

/// `[feedback]`: the settings every bot has unless it says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct FeedbackConfig {
    /// Show a typing indicator while a turn addressed to the bot runs.
    pub typing: bool,
    /// Whether replies stream into the chat.
    pub stream: StreamMode,
    /// Nothing is shown before this many characters of the reply are certain.
    pub stream_min_chars: usize,
    /// At most one edit of a post in this interval (platform rate limits).
    pub edit_interval_ms: u64,
}

impl Default for FeedbackConfig {
    fn default() -> Self {
        Self {
            typing: true,
            stream: StreamMode::Edit,
            stream_min_chars: 60,
            edit_interval_ms: 1200,
        }
    }
}

impl FeedbackConfig {
    /// The shortest `edit_interval_ms` accepted: faster edits only meet rate limits.
    pub const MIN_EDIT_INTERVAL_MS: u64 = 100;

    /// These settings with a bot's own `feedback = { ... }` laid over them.
    pub fn with(&self, bot: &FeedbackOverride) -> FeedbackConfig {
        FeedbackConfig {
            typing: bot.typing.unwrap_or(self.typing),
            stream: bot.stream.unwrap_or(self.stream),
            stream_min_chars: bot.stream_min_chars.unwrap_or(self.stream_min_chars),
            edit_interval_ms: bot.edit_interval_ms.unwrap_or(self.edit_interval_ms),
        }
    }
}

/// A bot's `feedback = { ... }`: each key set here replaces `[feedback]`'s for this bot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct FeedbackOverride {
    /// `typing` for this bot.
    pub typing: Option<bool>,
    /// `stream` for this bot.
    pub stream: Option<StreamMode>,
    /// `stream_min_chars` for this bot.
    pub stream_min_chars: Option<usize>,
    /// `edit_interval_ms` for this bot.
    pub edit_interval_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bot_overrides_only_what_it_sets() {
        let global = FeedbackConfig::default();
        let bot = FeedbackOverride {
            stream: Some(StreamMode::Off),
            ..FeedbackOverride::default()
        };
        let mine = global.with(&bot);
        assert_eq!(mine.stream, StreamMode::Off);
        assert_eq!((mine.typing, mine.stream_min_chars), (true, 60));
    }
}
