//! A `[[budgets]]` entry resolved once: its match as typed values, its window as a duration, and
//! which usage rows it sums for a given call (its scope's key plus its match).

use std::time::Duration;

use baton_contract::Platform;

use super::Bill;
use crate::bot_id::BotId;
use crate::config::{BudgetConfig, BudgetScope, OnExceed};
use crate::store::{LimitOverride, SpendQuery, Spent};

/// One budget, ready to be checked.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub name: String,
    pub scope: BudgetScope,
    pub bot: Option<BotId>,
    platform: Option<Platform>,
    chat: Option<String>,
    pub tokens: Option<i64>,
    pub cost_usd: Option<f64>,
    pub window: Option<Duration>,
    pub on_exceed: OnExceed,
}

impl Rule {
    /// Resolves a validated entry (validation reported anything that does not parse).
    pub(crate) fn new(config: &BudgetConfig) -> Rule {
        Rule {
            name: config.name.clone(),
            scope: config.scope,
            bot: config.matches.bot.as_deref().and_then(|b| b.parse().ok()),
            platform: config
                .matches
                .platform
                .as_deref()
                .and_then(|p| p.parse().ok()),
            chat: config.matches.chat.clone(),
            tokens: config.tokens,
            cost_usd: config.cost_usd,
            window: config.window().ok().flatten(),
            on_exceed: config.on_exceed,
        }
    }

    /// Whether the budget counts `bill`'s calls.
    pub(crate) fn matches(&self, bill: &Bill<'_>) -> bool {
        self.bot.as_ref().is_none_or(|b| b == bill.bot)
            && self.platform.is_none_or(|p| p == bill.platform)
            && self.chat.as_deref().is_none_or(|c| c == bill.chat)
    }

    /// Whether the budget counts a row of `bot` charged to `platform`'s `chat`.
    pub(crate) fn counts(&self, bot: &str, platform: &str, chat: &str) -> bool {
        self.bot.as_ref().is_none_or(|b| b.as_str() == bot)
            && self.platform.is_none_or(|p| p.as_str() == platform)
            && self.chat.as_deref().is_none_or(|c| c == chat)
    }

    /// What its spend for `bill` is counted per: the notices' key.
    pub(crate) fn scope_key(&self, bill: &Bill<'_>) -> String {
        match self.scope {
            BudgetScope::Bot => bill.bot.to_string(),
            BudgetScope::Chat => format!("{}:{}", bill.platform, bill.chat),
            BudgetScope::Trigger => bill.trigger.to_owned(),
            BudgetScope::Gateway => "*".to_owned(),
        }
    }

    /// When its window, ending at `now_ms`, began (`i64::MIN`: it has none).
    pub(crate) fn since_ms(&self, now_ms: i64) -> i64 {
        self.window.map_or(i64::MIN, |w| {
            now_ms.saturating_sub(i64::try_from(w.as_millis()).unwrap_or(i64::MAX))
        })
    }

    /// The rows it sums for `bill`: its scope's key and its match, within its window.
    pub(crate) fn query(&self, bill: &Bill<'_>, now_ms: i64) -> SpendQuery {
        SpendQuery {
            since_ms: self.since_ms(now_ms),
            ..self.filter(
                &bill.bot.to_string(),
                &bill.platform.to_string(),
                bill.chat,
                bill.trigger,
            )
        }
    }

    /// The rows it sums with a call of `bot` charged to `platform`'s `chat` and `trigger`,
    /// whatever their time: the call's scope's key and its match.
    fn filter(&self, bot: &str, platform: &str, chat: &str, trigger: &str) -> SpendQuery {
        let scoped = |scope| self.scope == scope;
        let by_chat = scoped(BudgetScope::Chat) || self.chat.is_some();
        SpendQuery {
            since_ms: 0,
            bot: (scoped(BudgetScope::Bot) || self.bot.is_some()).then(|| bot.to_owned()),
            platform: (by_chat || self.platform.is_some()).then(|| platform.to_owned()),
            chat: by_chat.then(|| chat.to_owned()),
            trigger_id: scoped(BudgetScope::Trigger).then(|| trigger.to_owned()),
        }
    }

    /// Its limits, with an admin's over the config's.
    pub(crate) fn limits(&self, set: Option<&LimitOverride>) -> LimitOverride {
        LimitOverride {
            tokens: set.and_then(|s| s.tokens).or(self.tokens),
            cost_usd: set.and_then(|s| s.cost_usd).or(self.cost_usd),
        }
    }
}

/// How much of its limits `spent` used: the larger share of the two, 1.0 = used up.
pub(crate) fn share(spent: Spent, limits: LimitOverride) -> f64 {
    let tokens = limits
        .tokens
        .map_or(0.0, |l| spent.tokens as f64 / l as f64);
    let cost = limits.cost_usd.map_or(0.0, |l| spent.cost_usd / l);
    tokens.max(cost)
}
