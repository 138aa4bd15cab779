//! [`KeyedLimiter`]: one governor keyed rate limiter plus the clock it runs on.
//!
//! Every guard budget in baton (bot pairs, senders, sends) is "N per minute per key". This wraps
//! governor's keyed limiter so each guard says only *what* it limits. The clock is a type
//! parameter: production uses governor's default clock, tests a `FakeRelativeClock` they advance.

use std::hash::Hash;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DashMapStateStore;
use governor::{Quota, RateLimiter};

/// A per-key "N per minute" budget.
pub struct KeyedLimiter<K: Hash + Eq + Clone, C: Clock = DefaultClock> {
    limiter: RateLimiter<K, DashMapStateStore<K>, C, NoOpMiddleware<C::Instant>>,
    clock: C,
}

impl<K: Hash + Eq + Clone, C: Clock + Clone> KeyedLimiter<K, C> {
    /// `per_minute` events per key per minute, all of them usable in a burst.
    /// Zero is treated as one: validation refuses zero budgets before this is built.
    pub fn per_minute(per_minute: u32, clock: C) -> Self {
        Self::with_quota(Quota::per_minute(non_zero(per_minute)), clock)
    }

    /// `burst` events per key per `window`, refilled evenly across the window.
    pub fn per_window(burst: u32, window: Duration, clock: C) -> Self {
        let burst = non_zero(burst);
        let period = (window / burst.get()).max(Duration::from_nanos(1));
        let quota = Quota::with_period(period)
            .expect("period is non-zero")
            .allow_burst(burst);
        Self::with_quota(quota, clock)
    }

    fn with_quota(quota: Quota, clock: C) -> Self {
        Self {
            limiter: RateLimiter::<K, _, _, _>::dashmap_with_clock(quota, clock.clone()),
            clock,
        }
    }

    /// Spend one event of `key`'s budget, or learn how long until one is available.
    pub fn check(&self, key: &K) -> Result<(), Duration> {
        self.limiter
            .check_key(key)
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// The limiter's clock, for guards that keep deadlines (cooldowns) on the same time line.
    pub fn now(&self) -> C::Instant {
        self.clock.now()
    }

    /// Forget keys whose budget is full again, so state cannot grow without bound, and give
    /// back the room they took: the map keeps its largest size otherwise, and a burst of
    /// 20,000 senders would hold it for good. The gateway calls this on a timer.
    pub fn retain_recent(&self) {
        self.limiter.retain_recent();
        self.limiter.shrink_to_fit();
    }

    /// How many keys are tracked.
    pub fn len(&self) -> usize {
        self.limiter.len()
    }

    /// No key tracked.
    pub fn is_empty(&self) -> bool {
        self.limiter.is_empty()
    }
}

/// `instant + duration`, on any governor clock.
pub(crate) fn later<I: Reference>(instant: I, by: Duration) -> I {
    instant + by.into()
}

fn non_zero(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap_or(NonZeroU32::MIN)
}

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;

    #[test]
    fn budget_per_key_refills_over_the_minute() {
        let clock = FakeRelativeClock::default();
        let limiter = KeyedLimiter::per_minute(2, clock.clone());
        assert!(limiter.check(&"a").is_ok());
        assert!(limiter.check(&"a").is_ok());
        let wait = limiter.check(&"a").unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_secs(30),
            "{wait:?}"
        );
        assert!(limiter.check(&"b").is_ok(), "keys share a budget");
        clock.advance(Duration::from_secs(30));
        assert!(limiter.check(&"a").is_ok());
    }

    #[test]
    fn per_window_allows_a_burst_then_refuses() {
        let clock = FakeRelativeClock::default();
        let limiter = KeyedLimiter::per_window(3, Duration::from_secs(5), clock.clone());
        for _ in 0..3 {
            limiter.check(&1).unwrap();
        }
        assert!(limiter.check(&1).is_err());
        clock.advance(Duration::from_secs(5));
        assert!(limiter.check(&1).is_ok());
    }
}
