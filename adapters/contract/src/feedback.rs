//! What an adapter needs for live feedback while a bot works: editing a posted message in place
//! (a reply that streams in), deleting a draft post nobody needs, and a typing indicator that is shown, renewed and taken away.
//!
//! Both are optional per platform: the [`Adapter`](crate::Adapter) methods default to "not
//! supported", and the gateway then posts whole replies and shows no indicator.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ids::{ChatId, MessageId, ThreadId};

/// Replace the text of a message this account posted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditMessage {
    /// The chat the message is in.
    pub chat: ChatId,
    /// Its thread, if any (Discord threads are channels of their own).
    pub thread: Option<ThreadId>,
    /// The platform id of the message, as [`SentMessage`](crate::SentMessage) returned it.
    pub message_id: MessageId,
    /// The whole new text (within the platform's limit).
    pub text: String,
}

/// Delete a message this account posted: a streamed draft that the finished reply does not
/// need (text the model took back before calling tools, a reply its flow refused at the end).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteMessage {
    /// The chat the message is in.
    pub chat: ChatId,
    /// Its thread, if any (Discord threads are channels of their own).
    pub thread: Option<ThreadId>,
    /// The platform id of the message, as [`SentMessage`](crate::SentMessage) returned it.
    pub message_id: MessageId,
}

/// The reply shown while it is written in a place that is not a message (Telegram's drafts in
/// private chats): nothing to edit or delete afterwards, and the finished reply is then posted
/// as usual.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    /// The chat.
    pub chat: ChatId,
    /// The thread the reply goes to, if any.
    pub thread: Option<ThreadId>,
    /// One id per reply, the same for every update of it (Telegram's `draft_id`, non-zero).
    pub draft_id: u32,
    /// The text so far (within the platform's limit).
    pub text: String,
}

/// Where a typing indicator shows: the chat and thread the reply goes to, and the message that
/// woke the bot (Feishu/Lark put a reaction on it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypingTarget {
    /// The chat.
    pub chat: ChatId,
    /// The thread the reply goes to, if any.
    pub thread: Option<ThreadId>,
    /// The message being answered.
    pub message: MessageId,
}

/// A typing indicator that is showing, with what the adapter needs to renew and end it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Typing {
    /// Show it again this often while the turn runs (Discord's lasts 10 s); `None`: it stays
    /// until it is taken away.
    pub renew_every: Option<Duration>,
    /// The platform's handle on it (Feishu's reaction id), if it has one.
    pub handle: Option<String>,
}
