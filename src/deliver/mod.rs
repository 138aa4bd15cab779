//! Pipeline step 12, delivery: split a reply to the platform's limit and send it exactly once,
//! whole or streamed (posted while it is written, then edited: `stream.rs`, `draft.rs`).

mod chunk;
mod draft;
mod send;
mod stream;

pub use chunk::split;
pub use draft::Draft;
pub use send::{DeliveryFailed, Target, Undelivered, deliver};
pub use stream::Streamer;
