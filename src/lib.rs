//! baton: a gateway that puts many AI bots into group chats and keeps them well-behaved.

pub mod config;
pub mod deliver;
pub mod turn;
pub mod guards;
pub mod lanes;
pub mod outcome;
