//! Senders waiting for a run's outcome, and the one decision that must not race: when a run
//! finishes, did someone receive its reply, or must it be pushed to the sender's session?
//!
//! Both sides decide under one lock. A waiter that gives up checks for a result and leaves in
//! the same critical section in which the finishing run checks for waiters, so exactly one of
//! them is responsible for the reply: it is never lost and never handed over twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::store::DeliveryState;

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
    /// The outcome, in time.
    Got(RunResult),
    /// The time ran out; the run goes on and its outcome will be pushed.
    GaveUp,
    /// The run is not in memory (finished before, or never started here): read the store.
    Unknown,
}

#[derive(Default)]
struct SlotState {
    result: Option<RunResult>,
    waiters: usize,
}

struct Slot {
    state: Mutex<SlotState>,
    done: watch::Sender<bool>,
}

/// The runs in flight in this process that a sender may wait for.
#[derive(Default)]
pub struct Waiters {
    runs: Mutex<HashMap<String, Arc<Slot>>>,
}

impl Waiters {
    /// Make `run_id` waitable. Call before the run can finish.
    pub(crate) fn open(&self, run_id: &str) {
        let slot = Arc::new(Slot {
            state: Mutex::new(SlotState::default()),
            done: watch::Sender::new(false),
        });
        self.map().insert(run_id.to_owned(), slot);
    }

    /// Wait up to `timeout` for `run_id`'s outcome.
    pub(crate) async fn wait(&self, run_id: &str, timeout: Duration) -> Waited {
        let Some(slot) = self.map().get(run_id).cloned() else {
            return Waited::Unknown;
        };
        let mut done = {
            let mut state = slot.state.lock().expect("relay slot poisoned");
            if let Some(result) = &state.result {
                return Waited::Got(result.clone());
            }
            state.waiters += 1;
            slot.done.subscribe()
        };
        let _ = tokio::time::timeout(timeout, done.wait_for(|finished| *finished)).await;
        let mut state = slot.state.lock().expect("relay slot poisoned");
        state.waiters -= 1;
        match &state.result {
            Some(result) => Waited::Got(result.clone()),
            None => Waited::GaveUp,
        }
    }

    /// Whether a sender is waiting for `run_id` now. Only a forecast of what
    /// [`Waiters::finish`] will return: a waiter may give up in between.
    pub(crate) fn waiting(&self, run_id: &str) -> bool {
        let Some(slot) = self.map().get(run_id).cloned() else {
            return false;
        };
        slot.state.lock().expect("relay slot poisoned").waiters > 0
    }

    /// Record `run_id`'s outcome and wake its waiters. Returns whether anyone was waiting (and
    /// so received it); if not, the caller must push it to the sender's session. The run stays
    /// findable until [`Waiters::forget`], so a retry arriving meanwhile still gets the result.
    pub(crate) fn finish(&self, run_id: &str, result: RunResult) -> bool {
        let Some(slot) = self.map().get(run_id).cloned() else {
            return false;
        };
        let mut state = slot.state.lock().expect("relay slot poisoned");
        state.result = Some(result);
        slot.done.send_replace(true);
        state.waiters > 0
    }

    /// Drop a finished run once its outcome is in the store.
    pub(crate) fn forget(&self, run_id: &str) {
        self.map().remove(run_id);
    }

    /// How many runs are in flight.
    pub fn in_flight(&self) -> usize {
        self.map().len()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        self.runs.lock().expect("relay map poisoned")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(text: &str) -> RunResult {
        RunResult::Answered {
            reply: text.into(),
            model: "m".into(),
        }
    }

    #[tokio::test]
    async fn a_waiter_gets_the_result_in_band() {
        let relay = Arc::new(Waiters::default());
        relay.open("r");
        let waiter = {
            let relay = Arc::clone(&relay);
            tokio::spawn(async move { relay.wait("r", Duration::from_secs(10)).await })
        };
        while relay.runs.lock().unwrap()["r"]
            .state
            .lock()
            .unwrap()
            .waiters
            == 0
        {
            tokio::task::yield_now().await;
        }
        assert!(relay.finish("r", answer("hi")), "someone was waiting");
        assert_eq!(waiter.await.unwrap(), Waited::Got(answer("hi")));
        assert_eq!(
            relay.wait("r", Duration::ZERO).await,
            Waited::Got(answer("hi"))
        );
        relay.forget("r");
        assert_eq!(relay.wait("r", Duration::ZERO).await, Waited::Unknown);
    }

    #[tokio::test]
    async fn after_a_give_up_the_finisher_is_responsible() {
        let relay = Waiters::default();
        relay.open("r");
        assert_eq!(
            relay.wait("r", Duration::from_millis(1)).await,
            Waited::GaveUp
        );
        assert!(!relay.finish("r", answer("late")), "nobody waits: push it");
        assert_eq!(relay.in_flight(), 1);
    }
}
