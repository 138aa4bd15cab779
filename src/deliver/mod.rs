//! Pipeline step 12, delivery: split a reply to the platform's limit and send it exactly once.

mod chunk;

pub use chunk::split;
