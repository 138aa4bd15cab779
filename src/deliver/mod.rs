//! Pipeline step 12, delivery: split a reply to the platform's limit and send it exactly once,
//! and, where the platform does not, let the other baton bots in the chat see it.

mod chunk;
mod handover;
mod send;

pub use chunk::split;
pub use handover::{Handover, RunHandedOver};
pub use send::{DeliveryFailed, Target, Undelivered, deliver};
