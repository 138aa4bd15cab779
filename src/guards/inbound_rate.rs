//! Pipeline step 8: the inbound rate limit per sender.
//!
//! A sender may wake a bot `inbound_per_sender_per_minute` times a minute. The first message over
//! the budget gets one short notice ("slow down"); the rest of the window is ignored silently, so
//! a flood never turns into a flood of notices. Each bot keeps its own budget per sender.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};

use super::limiter::{KeyedLimiter, later};
use crate::bot_id::BotId;

/// What to do with a message from a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateVerdict {
    /// Within budget: take the turn.
    Allowed,
    /// Over budget, first time this window: tell the sender once.
    LimitedNotify {
        /// When the sender may write again.
        retry_after: Duration,
    },
    /// Over budget and already told: ignore.
    LimitedQuiet,
}

/// The bot, and the sender as the transcript labels it (a human's id, or `bot:<id>`).
type SenderKey = (BotId, String);

/// Per (bot, sender) budgets.
pub struct InboundRateLimit<C: Clock = DefaultClock> {
    budget: KeyedLimiter<SenderKey, C>,
    told_until: Mutex<HashMap<SenderKey, C::Instant>>,
}

impl<C: Clock + Clone> InboundRateLimit<C> {
    /// `per_minute` messages per sender per bot.
    pub fn new(per_minute: u32, clock: C) -> Self {
        Self {
            budget: KeyedLimiter::per_minute(per_minute, clock),
            told_until: Mutex::new(HashMap::new()),
        }
    }

    /// Spend one message of `sender`'s budget with `bot`.
    pub fn check(&self, bot: &BotId, sender: &str) -> RateVerdict {
        let key = (bot.clone(), sender.to_owned());
        let Err(retry_after) = self.budget.check(&key) else {
            return RateVerdict::Allowed;
        };
        let now = self.budget.now();
        let mut told = self.told_until.lock().expect("rate map poisoned");
        match told.get(&key) {
            Some(&until) if now < until => RateVerdict::LimitedQuiet,
            _ => {
                told.insert(key, later(now, retry_after));
                RateVerdict::LimitedNotify { retry_after }
            }
        }
    }

    /// Forget full budgets and expired notices. Called on a timer.
    pub fn retain_recent(&self) {
        self.budget.retain_recent();
        let now = self.budget.now();
        self.told_until
            .lock()
            .expect("rate map poisoned")
            .retain(|_, until| *until > now);
    }
}

#[cfg(test)]
mod tests {
    use governor::clock::FakeRelativeClock;

    use super::*;

    #[test]
    fn over_budget_is_told_once_then_ignored_until_the_window_passes() {
        let clock = FakeRelativeClock::default();
        let limit = InboundRateLimit::new(2, clock.clone());
        let (snark, caid): (BotId, BotId) = ("snark".parse().unwrap(), "caid".parse().unwrap());
        assert_eq!(limit.check(&snark, "alice"), RateVerdict::Allowed);
        assert_eq!(limit.check(&snark, "alice"), RateVerdict::Allowed);
        assert!(matches!(
            limit.check(&snark, "alice"),
            RateVerdict::LimitedNotify { .. }
        ));
        assert_eq!(limit.check(&snark, "alice"), RateVerdict::LimitedQuiet);
        assert_eq!(
            limit.check(&caid, "alice"),
            RateVerdict::Allowed,
            "budgets are per bot"
        );
        clock.advance(Duration::from_secs(31));
        assert_eq!(limit.check(&snark, "alice"), RateVerdict::Allowed);
    }
}
