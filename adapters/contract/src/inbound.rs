//! What an adapter hands the gateway: one normalized event per platform message.

use serde::{Deserialize, Serialize};

use crate::files::InboundFile;
use crate::ids::{AccountId, ChatId, MessageId, Platform, ThreadId, UserId};

/// Whether a chat is a direct conversation or a room with several people.
///
/// A thread is not a kind of its own: it is a group (or DM) chat with
/// [`InboundEvent::thread`] set, so chat policy follows the parent chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatKind {
    /// A one-to-one conversation with the bot (Slack `im`, Discord DM, Feishu `p2p`).
    Dm,
    /// A channel or group with several members (Slack channel/mpim, guild channel, Feishu group).
    Group,
}

/// Who wrote a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    /// The platform's id for the author.
    pub id: UserId,
    /// A display name, for transcripts and prompts; may be empty when the platform omits it.
    pub name: String,
    /// The author is a bot or an app (including other baton bots).
    pub is_bot: bool,
    /// The author is this very account: the gateway drops these (a bot never answers itself).
    pub is_self: bool,
}

/// The opaque handle an adapter needs to answer a native command privately
/// (Slack `response_url`, Discord interaction token). The gateway passes it back untouched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandReply {
    /// Platform-specific reply token; meaningful only to the adapter that issued it.
    pub token: String,
}

/// What kind of input the event carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InboundKind {
    /// An ordinary chat message (text commands like `/baton help` arrive this way too).
    Message,
    /// A native slash command (`/baton ...` on Slack, the Discord application command).
    /// `text` of the event holds the command line *after* `/baton`.
    Command {
        /// How to answer the caller privately.
        reply: CommandReply,
    },
}

/// One message from a platform, normalized (pipeline step 1).
///
/// Mentions stay as platform user ids: which baton bot a platform id belongs to is the
/// gateway's knowledge (it holds every account's identity), not the adapter's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InboundEvent {
    /// Which platform it came from.
    pub platform: Platform,
    /// Which account (bot login) received it; dedupe and sessions are per account.
    pub account: AccountId,
    /// The platform's delivery id (Slack `event_id`, Feishu `event_id`), when it has one. Nothing
    /// in the gateway reads it any more: dedupe goes by [`InboundEvent::message_id`], which a
    /// redelivery repeats as well. It stays in the event (and so in its inbox row while it runs).
    pub event_id: Option<String>,
    /// The message's id; replies reference it.
    pub message_id: MessageId,
    /// Where it was said.
    pub chat: ChatId,
    /// DM or group.
    pub chat_kind: ChatKind,
    /// The thread, when the message is inside one.
    pub thread: Option<ThreadId>,
    /// Who said it.
    pub sender: Sender,
    /// The text, with platform mention markup rewritten to readable `@name` where possible.
    pub text: String,
    /// Structural mentions (platform user ids), in order of appearance.
    pub mentions: Vec<UserId>,
    /// How many of [`InboundEvent::mentions`] open the text, before any other word: the people
    /// the message is addressed to. The rest are named in its body (`@snark ask @caid: ...` is
    /// for snark, about caid). 0 when the message opens with a word, or the adapter cannot tell.
    #[serde(default)]
    pub leading_mentions: usize,
    /// `@everyone`, `@here`, `@_all` and the like.
    pub mentions_everyone: bool,
    /// The message this one replies to, if any.
    pub reply_to: Option<MessageId>,
    /// The author of the message replied to, when the platform says (a reply to a bot's own
    /// message counts as mentioning it).
    pub reply_to_author: Option<UserId>,
    /// When it was sent, in milliseconds since the Unix epoch.
    pub timestamp_ms: i64,
    /// Message or native command.
    pub kind: InboundKind,
    /// The files posted with the message (Slack files, Discord attachments, a Feishu image or
    /// file message), to be fetched with [`Adapter::download`](crate::Adapter::download).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<InboundFile>,
    /// The platform's payload as received, kept for the transcript; `Null` when not kept.
    #[serde(default)]
    pub raw: serde_json::Value,
}

impl InboundEvent {
    /// A plain text message with no mentions; adapters and tests fill in the rest.
    pub fn text_message(
        platform: Platform,
        account: AccountId,
        chat: ChatId,
        chat_kind: ChatKind,
        sender: Sender,
        message_id: MessageId,
        text: impl Into<String>,
    ) -> Self {
        Self {
            platform,
            account,
            event_id: None,
            message_id,
            chat,
            chat_kind,
            thread: None,
            sender,
            text: text.into(),
            mentions: Vec::new(),
            leading_mentions: 0,
            mentions_everyone: false,
            reply_to: None,
            reply_to_author: None,
            timestamp_ms: 0,
            kind: InboundKind::Message,
            files: Vec::new(),
            raw: serde_json::Value::Null,
        }
    }
}
