//! What happens, as it happens: the gateway's live event stream (`GET /api/events`, the
//! dashboard).
//!
//! The flows and the turn kernel announce each thing they do once, where they do it
//! ([`Events::emit`]): an event received and whether it woke a bot, a turn started and ended, a
//! tool call and its result, a transcript entry written, a delivery's state, a chain's move, a
//! guard's refusal, an account's connection state. Nothing here reads the store.
//!
//! The bus never slows the pipeline down: emitting serialises the event once (the frame every
//! stream reader sends as it is), takes a short lock, stamps the event with the next id, keeps
//! it in a bounded replay ring ([`REPLAY`] events) and broadcasts it. A
//! subscriber that falls [`LAG`] events behind loses its place instead of holding the sender
//! back; it reconnects with the last id it saw and is given what it missed from the ring.
//!
//! Adding an event kind is one variant of [`Event`] and its emit site. This module sits low:
//! it imports nothing of the gateway, so every flow can emit.

mod activity;
mod bus;
mod event;
mod frame;

pub use activity::{Activity, RunningTurn};
pub use bus::{Events, LAG, REPLAY, Stamped, Subscription};
pub use event::{Event, Received, TurnOutcome};
