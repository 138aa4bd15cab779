//! The budgets' spend kept in memory, so a check costs what changed since the last check rather
//! than every call in its windows: each window a check counts is read from the store once, up
//! to a row id, and then only rows with a larger id are added to it; its rows that leave the
//! window are let go. A window no check counted for [`IDLE_MS`] is dropped, and read again when
//! needed.
//!
//! Where the rows with a larger id come from depends on who writes them:
//! - on PostgreSQL, several instances: each check reads the rows committed since the last one
//!   it read, by id ([`crate::store::Store::usage_tally`]);
//! - on SQLite, this instance alone: each charge adds its own row once committed, with the id
//!   the store gave it, and a check reads nothing. A window of a bot, chat or trigger no row
//!   names yet (every new chat and every new trigger) starts empty without a read: the tally
//!   knows which ones the table names ([`Seen`], read once, then added to as charges begin).

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use super::rule::Rule;
use crate::store::{Charged, LimitOverride, SpendQuery, Spent, UsageSeen, UsageTally};

/// How long a window nobody checked is kept.
const IDLE_MS: i64 = 10 * 60 * 1000;

/// The windows being counted, by budget (its index) and the rows it sums (its query without
/// the window's start).
#[derive(Default)]
pub(super) struct Tally {
    /// The last row read (PostgreSQL).
    last_id: i64,
    windows: HashMap<Key, Window>,
    swept_ms: i64,
    /// What the rows name (SQLite): what charges begun noted, and once `known`, what the
    /// table held.
    seen: Seen,
    known: bool,
    /// The limits admins set, by budget name, as last read.
    pub(super) limits: HashMap<String, LimitOverride>,
}

/// The bots, chats and triggers some usage row names (hashed: a collision only costs a read):
/// what a tally of the one instance writing SQLite needs to know that a window is empty
/// without asking the store.
#[derive(Default)]
struct Seen {
    bots: HashSet<u64>,
    chats: HashSet<u64>,
    triggers: HashSet<u64>,
}

fn hashed(parts: &[&str]) -> u64 {
    let mut hasher = DefaultHasher::new();
    parts.hash(&mut hasher);
    hasher.finish()
}

impl Seen {
    fn saw(&mut self, bot: &str, platform: &str, chat: &str, trigger: &str) {
        self.bots.insert(hashed(&[bot]));
        self.chats.insert(hashed(&[platform, chat]));
        self.triggers.insert(hashed(&[trigger]));
    }

    /// Whether no row `query` sums can exist: it names a bot, chat or trigger no row names.
    fn empty(&self, query: &SpendQuery) -> bool {
        let unseen = |set: &HashSet<u64>, parts: &[&str]| !set.contains(&hashed(parts));
        query
            .bot
            .as_deref()
            .is_some_and(|b| unseen(&self.bots, &[b]))
            || query
                .trigger_id
                .as_deref()
                .is_some_and(|t| unseen(&self.triggers, &[t]))
            || match (&query.platform, &query.chat) {
                (Some(p), Some(c)) => unseen(&self.chats, &[p, c]),
                _ => false,
            }
    }
}

/// One window's calls (time, tokens, USD), oldest first, and their sums.
#[derive(Default)]
struct Window {
    calls: VecDeque<(i64, i64, f64)>,
    tokens: i64,
    cost_usd: f64,
    used_ms: i64,
    /// The largest id its read counted: rows up to it are in.
    upto: i64,
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
    /// The id the next read of fresh rows starts after (PostgreSQL).
    pub(super) fn last_id(&self) -> i64 {
        self.last_id
    }

    /// Whether it took what the store's rows name ([`Tally::know`]).
    pub(super) fn knows(&self) -> bool {
        self.known
    }

    /// Takes what the store's rows name and the limits (SQLite), adding to what charges begun
    /// since noted ([`Tally::saw`]).
    pub(super) fn know(&mut self, read: UsageSeen) {
        self.known = true;
        self.limits = read.limits;
        let seen = &mut self.seen;
        for bot in &read.bots {
            seen.bots.insert(hashed(&[bot]));
        }
        for (platform, chat) in &read.chats {
            seen.chats.insert(hashed(&[platform, chat]));
        }
        for trigger in &read.triggers {
            seen.triggers.insert(hashed(&[trigger]));
        }
    }

    /// Notes, before its row is written (SQLite), that a charge names `bot`, `platform`'s
    /// `chat` and `trigger`: from then on their windows are read.
    pub(super) fn saw(&mut self, bot: &str, platform: &str, chat: &str, trigger: &str) {
        self.seen.saw(bot, platform, chat, trigger);
    }

    /// Which of `keys` are not counted yet and must be read; a window nobody checked lately is
    /// let go first, and one that can have no rows (SQLite) starts empty.
    pub(super) fn wants(&mut self, keys: &[Key], now_ms: i64) -> Vec<Key> {
        if now_ms - self.swept_ms > IDLE_MS / 10 {
            self.swept_ms = now_ms;
            self.windows.retain(|_, w| now_ms - w.used_ms < IDLE_MS);
        }
        let mut missing = Vec::new();
        for key in keys {
            if self.windows.contains_key(key) {
                continue;
            }
            if self.known && self.seen.empty(&key.1) {
                self.windows.insert(key.clone(), Window::default());
            } else {
                missing.push(key.clone());
            }
        }
        missing
    }

    /// Counts what the store read for the `missing` windows of [`Tally::wants`], and the fresh
    /// rows it read with them.
    pub(super) fn absorb(&mut self, rules: &[Rule], missing: Vec<Key>, read: UsageTally) {
        for row in &read.fresh {
            self.count(rules, row);
        }
        self.last_id = read.fresh.last().map_or(self.last_id, |row| row.id);
        self.limits = read.limits;
        for (key, rows) in missing.into_iter().zip(read.windows) {
            let mut window = Window {
                upto: read.upto,
                ..Window::default()
            };
            for row in rows {
                window.add(row.ts_ms, row.tokens, row.cost_usd);
            }
            self.windows.insert(key, window);
        }
    }

    /// Adds `row` to every window counted that sums it and did not read it.
    pub(super) fn count(&mut self, rules: &[Rule], row: &Charged) {
        for (i, rule) in rules.iter().enumerate() {
            let key = (
                i,
                rule.filter(&row.bot, &row.platform, &row.chat, &row.trigger_id),
            );
            if let Some(window) = self.windows.get_mut(&key)
                && row.id > window.upto
            {
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
