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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use baton_contract::{Platform, SendError, StubAdapter};
    use tokio::time::timeout;

    use super::*;
    use crate::engine::testing::{account_on, bot, kinds, target, transcript};
    use crate::gateway::testing::{echo_config, parts};
    use crate::session::test_key;
    use crate::store::EntryKind;

    fn seat<'s>(session: &'s SessionKey, run: &str) -> Seat<'s> {
        Seat {
            session,
            run_id: run.into(),
            lane: Lane::Main,
        }
    }

    /// How long a test gives what must not happen to happen.
    const A_WHILE: Duration = Duration::from_millis(300);

    #[tokio::test]
    async fn a_session_takes_one_turn_at_a_time_in_the_order_they_came() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let session = test_key("room");
        let first = SessionTurn::enter(&gw.engine, seat(&session, "r1")).await;
        let second = SessionTurn::enter(&gw.engine, seat(&session, "r2"));
        tokio::pin!(second);
        let early = timeout(A_WHILE, &mut second).await;
        assert!(early.is_err(), "the second turn got in beside the first");
        let other = test_key("other");
        let elsewhere = SessionTurn::enter(&gw.engine, seat(&other, "r3"));
        let elsewhere = timeout(Duration::from_secs(10), elsewhere).await;
        assert!(elsewhere.is_ok(), "another session is not kept waiting");
        drop(first);
        let second = timeout(Duration::from_secs(10), second).await;
        let second = second.expect("the second turn goes once the first is done");
        assert_eq!(second.journal().run_id(), "r2");
    }

    /// A chain turn's deadline counts its wait for the session too.
    #[tokio::test]
    async fn a_turn_with_a_deadline_gives_up_on_a_session_busy_past_it() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let session = test_key("room");
        let first = SessionTurn::enter(&gw.engine, seat(&session, "r1")).await;
        let until = Instant::now() + A_WHILE;
        let late = SessionTurn::enter_until(&gw.engine, seat(&session, "r2"), until);
        let late = timeout(Duration::from_secs(10), late).await;
        assert!(
            matches!(late, Ok(Err(SessionBusy))),
            "it gave up at its deadline"
        );
        assert!(Instant::now() >= until, "it waited until the deadline");
        drop(first);
        let until = Instant::now() + Duration::from_secs(10);
        let free = SessionTurn::enter_until(&gw.engine, seat(&session, "r3"), until).await;
        assert!(free.is_ok(), "a free session is taken at once");
    }

    #[tokio::test]
    async fn a_chat_turn_is_refused_at_once_when_its_session_has_its_maximum_waiting() {
        let lanes = "\n[lanes]\nmax_queued_per_session = 1\n";
        let gw = parts(&echo_config(&["b"], lanes)).await;
        let session = test_key("room");
        let queued =
            |run| SessionTurn::enter_queued(&gw.engine, seat(&session, run), Arrival::Fresh);
        let first = queued("r1").await.ok().expect("a free session");
        let second = queued("r2");
        tokio::pin!(second);
        assert!(timeout(A_WHILE, &mut second).await.is_err());
        let third = timeout(Duration::from_secs(10), queued("r3")).await;
        let Ok(Err(Refused { journal, full })) = third else {
            panic!("a third turn got in line past the maximum");
        };
        assert_eq!(journal.run_id(), "r3", "its own journal records why");
        assert_eq!(full, QueueFull::Session { max: 1 });
        drop(first);
        assert!(timeout(Duration::from_secs(10), second).await.is_ok());
    }

    #[tokio::test]
    async fn a_post_is_recorded_in_the_run_and_a_failed_one_says_why() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let session = test_key("room");
        let refused = Err(SendError::Rejected {
            code: "channel_not_found".into(),
            message: "no such channel".into(),
        });
        let stub = StubAdapter::new(Platform::Local, "b").answering(vec![refused]);
        let account = account_on(&bot(&gw.engine, "b"), &Arc::new(stub));
        let turn = SessionTurn::enter(&gw.engine, seat(&session, "r1")).await;
        let failed = turn.post(&account, &target("room"), "first").await;
        let why = failed.expect_err("the platform refused it");
        assert!(why.contains("channel_not_found"), "{why}");
        drop(turn);
        let turn = SessionTurn::enter(&gw.engine, seat(&session, "r2")).await;
        let posted = turn.post(&account, &target("room"), "second").await;
        assert_eq!(posted, Ok(vec!["m0".into()]));
        let entries = transcript(&gw.engine, &session).await;
        assert_eq!(kinds(&entries), [EntryKind::Failure, EntryKind::Reply]);
        assert_eq!(entries[0].text, why);
        assert_eq!(entries[0].meta["stage"], "deliver");
        assert_eq!(entries[1].text, "second");
        let runs: Vec<_> = entries.iter().map(|e| e.run_id.as_deref()).collect();
        assert_eq!(runs, [Some("r1"), Some("r2")]);
    }
}
