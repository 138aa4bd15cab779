//! The budgets' spend kept in memory, so a check costs what changed since the last check rather
//! than every call in its windows: each window a check counts is read from the store once, up
//! to a row id, and then only rows with a larger id are added to it; its rows that leave the
//! window are let go. A window no check counted for [`IDLE_MS`] is dropped, and read again when
//! needed. A budget's windows are kept by its scope's key ([`Keys`]): its match is the same for
//! every row it counts, so the key alone tells its windows apart.
//!
//! Where the rows with a larger id come from depends on who writes them:
//! - on PostgreSQL, several instances: each check reads the rows committed since the last one
//!   it read, by id ([`crate::store::Store::usage_tally`]);
//! - on SQLite, this instance alone: each charge adds its own row once committed, with the id
//!   the store gave it, and a check reads nothing. A window of a bot, chat or trigger no row
//!   names yet (every new chat and every new trigger) starts empty without a read: the tally
//!   knows which ones the table names ([`Seen`], read once, then added to as charges begin).

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHashSet, FxHasher};

use super::rule::Rule;
use crate::config::BudgetScope;
use crate::store::{Charged, LimitOverride, Spent, UsageSeen, UsageTally};

/// How long a window nobody checked is kept.
const IDLE_MS: i64 = 10 * 60 * 1000;

/// The windows being counted, per budget (by its index in the rules) and scope key.
#[derive(Default)]
pub(super) struct Tally {
    /// The last row read (PostgreSQL).
    last_id: i64,
    windows: Vec<FxHashMap<String, Window>>,
    swept_ms: i64,
    /// What the rows name (SQLite): what charges begun noted, and once `known`, what the
    /// table held.
    seen: Seen,
    known: bool,
    /// The limits admins set, by budget name, as last read (on FxHash: every check looks up
    /// each budget it counts).
    pub(super) limits: FxHashMap<String, LimitOverride>,
}

/// A call's (or a row's) key in each scope: its bot, `<platform>:<chat>`, its trigger.
pub(super) struct Keys<'a> {
    bot: &'a str,
    chat: String,
    trigger: &'a str,
}

impl<'a> Keys<'a> {
    pub(super) fn new(bot: &'a str, platform: &str, chat: &str, trigger: &'a str) -> Keys<'a> {
        // Not `format!`: this runs on every check and charge.
        let mut scoped = String::with_capacity(platform.len() + 1 + chat.len());
        scoped.push_str(platform);
        scoped.push(':');
        scoped.push_str(chat);
        Keys {
            bot,
            chat: scoped,
            trigger,
        }
    }

    /// The key in `scope` (`*` for the gateway's one window).
    pub(super) fn of(&self, scope: BudgetScope) -> &str {
        match scope {
            BudgetScope::Bot => self.bot,
            BudgetScope::Chat => &self.chat,
            BudgetScope::Trigger => self.trigger,
            BudgetScope::Gateway => "*",
        }
    }
}

/// The bots, chats and triggers some usage row names (hashed: a collision only costs a read):
/// what a tally of the one instance writing SQLite needs to know that a window is empty
/// without asking the store.
#[derive(Default)]
struct Seen {
    bots: FxHashSet<u64>,
    chats: FxHashSet<u64>,
    triggers: FxHashSet<u64>,
}

fn hashed(key: &str) -> u64 {
    let mut hasher = FxHasher::default();
    key.hash(&mut hasher);
    hasher.finish()
}

impl Seen {
    fn saw(&mut self, keys: &Keys<'_>) {
        self.bots.insert(hashed(keys.bot));
        self.chats.insert(hashed(&keys.chat));
        self.triggers.insert(hashed(keys.trigger));
    }

    /// Whether no row a window of `scope` keyed `key` sums can exist: no row names its key.
    fn empty(&self, scope: BudgetScope, key: &str) -> bool {
        let set = match scope {
            BudgetScope::Bot => &self.bots,
            BudgetScope::Chat => &self.chats,
            BudgetScope::Trigger => &self.triggers,
            BudgetScope::Gateway => return false,
        };
        !set.contains(&hashed(key))
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

/// A window a check needs: which budget (its index), and its scope key.
pub(super) type Key<'k> = (usize, &'k str);

impl Tally {
    /// A tally for `rules` budgets.
    pub(super) fn new(rules: usize) -> Tally {
        Tally {
            windows: (0..rules).map(|_| FxHashMap::default()).collect(),
            ..Tally::default()
        }
    }

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
        self.limits = read.limits.into_iter().collect();
        let seen = &mut self.seen;
        seen.bots.extend(read.bots.iter().map(|b| hashed(b)));
        seen.chats
            .extend(read.chats.iter().map(|(p, c)| hashed(&format!("{p}:{c}"))));
        seen.triggers
            .extend(read.triggers.iter().map(|t| hashed(t)));
    }

    /// Notes, before its row is written (SQLite), that a charge names these keys: from then on
    /// their windows are read.
    pub(super) fn saw(&mut self, keys: &Keys<'_>) {
        self.seen.saw(keys);
    }

    /// Which of `wanted` are not counted yet and must be read; a window nobody checked lately
    /// is let go first, and one that can have no rows (SQLite) starts empty.
    pub(super) fn wants<'k>(
        &mut self,
        rules: &[Rule],
        wanted: &[Key<'k>],
        now_ms: i64,
    ) -> Vec<Key<'k>> {
        if now_ms - self.swept_ms > IDLE_MS / 10 {
            self.swept_ms = now_ms;
            for windows in &mut self.windows {
                windows.retain(|_, w| now_ms - w.used_ms < IDLE_MS);
            }
        }
        let mut missing = Vec::new();
        for &(i, key) in wanted {
            if self.windows[i].contains_key(key) {
                continue;
            }
            if self.known && self.seen.empty(rules[i].scope, key) {
                self.windows[i].insert(key.to_owned(), Window::default());
            } else {
                missing.push((i, key));
            }
        }
        missing
    }

    /// Counts what the store read for the `missing` windows of [`Tally::wants`], and the fresh
    /// rows it read with them.
    pub(super) fn absorb(&mut self, rules: &[Rule], missing: &[Key<'_>], read: UsageTally) {
        for row in &read.fresh {
            self.count(rules, row);
        }
        self.last_id = read.fresh.last().map_or(self.last_id, |row| row.id);
        self.limits = read.limits.into_iter().collect();
        for (&(i, key), rows) in missing.iter().zip(read.windows) {
            let mut window = Window {
                upto: read.upto,
                ..Window::default()
            };
            for row in rows {
                window.add(row.ts_ms, row.tokens, row.cost_usd);
            }
            self.windows[i].insert(key.to_owned(), window);
        }
    }

    /// Adds `row` to every window counted that sums it and did not read it.
    pub(super) fn count(&mut self, rules: &[Rule], row: &Charged) {
        let keys = Keys::new(&row.bot, &row.platform, &row.chat, &row.trigger_id);
        for (rule, windows) in rules.iter().zip(&mut self.windows) {
            if !rule.counts(&row.bot, &row.platform, &row.chat) {
                continue;
            }
            if let Some(window) = windows.get_mut(keys.of(rule.scope))
                && row.id > window.upto
            {
                window.add(row.ts_ms, row.tokens, row.cost_usd);
            }
        }
    }

    /// What `key`'s window spent since `since_ms` (it was read: [`Tally::absorb`]).
    pub(super) fn spent(&mut self, (i, key): Key<'_>, since_ms: i64, now_ms: i64) -> Spent {
        let windows = &mut self.windows[i];
        let window = match windows.get_mut(key) {
            Some(window) => window,
            None => windows.entry(key.to_owned()).or_default(),
        };
        window.used_ms = now_ms;
        window.spent(since_ms)
    }
}
