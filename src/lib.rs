//! baton: a gateway that puts many AI bots into group chats and keeps them well-behaved.

pub mod config;
pub mod store;
pub mod turn;
