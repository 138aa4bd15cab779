//! What a fake platform received as an uploaded file, recorded the same way by every fake.

/// One file that reached a fake platform's chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The channel or chat it was posted to.
    pub channel: String,
    /// The thread it went into (Slack `thread_ts`, a Discord thread channel, the Feishu
    /// message it replies to), if any.
    pub thread: Option<String>,
    /// The file name.
    pub name: String,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// How the platform shows it (`file`, or Feishu's `image`).
    pub kind: String,
}
