//! Are the store's writes failing now? Recorded by the writer after each batch, asked by
//! `/readyz` beside its own probe.
//!
//! The probe alone is not enough: it rewrites one row, which a database that cannot grow (a
//! file-size limit, a full disk with free pages left) still takes while every new message
//! fails. So the writer remembers its latest batch that was lost (its transaction could not
//! begin or commit: a full disk, a server that is down) and the store counts as failing for
//! [`HOLD`] after it. A store whose writes keep failing stays failing; one that healed is
//! ready again [`HOLD`] after its last failure, with or without traffic to prove it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long after a lost batch the store still counts as failing.
pub(crate) const HOLD: Duration = Duration::from_secs(5);

/// The writer's latest lost batch: when, and why.
#[derive(Default)]
pub(crate) struct WriteHealth {
    last: Mutex<Option<(Instant, String)>>,
}

impl WriteHealth {
    /// A batch was lost for `reason`.
    pub(crate) fn lost(&self, reason: &str) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        *last = Some((Instant::now(), reason.to_owned()));
    }

    /// Why writes are failing, when a batch was lost within the last [`HOLD`].
    pub(crate) fn failing(&self) -> Option<String> {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match &*last {
            Some((at, reason)) if at.elapsed() < HOLD => Some(reason.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_batch_counts_for_the_hold_then_no_longer() {
        let health = WriteHealth::default();
        assert_eq!(health.failing(), None);
        health.lost("disk I/O error");
        assert_eq!(health.failing().as_deref(), Some("disk I/O error"));
        *health.last.lock().unwrap() = Some((Instant::now() - HOLD, "old".into()));
        assert_eq!(health.failing(), None);
    }
}
