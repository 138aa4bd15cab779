//! Reconnect backoff with jitter, shared by every adapter so they all behave alike.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Exponential backoff from `min` doubling up to `max`, with up to 25 % random jitter so many
/// accounts that lost the same network do not reconnect in lockstep. Call [`Backoff::reset`]
/// once a connection has proved healthy.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// A backoff starting at `min` and never waiting longer than `max` (plus jitter).
    pub fn new(min: Duration, max: Duration) -> Self {
        Self {
            min,
            max,
            attempt: 0,
        }
    }

    /// How many delays have been handed out since the last reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The next delay to wait before reconnecting.
    pub fn next_delay(&mut self) -> Duration {
        let base = self
            .min
            .saturating_mul(1u32 << self.attempt.min(16))
            .min(self.max);
        self.attempt = self.attempt.saturating_add(1);
        base + base.mul_f64(jitter_fraction() * 0.25)
    }

    /// Wait out the next delay, unless `shutdown` fires first. Returns whether to try again
    /// (`false`: the gateway is stopping). Every reconnect loop waits this way, so none can
    /// hold up a shutdown.
    pub async fn wait(&mut self, shutdown: &tokio_util::sync::CancellationToken) -> bool {
        let delay = self.next_delay();
        tokio::select! {
            _ = shutdown.cancelled() => false,
            _ = tokio::time::sleep(delay) => true,
        }
    }

    /// Forget past failures: the next delay is `min` again.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// A number in `[0, 1)`, random enough to spread reconnects; needs no RNG crate.
fn jitter_fraction() -> f64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(0);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let d: Vec<_> = (0..6).map(|_| b.next_delay()).collect();
        assert!(d[0] >= Duration::from_millis(100) && d[0] <= Duration::from_millis(125));
        assert!(d[1] >= Duration::from_millis(200) && d[1] <= Duration::from_millis(250));
        assert!(d[5] >= Duration::from_secs(1) && d[5] <= Duration::from_millis(1250));
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(125));
    }
}
