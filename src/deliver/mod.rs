//! Pipeline step 12, delivery: split a reply to the platform's limit and send it exactly once.

mod chunk;
mod send;

pub use chunk::split;
pub use send::{DeliveryFailed, Target, Undelivered, deliver};
