//! One turn in a session, the way every flow takes it: the run gets its journal, the turn waits
//! for the session's lane, then for the session across instances (`session_lock.rs`; up to a
//! deadline, when the flow has one), the bot takes its turn (the session recorded with the line
//! that woke it, in one store job), and what it says may be posted, recorded in the same run.
//!
//! What is left to each flow is its own: the pipeline answers the event it was woken by, the
//! relay settles a delivery, the schedule suppresses duplicate heartbeats, a chain moves the
//! turn on. Everything they share happens here, once, so a change to how a turn is taken (its
//! events, its streaming) is made in one place.

use baton_contract::MessageId;
use tokio::time::Instant;

use super::Engine;
use super::journal::Journal;
use super::session_lock::{SessionHold, hold, hold_until};
use super::turn::{TurnPlan, take_turn, undelivered};
use super::turn_end::TurnEnd;
use crate::backend::TextSink;
use crate::lanes::{Lane, LaneGuard, QueueFull};
use crate::pen::Arrival;
use crate::post::{Target, deliver};
use crate::roster::Account;
use crate::session::SessionKey;

/// Where a run takes its turn and how long it may wait for the session.
pub(crate) struct Seat<'a> {
    /// The session.
    pub session: &'a SessionKey,
    /// The run every entry is recorded under. It derives from what caused the run, so a replay
    /// reuses its idempotency keys and cannot post twice.
    pub run_id: String,
    /// The lane the turn waits on.
    pub lane: Lane,
}

/// The session stayed busy past the seat's deadline; the run did not get it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the session was still busy at the deadline")]
pub(crate) struct SessionBusy;

/// A turn refused at once: the bot's lane or the session already has its maximum of turns
/// waiting (waiting turns hold memory). The run's journal is handed back to record why.
pub(crate) struct Refused {
    /// The run's journal.
    pub journal: Journal,
    /// Which queue is full.
    pub full: QueueFull,
}

/// A run holding its session: recorded, with its journal and its lane slot (released when this
/// is dropped).
pub(crate) struct SessionTurn<'a> {
    engine: &'a Engine,
    journal: Journal,
    /// The session across instances (`session_lock.rs`), taken after the lane slot.
    _hold: SessionHold,
    _slot: LaneGuard,
}

impl<'a> SessionTurn<'a> {
    /// Open the run's journal and wait for the session's lane, however long the session stays
    /// busy. The session is recorded when the turn starts ([`SessionTurn::take`]), in the job
    /// that records the line that woke the bot.
    pub(crate) async fn enter(engine: &'a Engine, seat: Seat<'_>) -> SessionTurn<'a> {
        let journal = Journal::of(engine, seat.session, seat.run_id);
        let lanes = engine.lanes();
        let slot = lanes.enter(seat.lane, journal.session()).await;
        let hold = hold(engine, seat.session).await;
        SessionTurn {
            engine,
            journal,
            _hold: hold,
            _slot: slot,
        }
    }

    /// [`SessionTurn::enter`] for a turn a chat message asked for: refused at once when a queue
    /// is full ([`Refused`]), and, for a message run again after a stop (`arrival`), recorded
    /// without writing the message a second time.
    pub(crate) async fn enter_queued(
        engine: &'a Engine,
        seat: Seat<'_>,
        arrival: Arrival,
    ) -> Result<SessionTurn<'a>, Refused> {
        let journal = Journal::of(engine, seat.session, seat.run_id).replaying(arrival);
        let lanes = engine.lanes();
        let queued = match lanes.queue(seat.lane, journal.session()) {
            Ok(queued) => queued,
            Err(full) => return Err(Refused { journal, full }),
        };
        let slot = queued.wait().await;
        let hold = hold(engine, seat.session).await;
        Ok(SessionTurn {
            engine,
            journal,
            _hold: hold,
            _slot: slot,
        })
    }

    /// [`SessionTurn::enter`], giving up at `until`: for a flow whose turn is worth nothing
    /// late (a chain turn's deadline counts the wait too).
    pub(crate) async fn enter_until(
        engine: &'a Engine,
        seat: Seat<'_>,
        until: Instant,
    ) -> Result<SessionTurn<'a>, SessionBusy> {
        let journal = Journal::of(engine, seat.session, seat.run_id);
        let lanes = engine.lanes();
        let entering = lanes.enter(seat.lane, journal.session());
        let slot = tokio::time::timeout_at(until, entering)
            .await
            .map_err(|_| SessionBusy)?;
        let hold = hold_until(engine, seat.session, Some(until))
            .await
            .map_err(|_| SessionBusy)?;
        Ok(SessionTurn {
            engine,
            journal,
            _hold: hold,
            _slot: slot,
        })
    }

    /// The run's journal.
    pub(crate) fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The bot takes its turn (steps 10 and 11: recorded, run under its time limit, outcome
    /// decided). Posting a reply is the caller's choice ([`SessionTurn::post`]); a turn whose
    /// reply goes into a chat is taken with [`SessionTurn::answer`] (typing, streaming).
    pub(crate) async fn take(&self, plan: TurnPlan<'_>) -> TurnEnd {
        take_turn(self.engine, &self.journal, plan, None).await
    }

    /// [`SessionTurn::take`], with the reply's text handed to `sink` as it is written.
    pub(super) async fn take_with(
        &self,
        plan: TurnPlan<'_>,
        sink: Option<&dyn TextSink>,
    ) -> TurnEnd {
        take_turn(self.engine, &self.journal, plan, sink).await
    }

    /// The engine the turn runs on.
    pub(super) fn engine(&self) -> &Engine {
        self.engine
    }

    /// Post `text` to `target` through `account`, recorded in this run. A post that fails is
    /// recorded and logged (never silently lost); the error says why.
    pub(crate) async fn post(
        &self,
        account: &Account,
        target: &Target,
        text: &str,
    ) -> Result<Vec<MessageId>, String> {
        let handover = self.engine.handover(account);
        match deliver(
            &*account.adapter,
            &handover,
            target,
            text,
            self.journal.pen(),
        )
        .await
        {
            Ok(ids) => Ok(ids),
            Err(err) => Err(undelivered(&self.journal, err).await),
        }
    }
}
