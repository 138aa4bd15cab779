//! A file the gateway hands an adapter to post into a chat: an artifact a bot attached to its
//! reply (`reply_attach`, or an `http`/`command` backend's `attachments`).

use bytes::Bytes;

use crate::ids::{ChatId, MessageId, ThreadId};

/// One file to post, as its own message in the place the reply's text goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundFile {
    /// Where to post.
    pub chat: ChatId,
    /// Post inside this thread (never also to the channel).
    pub thread: Option<ThreadId>,
    /// Reply to this message where the platform has replies (Discord, Feishu).
    pub reply_to: Option<MessageId>,
    /// The artifact the file is (`art-…`): a platform without uploads can name it instead.
    pub artifact: String,
    /// The file name shown in the chat.
    pub name: String,
    /// Its media type (`image/png`), which decides an image post where the platform has one.
    pub media_type: String,
    /// The bytes.
    pub content: Bytes,
    /// Stable for this file of this reply: a retry with the same key must not post twice
    /// (Feishu `uuid`, Discord `nonce`; Slack has none, so the adapter must not blindly retry).
    pub idempotency_key: String,
}

impl OutboundFile {
    /// Whether the platform should show it as an image (its media type is `image/…`).
    pub fn is_image(&self) -> bool {
        self.media_type
            .trim()
            .to_ascii_lowercase()
            .starts_with("image/")
    }
}
