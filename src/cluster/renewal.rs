//! This instance's leases, renewed in the background, and for each socket account until when
//! this instance may use it ([`Holding`]), published in a watch cell that `fence.rs` follows.
//!
//! The deadline is counted on this process's monotonic clock from the moment *before* the
//! renewal was sent, and ends a fifth of the lease early. The database dates the lease from the
//! moment it ran the statement, which is later, so the deadline here always falls before anyone
//! else can take the account: even a renewal that took long, or a process paused (SIGSTOP, a
//! frozen VM) and resumed, finds its deadline passed and drops the socket before using it. A
//! round that fails changes nothing: the deadlines it would have moved run out on their own.
//!
//! Each instance holds only its share of the accounts (ceil(accounts / live instances), see
//! [`Store::lease_round`]). A lease it held and did not renew, surplus once another instance
//! is live, is published as not held at once, so `fence.rs` drops its socket; the lease itself
//! is given up at the next round, with the socket closed by then, so the new holder never
//! connects while this one still is.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::store::{LeaseKey, Store};

/// Whether this instance may use an account's socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holding {
    /// Not known yet: the first round has not run.
    Unknown,
    /// Not held (not yet, or another instance holds it).
    No,
    /// Held: usable until this instant, unless renewed before.
    Until(Instant),
}

impl Holding {
    /// Whether the account may be used now.
    pub fn now(self) -> bool {
        matches!(self, Holding::Until(until) if Instant::now() < until)
    }
}

/// This instance's leases on the store.
pub struct Leases {
    store: Store,
    instance: String,
    lease: Duration,
    keys: Vec<LeaseKey>,
    cells: Vec<watch::Sender<Holding>>,
    /// Leases this instance stopped using at the last round, to give up at the next.
    releasing: Mutex<Vec<LeaseKey>>,
    /// How many instances were live at the last round (0 before the first).
    live: watch::Sender<usize>,
}

impl Leases {
    /// The leases of `keys` (socket accounts) for `instance`, `lease` long. Nothing is held
    /// until [`Leases::run`] has done its first round.
    pub fn new(store: Store, instance: String, lease: Duration, keys: Vec<LeaseKey>) -> Leases {
        let cells = keys
            .iter()
            .map(|_| watch::channel(Holding::Unknown).0)
            .collect();
        Leases {
            store,
            instance,
            lease,
            keys,
            cells,
            releasing: Mutex::new(Vec::new()),
            live: watch::channel(0).0,
        }
    }

    /// Follows whether `key` is held; `None` for an account without a lease (webhooks).
    pub fn watch(&self, key: &LeaseKey) -> Option<watch::Receiver<Holding>> {
        let at = self.keys.iter().position(|k| k == key)?;
        Some(self.cells[at].subscribe())
    }

    /// Follows how many instances are live, as of each round: when it drops, one is gone, and
    /// the work it had in flight is for the others to pick up.
    pub fn live(&self) -> watch::Receiver<usize> {
        self.live.subscribe()
    }

    /// Renew and take, one round every third of the lease, until `stop`. The gateway then
    /// calls [`Leases::release`] once its sockets are closed.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.lease / 3);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = self.round() => {}
            }
        }
    }

    /// One round: renew the instance and every lease; publish each account's deadline.
    async fn round(&self) {
        let sent = Instant::now();
        let lease_ms = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX);
        let releasing = self.releasing.lock().expect("releasing poisoned").clone();
        let round = match self
            .store
            .lease_round(&self.instance, self.keys.clone(), releasing, lease_ms)
            .await
        {
            Ok(round) => round,
            Err(err) => {
                tracing::warn!(%err, "could not renew the account leases; sockets whose lease runs out are dropped");
                return;
            }
        };
        let until = sent + self.lease - self.lease / 5;
        let mut surplus = Vec::new();
        self.live
            .send_if_modified(|live| std::mem::replace(live, round.live) != round.live);
        for ((key, cell), held) in self.keys.iter().zip(&self.cells).zip(round.held) {
            let now = if held {
                Holding::Until(until)
            } else {
                Holding::No
            };
            let before = *cell.borrow();
            if before.now() != now.now() {
                let (platform, account) = (&key.platform, &key.account);
                if held {
                    tracing::info!(%platform, %account, "took the account's lease: connecting");
                } else {
                    tracing::info!(%platform, %account, "the account's lease is another instance's (or more than this one's share): on standby");
                }
            }
            if !held && matches!(before, Holding::Until(_)) {
                surplus.push(key.clone());
            }
            cell.send_replace(now);
        }
        *self.releasing.lock().expect("releasing poisoned") = surplus;
    }

    /// Give every lease up now (a clean shutdown, its sockets closed), so other instances take
    /// the accounts on their next round instead of waiting for the leases to expire.
    pub async fn release(&self) {
        for cell in &self.cells {
            cell.send_replace(Holding::No);
        }
        if let Err(err) = self.store.lease_release(&self.instance).await {
            tracing::warn!(%err, "could not release the account leases; other instances take them once they expire");
        }
    }
}
