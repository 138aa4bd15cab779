//! Pipeline step 12, delivery: split a reply to the platform's limit and send it exactly once,
//! and, where the platform does not, let the other baton bots in the chat see it; whole or
//! streamed (posted while it is written, then edited: `stream.rs`, `draft.rs`); the files a
//! run attached follow its text (`files.rs`).

mod attempt;
mod chunk;
mod draft;
mod files;
mod handover;
mod send;
mod stream;

pub use attempt::{DeliveryFailed, Target, Undelivered};
pub use chunk::{posts_end, split};
pub use draft::Draft;
pub use handover::{Handover, RunHandedOver};
pub use send::deliver;
pub use stream::Streamer;
