//! The turn kernel, below every flow that takes turns (the pipeline, `sessions_send`, chains,
//! schedules, escalations): the service handle they share ([`Services`]), one turn
//! ([`take_turn`]), who a turn calls tools as ([`Caller`]), what a turn is given
//! (`context.rs`), the gateway's own lines that must wake no bot (`own_notices.rs`) and the
//! senders waiting for a `sessions_send` run ([`Waiters`]).
//!
//! It names none of the flows above it: they call down into it.

mod caller;
mod context;
mod own_notices;
mod services;
mod turn;
mod waiters;

pub use caller::Caller;
pub use services::Services;
pub(crate) use turn::{Heard, Recall, TurnEnd, TurnFailure, TurnPlan, take_turn, undelivered};
pub(crate) use waiters::Waited;
pub use waiters::{RunResult, Waiters};
