//! A baton bot's post as another baton bot's account reads it.
//!
//! Some platforms never deliver one bot's posts to another (Feishu/Lark), so the gateway hands
//! them over itself. Only the receiving account knows how the platform marks a mention up and
//! which ids mean itself, so it reads the post ([`crate::Adapter::read_sibling_post`]).

use crate::ids::UserId;

/// What a post says, as the receiving account reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiblingPost {
    /// The text, with mention markup rewritten to readable `@name`.
    pub text: String,
    /// Structural mentions, in order, as platform ids the gateway knows (the receiving
    /// account's own id for a mention of it).
    pub mentions: Vec<UserId>,
    /// The post mentions everyone (`@all`).
    pub mentions_everyone: bool,
    /// The receiving account's own id, when the post replies to a message it posted (which
    /// counts as mentioning it).
    pub reply_to_author: Option<UserId>,
}

impl SiblingPost {
    /// `text` as it is, mentioning nobody.
    pub fn plain(text: &str) -> Self {
        Self {
            text: text.to_owned(),
            mentions: Vec::new(),
            mentions_everyone: false,
            reply_to_author: None,
        }
    }
}
