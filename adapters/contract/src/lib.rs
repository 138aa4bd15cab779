//! The contract between baton's gateway and its platform adapters.
//!
//! Every platform (Slack, Discord, Feishu/Lark, the built-in local channel) turns what it
//! receives into one [`InboundEvent`] and sends what the gateway hands it as an
//! [`OutboundMessage`]. Nothing in here decides *policy* (who may speak, which bot wakes,
//! what is a duplicate): that belongs to the gateway's pipeline. An adapter only knows its
//! platform and this crate, so the arrows point one way: gateway -> adapter -> contract.

mod adapter;
mod backoff;
mod chat_key;
mod connection;
mod feedback;
mod files;
mod ids;
mod inbound;
mod leading;
mod native_stream;
mod outbound;
mod run_connection;
mod secret;
mod sibling_post;
mod stub;
mod upload;
mod webhook;

pub use adapter::{Adapter, AdapterError, Capabilities, EventSink, NotTaken};
pub use backoff::Backoff;
pub use chat_key::ChatKey;
pub use connection::{ConnectionCell, ConnectionState, Receive, Trouble};
pub use feedback::{DeleteMessage, EditMessage, Preview, Typing, TypingTarget};
pub use files::{DownloadError, Downloaded, FileRef, InboundFile, fetch};
pub use ids::{AccountId, ChatId, MessageId, Platform, ThreadId, UnknownPlatform, UserId};
pub use inbound::{ChatKind, CommandReply, InboundEvent, InboundKind, Sender};
pub use leading::leading_mentions;
pub use native_stream::{StreamFor, StreamStart, StreamText};
pub use outbound::{OutboundMessage, SendError, SentMessage};
pub use run_connection::{Link, LinkError, SessionEnd, run_connection};
pub use secret::Secret;
pub use sibling_post::SiblingPost;
pub use stub::{Call, StubAdapter};
pub use upload::OutboundFile;
pub use webhook::{WebhookRequest, WebhookResponse};
