//! What the gateway hands an adapter to post, and how a post can fail.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ids::{ChatId, MessageId, ThreadId, UserId};
use crate::inbound::CommandReply;

/// One chunk of text to post. The gateway has already split it to the adapter's
/// [`Capabilities::max_message_chars`](crate::Capabilities::max_message_chars).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboundMessage {
    /// Where to post.
    pub chat: ChatId,
    /// Post inside this thread (never also to the channel).
    pub thread: Option<ThreadId>,
    /// Reply to this message where the platform has replies (Discord, Feishu).
    pub reply_to: Option<MessageId>,
    /// The text.
    pub text: String,
    /// Stable for this chunk of this reply: a retry with the same key must not post twice
    /// (Feishu `uuid`, Discord `nonce` + `enforce_nonce`; Slack has no key, so the adapter
    /// must not blindly retry a send whose outcome it does not know).
    pub idempotency_key: String,
    /// Answer a native command privately to this user instead of posting to the chat.
    pub ephemeral: Option<(UserId, CommandReply)>,
}

/// A post that reached the platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentMessage {
    /// The platform's id of the posted message, for the transcript. Ephemeral answers
    /// may not have one; adapters then return an empty id.
    pub message_id: MessageId,
}

/// Why a post failed. The variant tells the gateway whether a retry is safe.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SendError {
    /// The platform asked us to wait (HTTP 429, Feishu 99991400). Safe to retry after the wait:
    /// nothing was posted.
    #[error("rate limited by the platform; retry after {retry_after:?}")]
    RateLimited {
        /// How long the platform asked us to wait.
        retry_after: Duration,
    },
    /// The platform refused the post (Slack `ok:false`, a 4xx). Retrying would fail the same way.
    #[error("the platform refused the message: {code}: {message}")]
    Rejected {
        /// The platform's error code (e.g. Slack `channel_not_found`, Discord `50035`).
        code: String,
        /// The platform's explanation.
        message: String,
    },
    /// The request's fate is unknown (connection reset, timeout, 5xx). The gateway does not retry
    /// unless the platform honours the idempotency key, so nothing is posted twice.
    #[error("could not reach the platform: {0}")]
    Transport(String),
}
