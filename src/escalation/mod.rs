//! Escalations once they are asked: an approval request decided by a person or
//! another bot ([`decide_approval`]), and whatever comes of a question or request routed back to
//! the asking bot's session ([`route_back`]).
//!
//! Asking is the `escalate_to_user` tool's (`tools/escalate.rs`); recognising a human's answer
//! is the pipeline's answer step (`dispatcher/answer_step.rs`). Both sides meet here, below the
//! admin commands and the tools that decide and above the relay that wakes the asker.

mod approval;
mod route_back;

pub(crate) use approval::{DecideError, Decision, Resolver, decide_approval};
pub(crate) use route_back::route_back;
