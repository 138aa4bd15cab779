//! Are the store's writes failing now? Recorded by the writer after each batch, asked by
//! `/readyz` beside its own probe.
//!
//! The probe alone is not enough: it rewrites one row, which a database that cannot grow (a
//! file-size limit, a full disk with free pages left) still takes while every new message
//! fails. So the writer remembers its latest batch that was lost (its transaction could not
//! begin or commit: a full disk, a server that is down) and the store counts as failing for
//! [`HOLD`] after it. A store whose writes keep failing stays failing; one that healed is
//! ready again [`HOLD`] after its last failure, with or without traffic to prove it.
//!
//! On PostgreSQL it also keeps whether the writer is connected: while it is not (the server
//! went away, and the writer is connecting again with a growing pause), every write fails at
//! once with the reason, and so does the probe. How often it connected again is counted for
//! `/metrics`.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::StoreError;

/// How long after a lost batch the store still counts as failing.
pub(crate) const HOLD: Duration = Duration::from_secs(5);

/// The writer's latest lost batch (when, and why), and its connection.
#[derive(Default)]
pub(crate) struct WriteHealth {
    last: Mutex<Option<(Instant, String)>>,
    /// Why the writer has no connection now; `None` while it has one.
    down: Mutex<Option<String>>,
    /// Times the writer connected again after losing its connection.
    reconnects: AtomicU64,
}

impl WriteHealth {
    /// A batch was lost for `reason`.
    pub(crate) fn lost(&self, reason: &str) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        *last = Some((Instant::now(), reason.to_owned()));
    }

    /// Why writes are failing: the connection is lost, or a batch was lost within the last
    /// [`HOLD`].
    pub(crate) fn failing(&self) -> Option<StoreError> {
        if let Some(reason) = self.down() {
            return Some(StoreError::Disconnected { reason });
        }
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match &*last {
            Some((at, reason)) if at.elapsed() < HOLD => Some(StoreError::Commit(reason.clone())),
            _ => None,
        }
    }

    /// The writer's connection is lost, or an attempt to connect again failed, for `reason`.
    pub(crate) fn disconnected(&self, reason: &str) {
        *self.down.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.to_owned());
    }

    /// The writer connected again.
    pub(crate) fn reconnected(&self) {
        *self.down.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.reconnects.fetch_add(1, Ordering::Relaxed);
    }

    /// Why the writer has no connection now, if it has none.
    pub(crate) fn down(&self) -> Option<String> {
        self.down.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// How many times the writer connected again.
    pub(crate) fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_batch_counts_for_the_hold_then_no_longer() {
        let health = WriteHealth::default();
        assert!(health.failing().is_none());
        health.lost("disk I/O error");
        assert!(
            matches!(health.failing(), Some(StoreError::Commit(why)) if why == "disk I/O error")
        );
        *health.last.lock().unwrap() = Some((Instant::now() - HOLD, "old".into()));
        assert!(health.failing().is_none());
    }

    #[test]
    fn a_lost_connection_fails_writes_until_connected_again() {
        let health = WriteHealth::default();
        health.disconnected("server closed the connection");
        assert!(matches!(
            health.failing(),
            Some(StoreError::Disconnected { reason }) if reason == "server closed the connection"
        ));
        health.reconnected();
        assert!(health.failing().is_none());
        assert_eq!(health.reconnects(), 1);
    }
}
