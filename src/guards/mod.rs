//! Guards: the budgets that keep bots from flooding a chat or looping with each other.
//!
//! All of them are governor keyed limiters ([`KeyedLimiter`]) on one clock, so tests can drive
//! time with a fake clock, and all of them forget idle keys on a timer ([`Guards::retain_recent`]).

mod bot_messages;
mod inbound_rate;
mod limiter;
mod sends;

use governor::clock::{Clock, DefaultClock};

pub use bot_messages::{BotAuthor, BotMessage, BotMessageGuard, BotRefusal};
pub use inbound_rate::{InboundRateLimit, RateVerdict};
pub use limiter::KeyedLimiter;
pub use sends::{SendAttempt, SendGuard, SendRefusal};

use crate::config::LimitsConfig;

/// The pipeline's guards, built from `[limits]`: steps 7 and 8. The `sessions_send` guard
/// ([`SendGuard`]) is the relay's own.
pub struct Guards<C: Clock = DefaultClock> {
    /// Step 7: bot-authored messages.
    pub bot_messages: BotMessageGuard<C>,
    /// Step 8: per-sender budget.
    pub inbound: InboundRateLimit<C>,
}

impl<C: Clock + Clone> Guards<C> {
    /// Guards with `limits`, on `clock`.
    pub fn new(limits: &LimitsConfig, clock: C) -> Self {
        Self {
            bot_messages: BotMessageGuard::new(limits, clock.clone()),
            inbound: InboundRateLimit::new(limits.inbound_per_sender_per_minute, clock),
        }
    }

    /// Forget state for keys that are idle again.
    pub fn retain_recent(&self) {
        self.bot_messages.retain_recent();
        self.inbound.retain_recent();
    }
}
