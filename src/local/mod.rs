//! The built-in local channel: rooms and DMs in the gateway's own process, reached through the
//! terminal (`baton chat`), `/v1/chat/completions` and `/api/local/rooms/...`.

mod adapter;
mod hub;
mod mentions;
mod sender_name;

pub use adapter::{LOCAL_MAX_MESSAGE_CHARS, LocalAdapter};
pub use hub::{
    Accepted, Handed, HubRefusal, LocalHub, MAX_ID_BYTES, NotRecorded, POSTED_KEYS, Post,
    RoomMessage, check_sender,
};
pub use sender_name::{MAX_SENDER_CHARS, NameRefused, NameRules};
