//! The budgets' spend kept in memory, so a check costs the calls made since the last check
//! rather than every call in its windows: each window a check counts is read from the store
//! once, then kept up to date from the rows written after the last one read (every instance's,
//! read by id; the store keeps ids in commit order), and its rows that leave the window are
//! let go. A window no check counted for [`IDLE_MS`] is dropped, and read again when needed.

use std::collections::{HashMap, VecDeque};

use super::rule::Rule;
use crate::store::{Charged, SpendQuery, Spent, UsageTally};

/// How long a window nobody checked is kept.
const IDLE_MS: i64 = 10 * 60 * 1000;

/// The windows being counted, by budget (its index) and the rows it sums (its query without
/// the window's start).
#[derive(Default)]
pub(super) struct Tally {
    /// The last row counted.
    last_id: i64,
    windows: HashMap<(usize, SpendQuery), Window>,
    swept_ms: i64,
}

/// One window's calls (time, tokens, USD), oldest first, and their sums.
#[derive(Default)]
struct Window {
    calls: VecDeque<(i64, i64, f64)>,
    tokens: i64,
    cost_usd: f64,
    used_ms: i64,
}

impl Window {
    fn add(&mut self, ts_ms: i64, tokens: i64, cost_usd: f64) {
        self.calls.push_back((ts_ms, tokens, cost_usd));
        self.tokens += tokens;
        self.cost_usd += cost_usd;
    }

    /// What it spent since `since_ms`, letting older calls go.
    fn spent(&mut self, since_ms: i64) -> Spent {
        while let Some(&(ts_ms, tokens, cost_usd)) = self.calls.front() {
            if ts_ms >= since_ms {
                break;
            }
            self.calls.pop_front();
            self.tokens -= tokens;
            self.cost_usd -= cost_usd;
        }
        if self.calls.is_empty() {
            // No drift from adding and taking floats back.
            self.cost_usd = 0.0;
        }
        Spent {
            tokens: self.tokens,
            cost_usd: self.cost_usd.max(0.0),
            oldest_ms: self.calls.front().map(|c| c.0),
        }
    }
}

/// A window a check needs: which budget, and the rows it sums.
pub(super) type Key = (usize, SpendQuery);

impl Tally {
    /// The id the next read starts after, and which of `keys` are not counted yet; a window
    /// nobody checked lately is let go first.
    pub(super) fn wants(&mut self, keys: &[Key], now_ms: i64) -> (i64, Vec<Key>) {
        if now_ms - self.swept_ms > IDLE_MS / 10 {
            self.swept_ms = now_ms;
            self.windows.retain(|_, w| now_ms - w.used_ms < IDLE_MS);
        }
        let missing = keys
            .iter()
            .filter(|k| !self.windows.contains_key(k))
            .cloned()
            .collect();
        (self.last_id, missing)
    }

    /// Counts what the store read for [`Tally::wants`]: `false` when ids restarted below the
    /// last one counted (everything is forgotten; read again).
    pub(super) fn absorb(&mut self, rules: &[Rule], missing: Vec<Key>, read: UsageTally) -> bool {
        if read.top_id < self.last_id {
            *self = Tally::default();
            return false;
        }
        for row in &read.fresh {
            self.count(rules, row);
        }
        self.last_id = read.fresh.last().map_or(self.last_id, |row| row.id);
        for (key, rows) in missing.into_iter().zip(read.windows) {
            let mut window = Window::default();
            for row in rows {
                window.add(row.ts_ms, row.tokens, row.cost_usd);
            }
            self.windows.insert(key, window);
        }
        true
    }

    /// Adds `row` to every window counted that sums it.
    fn count(&mut self, rules: &[Rule], row: &Charged) {
        for (i, rule) in rules.iter().enumerate() {
            let key = (
                i,
                rule.filter(&row.bot, &row.platform, &row.chat, &row.trigger_id),
            );
            if let Some(window) = self.windows.get_mut(&key) {
                window.add(row.ts_ms, row.tokens, row.cost_usd);
            }
        }
    }

    /// What `key`'s window spent since `since_ms` (it was read: [`Tally::absorb`]).
    pub(super) fn spent(&mut self, key: &Key, since_ms: i64, now_ms: i64) -> Spent {
        let window = self.windows.entry(key.clone()).or_default();
        window.used_ms = now_ms;
        window.spent(since_ms)
    }
}
