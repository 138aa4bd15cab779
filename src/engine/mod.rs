//! The turn kernel, below every flow that takes turns (the pipeline, `sessions_send`, chains,
//! schedules, escalations): the service handle they share ([`Engine`]), one session turn
//! (`session_turn.rs`: record the session, open the run's journal (`journal.rs`, step 13: the
//! transcript), wait for the lane and for the
//! session's lock across instances in `session_lock.rs`, take the turn, post what it says),
//! one `say` for lines posted through a bot's account that are not its turn (`say.rs`), the turn itself (`turn.rs`) and what it is given (`context.rs`; the
//! artifacts its message names, in `artifact_lines.rs`), who a turn calls tools as
//! ([`Caller`]), the files a turn attaches to its reply (`reply_files.rs`), the gateway's own
//! lines that must wake no bot (`own_notices.rs`), the senders waiting for a `sessions_send` run
//! ([`Waiters`]), and what people see while a turn answers into a chat (`feedback.rs`:
//! streaming; `typing.rs`; the
//! `/v1` listeners in `taps.rs`; a flow's say over a reply in `reply_gate.rs`).
//!
//! It names none of the flows above it: they call down into it. The one turn that reaches up (a
//! tool that runs a turn of its own) goes through [`BindTools`], which the gateway hands it.

mod artifact_lines;
mod budget_step;
mod caller;
mod context;
mod feedback;
mod handle;
mod journal;
mod own_notices;
mod reply_bound;
mod reply_files;
mod reply_gate;
mod running;
mod say;
mod session_lock;
mod session_turn;
mod taps;
#[cfg(test)]
pub(crate) mod testing;
mod turn;
mod turn_end;
mod typing;

pub(crate) use artifact_lines::{InlineBudget, artifact_line, reference as artifact_reference};
pub use caller::Caller;
pub(crate) use context::Attached;
pub(crate) use feedback::{Answered, ChatReply};
pub use handle::{BindTools, Engine, WeakEngine};
pub(crate) use journal::journal;
pub use journal::{AnswerQueued, Journal, RecordingTools};
pub(crate) use own_notices::OwnNotices;
pub(crate) use reply_files::{AttachRefused, attach};
pub(crate) use reply_gate::{NotAdmitted, ReplyGate};
pub use running::{Running, Stop};
pub(crate) use say::{Line, say};
pub(crate) use session_turn::{Refused, Seat, SessionTurn};
pub use taps::{Tap, Taps};
pub(crate) use turn::{Heard, History, Recall, TurnPlan};
pub(crate) use turn_end::{TurnEnd, TurnFailure};
pub(crate) use typing::{
    left_up as typing_left_up, sweep as sweep_typing, take_down as take_down_typing,
};
