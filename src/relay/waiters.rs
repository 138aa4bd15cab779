//! Senders waiting for a run's outcome, on any instance, and the one decision that must not
//! race: when a run finishes, did someone receive its reply, or must it be pushed to the
//! sender's session?
//!
//! The run may be running on another instance, so the decision is the database's, on the
//! delivery's row: a waiter that gives up marks the row's outcome as to be pushed, only while
//! the run is still open ([`Store::delivery_give_up`]); the finishing run settles the row,
//! only while it is open, and reads what the row says then ([`Store::delivery_settle`]). Each
//! is one statement on one row, so exactly one of them comes first: the reply is never lost
//! and never handed over twice. A waiter is woken by the settle's notice (from whichever
//! instance ran it) and reads the row; a lost notice only makes it read again.
//!
//! A run in this process that made nothing but text hands its settled outcome to a sender
//! waiting here ([`Waiters::expect`], [`Handing`]): the row holds nothing more, so reading it
//! back only made every round trip between bots wait for a read (BENCHMARKS.md, issue 23). It
//! is handed once its settle has run with nobody given up, so it is what the row says, as soon
//! as the writer ran it: whatever the sender does with it is written after the settle, and
//! nothing the sender posts reaches a chat before a later commit (a post's begun send).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;

use crate::store::{Delivery, DeliveryState, Notices, Store, StoreError, Topic};

/// What a run amounted to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunResult {
    /// The target answered; `reply` is empty when it chose silence.
    Answered {
        /// The reply text.
        reply: String,
        /// The model that answered.
        model: String,
    },
    /// The run ended without an answer.
    Failed {
        /// `Failed` or `TimedOut`.
        state: DeliveryState,
        /// Why.
        reason: String,
    },
}

/// What a waiter got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Waited {
    /// The settled delivery, in time.
    Got(Box<Delivery>),
    /// The settled outcome, in time, from the run itself (which made nothing the row would add).
    Handed(Finished),
    /// The time ran out; the run goes on and its outcome will be pushed.
    GaveUp,
}

/// A settled run's outcome as its run hands it over: all its row holds for the sender when the
/// run made no artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finished {
    /// What the run amounted to.
    pub result: RunResult,
    /// Its report (`Delivery::result`).
    pub report: Value,
    /// When it settled (`Delivery::finished_ms`).
    pub settled_ms: i64,
}

/// When a run started here hands its outcome to the sender waiting for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandAt {
    /// As soon as its settle has run: what the sender does next is written after it.
    Run,
    /// Once its settle is committed: the sender tells the outcome outside the process.
    Commit,
}

/// Since when a waiter has been listening for the run's settle.
pub(crate) enum Listening {
    /// From now: the run may have settled already, so the row is read first.
    FromNow,
    /// Since before the run could start, when its row was open (`Notices` subscribed then): the
    /// first read waits for a notice. A round trip between bots read its row once for nothing.
    /// With `handed`, the run is this process's: its outcome comes from it, or, when it hands
    /// nothing over, is read once it has ended.
    SinceStart {
        /// The store's notices, subscribed before the run could start.
        notices: Notices,
        /// The run's own hand-over ([`Waiters::expect`]), when it runs here.
        handed: Option<oneshot::Receiver<Finished>>,
    },
}

/// Waiting for runs' outcomes, and the runs this instance is running.
#[derive(Default)]
pub struct Waiters {
    running: AtomicUsize,
    /// Senders waiting here for runs started here, by run id, and when each is handed it.
    expecting: Mutex<HashMap<String, (oneshot::Sender<Finished>, HandAt)>>,
}

/// A run started here, handing its outcome to a sender waiting for it ([`Handing::hand`]).
/// Dropped without handing anything (the run made something, failed to settle, or ended
/// early), it tells the sender to read the row.
pub(crate) struct Handing<'a> {
    waiters: &'a Waiters,
    run_id: &'a str,
}

impl Handing<'_> {
    /// The run's settle ran with nobody given up, having made nothing: `finished` is its row's
    /// word, handed over now, or returned to hand over once the settle is committed when the
    /// sender waits for that ([`HandAt::Commit`]).
    pub(crate) fn hand(self, finished: Finished) -> Option<Committing> {
        let (sender, at) = self.waiters.take(self.run_id)?;
        match at {
            HandAt::Run => {
                // A sender gone already (its turn ended) has nothing left to hear.
                let _ = sender.send(finished);
                None
            }
            HandAt::Commit => Some(Committing { sender, finished }),
        }
    }
}

/// An outcome to hand over once its settle is committed ([`Committing::hand`]). Dropped instead
/// (the commit failed), it tells the sender to read the row.
pub(crate) struct Committing {
    sender: oneshot::Sender<Finished>,
    finished: Finished,
}

impl Committing {
    /// The settle is committed: hand the outcome over.
    pub(crate) fn hand(self) {
        // A sender gone already has nothing left to hear.
        let _ = self.sender.send(self.finished);
    }
}

impl Drop for Handing<'_> {
    fn drop(&mut self) {
        // Taken by `hand` already, or dropped here: the sender reads the row.
        self.waiters.take(self.run_id);
    }
}

/// Counts one run as in flight on this instance until dropped.
pub(crate) struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Waiters {
    /// Count a run this instance is running, until the guard drops.
    pub(crate) fn running(&self) -> InFlight<'_> {
        self.running.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.running)
    }

    /// A sender will wait for `run_id`, about to start here: what the run hands over when it
    /// ends ([`Waiters::handing`]), as soon as its settle ran or once it is committed (`at`).
    /// Call it before the run can start.
    pub(crate) fn expect(&self, run_id: &str, at: HandAt) -> oneshot::Receiver<Finished> {
        let (sender, handed) = oneshot::channel();
        self.expecting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run_id.to_owned(), (sender, at));
        handed
    }

    /// The run of `run_id`, started here, hands its outcome over through this when it ends.
    pub(crate) fn handing<'a>(&'a self, run_id: &'a str) -> Handing<'a> {
        Handing {
            waiters: self,
            run_id,
        }
    }

    fn take(&self, run_id: &str) -> Option<(oneshot::Sender<Finished>, HandAt)> {
        self.expecting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(run_id)
    }

    /// Wait up to `timeout` for `run_id`'s outcome, wherever it runs. On [`Waited::GaveUp`] the
    /// outcome is the finishing run's to push.
    pub(crate) async fn wait(
        &self,
        store: &Store,
        run_id: &str,
        timeout: Duration,
        listening: Listening,
    ) -> Result<Waited, StoreError> {
        let deadline = tokio::time::Instant::now() + timeout;
        // Subscribed before the first read: a settle between the read and the wait is heard.
        let (mut notices, mut read, mut handed) = match listening {
            Listening::FromNow => (store.subscribe(), true, None),
            Listening::SinceStart { notices, handed } => (notices, false, handed),
        };
        loop {
            if read
                && let Some(d) = store.delivery(run_id).await?
                && d.state.is_settled()
            {
                return Ok(Waited::Got(Box::new(d)));
            }
            tokio::select! {
                // A run here settles before it hands over: its notice comes first, and is
                // not read for while the run may still hand its outcome over.
                finished = async { handed.as_mut()?.await.ok() }, if handed.is_some() => {
                    match finished {
                        Some(finished) => return Ok(Waited::Handed(finished)),
                        None => (handed, read) = (None, true),
                    }
                }
                () = notices.touching(Topic::Delivery, run_id), if handed.is_none() => read = true,
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        Ok(match store.delivery_give_up(run_id).await? {
            Some(settled) => Waited::Got(Box::new(settled)),
            None => Waited::GaveUp,
        })
    }

    /// How many runs are in flight on this instance.
    pub fn in_flight(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Begun, DeliveryChange, NewDelivery, Notify, SendMode};
    use crate::timing::now_ms;

    async fn begun(store: &Store, run: &str) {
        let new = NewDelivery {
            run_id: run.into(),
            sender: "a".parse().unwrap(),
            sender_session: "bot:a:local:a:room".parse().unwrap(),
            target: "b".parse().unwrap(),
            target_session: "bot:b:local:b:a2a:a".parse().unwrap(),
            message: run.into(),
            idempotency_key: None,
            depth: 2,
            origin: None,
            trigger: None,
            trace_parent: None,
            mode: SendMode::Wait,
            artifacts_in: Vec::new(),
            expect: None,
            created_ms: now_ms(),
            waiter: None,
        };
        let started = store.delivery_begin(new, 0, Some("here")).await.unwrap();
        assert!(matches!(started, Begun::New(_)));
    }

    fn answered(run: &str, text: &str) -> DeliveryChange {
        DeliveryChange {
            reply: Some(text.into()),
            ..DeliveryChange::to(run, DeliveryState::Delivered, now_ms())
        }
    }

    #[tokio::test]
    async fn a_waiter_gets_the_result_in_band() {
        let store = Store::open(":memory:").await.unwrap();
        begun(&store, "r").await;
        let waiter = {
            let store = store.clone();
            tokio::spawn(async move {
                Waiters::default()
                    .wait(&store, "r", Duration::from_secs(10), Listening::FromNow)
                    .await
            })
        };
        tokio::task::yield_now().await;
        let notify = store.delivery_settle(answered("r", "hi")).await.unwrap();
        assert_eq!(
            notify,
            Some(Notify::None),
            "nobody gave up: nothing to push"
        );
        let Waited::Got(d) = waiter.await.unwrap().unwrap() else {
            panic!("gave up");
        };
        assert_eq!(d.reply.as_deref(), Some("hi"));
    }

    #[tokio::test]
    async fn after_a_give_up_the_finisher_is_responsible() {
        let store = Store::open(":memory:").await.unwrap();
        begun(&store, "r").await;
        let waited = Waiters::default()
            .wait(&store, "r", Duration::from_millis(1), Listening::FromNow)
            .await
            .unwrap();
        assert_eq!(waited, Waited::GaveUp);
        let notify = store.delivery_settle(answered("r", "late")).await.unwrap();
        assert_eq!(notify, Some(Notify::Pending), "nobody waits: push it");
    }

    /// A waiter listening since before the run started hears a settle that came before it
    /// began to wait, without reading the row first; one that starts listening now reads it.
    #[tokio::test]
    async fn a_settle_before_the_wait_is_heard() {
        let store = Store::open(":memory:").await.unwrap();
        begun(&store, "r").await;
        begun(&store, "s").await;
        let listening = since_start(&store, None);
        store.delivery_settle(answered("r", "quick")).await.unwrap();
        store
            .delivery_settle(answered("s", "quick too"))
            .await
            .unwrap();
        let long = Duration::from_secs(10);
        let waiters = Waiters::default();
        let Waited::Got(d) = waiters.wait(&store, "r", long, listening).await.unwrap() else {
            panic!("gave up");
        };
        assert_eq!(d.reply.as_deref(), Some("quick"));
        let Waited::Got(d) = waiters
            .wait(&store, "s", long, Listening::FromNow)
            .await
            .unwrap()
        else {
            panic!("gave up");
        };
        assert_eq!(d.reply.as_deref(), Some("quick too"));
    }

    /// A run here hands its outcome over: the waiter takes it, though the settle's notice came
    /// first, and reads nothing (what it was handed differs from the row, to show which it took).
    /// A run that hands nothing over leaves the waiter to read the row.
    #[tokio::test]
    async fn a_run_here_hands_its_outcome_over_or_leaves_the_row_to_read() {
        let store = Store::open(":memory:").await.unwrap();
        let waiters = Waiters::default();
        let long = Duration::from_secs(10);
        begun(&store, "r").await;
        let listening = since_start(&store, Some(waiters.expect("r", HandAt::Run)));
        store.delivery_settle(answered("r", "row")).await.unwrap();
        let finished = handed_over();
        let waiting = waiters.wait(&store, "r", long, listening);
        assert!(waiters.handing("r").hand(finished.clone()).is_none());
        assert_eq!(waiting.await.unwrap(), Waited::Handed(finished));

        begun(&store, "s").await;
        let listening = since_start(&store, Some(waiters.expect("s", HandAt::Run)));
        store.delivery_settle(answered("s", "row")).await.unwrap();
        drop(waiters.handing("s"));
        let Waited::Got(d) = waiters.wait(&store, "s", long, listening).await.unwrap() else {
            panic!("not read");
        };
        assert_eq!(d.reply.as_deref(), Some("row"));
        assert!(waiters.take("s").is_none(), "nothing left expected");
    }

    /// Listening since the run started, with what the run may hand over.
    fn since_start(store: &Store, handed: Option<oneshot::Receiver<Finished>>) -> Listening {
        Listening::SinceStart {
            notices: store.subscribe(),
            handed,
        }
    }

    fn handed_over() -> Finished {
        Finished {
            result: RunResult::Answered {
                reply: "handed".into(),
                model: "echo".into(),
            },
            report: serde_json::json!({"tool_calls": 0}),
            settled_ms: 7,
        }
    }

    /// A sender that tells the outcome outside the process is handed it only once the settle
    /// is committed: the run's hand-over waits for that, and one whose commit failed (dropped)
    /// leaves the sender to read the row.
    #[tokio::test]
    async fn a_sender_outside_is_handed_the_outcome_once_committed() {
        let store = Store::open(":memory:").await.unwrap();
        let waiters = Waiters::default();
        let long = Duration::from_secs(10);
        begun(&store, "r").await;
        let listening = since_start(&store, Some(waiters.expect("r", HandAt::Commit)));
        let finished = handed_over();
        let committing = waiters.handing("r").hand(finished.clone()).expect("held");
        let waiting = waiters.wait(&store, "r", long, listening);
        tokio::pin!(waiting);
        let early = tokio::time::timeout(Duration::from_millis(50), &mut waiting).await;
        assert!(early.is_err(), "handed over before its commit");
        store.delivery_settle(answered("r", "row")).await.unwrap();
        committing.hand();
        assert_eq!(waiting.await.unwrap(), Waited::Handed(finished));

        begun(&store, "s").await;
        let listening = since_start(&store, Some(waiters.expect("s", HandAt::Commit)));
        store.delivery_settle(answered("s", "row")).await.unwrap();
        drop(waiters.handing("s").hand(handed_over()));
        let Waited::Got(d) = waiters.wait(&store, "s", long, listening).await.unwrap() else {
            panic!("not read");
        };
        assert_eq!(d.reply.as_deref(), Some("row"));
    }
}
