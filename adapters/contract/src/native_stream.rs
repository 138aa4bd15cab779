//! A reply streamed by the platform's own streaming (`stream = "native"`): Slack's
//! `chat.startStream` / `appendStream` / `stopStream`, Feishu/Lark's CardKit streaming card.
//!
//! Such a stream is a message like any post (it has a platform id, it is recorded and handed
//! over like one), but while it is live its text grows through the platform's streaming calls,
//! which have no edit cap, and it is ended once with its final text. The gateway starts it with
//! the first certain text, updates it only with text that extends what it shows, and ends it
//! with exactly the text the post must keep.

use serde::{Deserialize, Serialize};

use crate::ids::{ChatId, MessageId, ThreadId, UserId};
use crate::outbound::SentMessage;

/// Who a stream is for: the person who asked (Slack streams to channels need them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamFor {
    /// The person who asked, if the reply answers someone.
    pub user: Option<UserId>,
}

/// How [`Adapter::stream_start`](crate::Adapter::stream_start) made the post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamStart {
    /// A live stream: update and end it with the stream calls.
    Live(SentMessage),
    /// The platform refuses streams here (a workspace without the methods, a place it does not
    /// stream to): the text was posted as an ordinary message instead, to be edited.
    Posted(SentMessage),
}

/// New text for a live stream, or its final text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamText {
    /// The chat the stream is in.
    pub chat: ChatId,
    /// Its thread, if any.
    pub thread: Option<ThreadId>,
    /// The stream's message, as [`StreamStart`] returned it.
    pub message_id: MessageId,
    /// What the stream shows now; `None` when not known (an earlier attempt of the reply made
    /// it before a restart).
    pub shown: Option<String>,
    /// The whole text it should show (within the platform's limit). For an update, `shown` is
    /// a prefix of it.
    pub text: String,
}

impl StreamText {
    /// What `text` adds to what is shown, when it only adds to it.
    pub fn added(&self) -> Option<&str> {
        self.text.strip_prefix(self.shown.as_deref()?)
    }
}
