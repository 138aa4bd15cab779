//! Budgets that follow the conversation (SPEC section 12): every model call is charged to its
//! bot, to the chat its trigger happened in and to the trigger, and checked beforehand against
//! every `[[budgets]]` entry that matches it.
//!
//! [`Budgets`] is a cheap clonable handle (an `Arc` inside) built once by the gateway and given
//! to the turn that calls the model; it holds the resolved rules and prices and reaches the
//! store for the spend, so every instance sharing the database sees the same figures.
//!
//! - `rule.rs`: a budget resolved from the config, and which usage rows it sums for a call;
//! - `price.rs`: what a call cost, and the estimate for a backend that reports no usage;
//! - `counters.rs`: the `/metrics` series;
//! - `tally.rs`: the windows' spend kept in memory, brought up to date from the store;
//! - here: the check ([`Budgets::check`]), the charge ([`Budgets::charge`]), the limits admins
//!   set, and what `/baton budget` shows.
//!
//! The check counts the rows committed before it (every instance's: on PostgreSQL it reads the
//! rows committed since the last check; on SQLite, which one instance writes, the charges add
//! their rows as they commit, and a check reads nothing), the charge adds a row once the call
//! is done. A call that starts while others are in flight does not see their spend yet: that
//! is the "at most the calls already in flight" a limit may be passed by (SPEC 12), and it
//! holds across instances because every check on PostgreSQL reads the committed rows. A budget's notice and its warnings are claimed
//! by one conditional upsert, so they go out once per window even with instances racing.

mod counters;
mod price;
pub mod report;
mod rule;
mod tally;

use std::sync::Arc;

use baton_contract::Platform;

pub use counters::Counters;
pub use price::estimate;
use rule::{Rule, share};
use tally::{Keys, Tally};

use crate::backend::Usage;
use crate::bot_id::BotId;
use crate::config::{BudgetScope, Config, OnExceed, PricesConfig};
use crate::store::{Charged, LimitOverride, NewUsage, Spent, Store, StoreError};
use crate::timing::now_ms;

/// Who a model call is charged to.
#[derive(Debug, Clone, Copy)]
pub struct Bill<'a> {
    /// The bot making it.
    pub bot: &'a BotId,
    /// The platform of the chat its trigger happened in.
    pub platform: Platform,
    /// That chat (a thread's channel).
    pub chat: &'a str,
    /// The trigger: the run id of the turn a human, a schedule or an API request started.
    pub trigger: &'a str,
}

/// What the check decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Make the call; `warnings` are the warn-mode thresholds it has just crossed (each told
    /// once per window).
    Go {
        /// Warnings to send to the admins.
        warnings: Vec<Warning>,
    },
    /// Do not make the call.
    Stop(Stopped),
}

/// A `stop` budget that is used up.
#[derive(Debug, Clone, PartialEq)]
pub struct Stopped {
    /// The budget's name.
    pub budget: String,
    /// The notice to post in the trigger's chat, when this call is the one that claimed it
    /// (once per budget and window).
    pub notice: Option<String>,
}

/// A warn-mode budget that has crossed 80 % or 100 %.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// The budget's name.
    pub budget: String,
    /// 80 or 100.
    pub percent: u8,
    /// What the admins are told.
    pub text: String,
}

/// One budget as `/baton budget` shows it for a chat.
#[derive(Debug, Clone, PartialEq)]
pub struct Standing {
    /// The budget's name.
    pub budget: String,
    /// What it is counted per.
    pub scope: BudgetScope,
    /// Tokens used in its window.
    pub tokens: i64,
    /// USD used in its window.
    pub cost_usd: f64,
    /// Its limits (an admin's over the config's).
    pub limits: LimitOverride,
    /// Its window, when it has one.
    pub window: Option<std::time::Duration>,
    /// How much of it is used, 1.0 = all.
    pub share: f64,
    /// When its oldest counted call leaves the window, freeing what it spent.
    pub resets_in: Option<std::time::Duration>,
}

/// Which limit `/baton budget set` changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// `tokens`.
    Tokens,
    /// `cost_usd`.
    CostUsd,
}

/// Why `/baton budget set` did not take.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// No budget has that name.
    #[error("no budget is named `{0}`; `/baton budget` lists them")]
    Unknown(String),
    /// The value is not a number above zero.
    #[error("`{0}` is not a limit; write a number above 0")]
    BadValue(String),
    /// The store could not keep it.
    #[error("the limit could not be kept: {0}")]
    Store(#[from] StoreError),
}

/// The budgets, the prices and the store their spend lives in.
#[derive(Clone)]
pub struct Budgets {
    inner: Arc<Inner>,
}

struct Inner {
    rules: Vec<Rule>,
    prices: PricesConfig,
    store: Store,
    instance: String,
    counters: Counters,
    /// Held across a check's read, so checks count the rows in order.
    tally: tokio::sync::Mutex<Tally>,
}

impl Budgets {
    /// The budgets of `config`, their spend kept in `store`, charged by `instance`.
    pub fn new(config: &Config, store: Store, instance: &str) -> Budgets {
        Budgets {
            inner: Arc::new(Inner {
                rules: config.budgets.iter().map(Rule::new).collect(),
                prices: config.prices.clone(),
                store,
                instance: instance.to_owned(),
                counters: Counters::default(),
                tally: tokio::sync::Mutex::new(Tally::new(config.budgets.len())),
            }),
        }
    }

    /// The `/metrics` series.
    pub fn counters(&self) -> &Counters {
        &self.inner.counters
    }

    /// Checks every budget that matches `bill` before a model call. A call that matches none
    /// touches nothing; a store that cannot be read lets the call go (logged): a budget must
    /// not turn a database hiccup into a silent bot.
    pub async fn check(&self, bill: &Bill<'_>) -> Verdict {
        let go = Verdict::Go {
            warnings: Vec::new(),
        };
        let rules = &self.inner.rules;
        let matching: Vec<usize> = (0..rules.len())
            .filter(|&i| rules[i].matches(bill))
            .collect();
        if matching.is_empty() {
            return go;
        }
        let now = now_ms();
        let scoped = Keys::new(
            bill.bot.as_str(),
            bill.platform.as_str(),
            bill.chat,
            bill.trigger,
        );
        let keys: Vec<tally::Key> = matching
            .iter()
            .map(|&i| (i, scoped.of(rules[i].scope)))
            .collect();
        let mut tally = self.inner.tally.lock().await;
        if let Err(err) = self.bring_up_to_date(&mut tally, bill, &keys, now).await {
            tracing::error!(%err, bot = %bill.bot, "could not read the budgets' spend; the call goes ahead");
            return go;
        }
        let spent: Vec<(Spent, LimitOverride)> = keys
            .iter()
            .map(|&key| {
                let rule = &rules[key.0];
                let limits = rule.limits(tally.limits.get(&rule.name));
                (tally.spent(key, rule.since_ms(now), now), limits)
            })
            .collect();
        drop(tally);
        let matching = matching.into_iter().map(|i| &rules[i]);
        let mut warnings = Vec::new();
        for (rule, (spent, limits)) in matching.into_iter().zip(spent) {
            let used = share(spent, limits);
            match rule.on_exceed {
                OnExceed::Stop if used >= 1.0 => {
                    self.inner.counters.refused(&rule.name);
                    let claimed = self.claim(rule, bill, "stop", now).await;
                    let notice = claimed.then(|| notice_text(bill.bot, rule, limits));
                    return Verdict::Stop(Stopped {
                        budget: rule.name.clone(),
                        notice,
                    });
                }
                OnExceed::Stop => {}
                OnExceed::Warn => {
                    let percent = match used {
                        u if u >= 1.0 => 100,
                        u if u >= 0.8 => 80,
                        _ => continue,
                    };
                    if self.claim(rule, bill, &format!("warn{percent}"), now).await {
                        warnings.push(Warning {
                            budget: rule.name.clone(),
                            percent,
                            text: warning_text(bill.bot, rule, percent, spent.tokens, limits),
                        });
                    }
                }
            }
        }
        Verdict::Go { warnings }
    }

    /// Brings `tally`'s windows for `keys` up to date (`tally.rs`): on PostgreSQL with the rows
    /// every instance committed since the last read; on SQLite, whose rows this instance
    /// counts as it charges them, only by reading the windows it never counted that can have
    /// rows.
    async fn bring_up_to_date(
        &self,
        tally: &mut Tally,
        bill: &Bill<'_>,
        keys: &[tally::Key<'_>],
        now: i64,
    ) -> Result<(), StoreError> {
        let store = &self.inner.store;
        let written_elsewhere = store.usage_shared();
        if !written_elsewhere && !tally.knows() {
            tally.know(store.usage_seen().await?);
        }
        let rules = &self.inner.rules;
        let missing = tally.wants(rules, keys, now);
        if !written_elsewhere && missing.is_empty() {
            return Ok(());
        }
        let windows = missing
            .iter()
            .map(|&(i, _)| rules[i].query(bill, now))
            .collect();
        let after = written_elsewhere.then(|| tally.last_id());
        let read = store.usage_tally(after, windows).await?;
        tally.absorb(rules, &missing, read);
        Ok(())
    }

    /// Claims a notice of `kind` for `rule` once per window; a store error claims nothing.
    async fn claim(&self, rule: &Rule, bill: &Bill<'_>, kind: &str, now: i64) -> bool {
        let key = rule.scope_key(bill);
        let since = rule.since_ms(now);
        let store = &self.inner.store;
        match store
            .budget_notice_claim(&rule.name, &key, kind, now, since)
            .await
        {
            Ok(claimed) => claimed,
            Err(err) => {
                tracing::error!(%err, budget = %rule.name, "could not record the budget's notice; not sent");
                false
            }
        }
    }

    /// Charges a finished call: one usage row (with its cost when the model has a price) and
    /// the counters. `estimated` marks tokens counted from characters.
    pub async fn charge(&self, bill: &Bill<'_>, call: Call<'_>) {
        let cost = price::cost(&self.inner.prices, call.model, call.usage);
        self.inner
            .counters
            .charged(bill.bot, call.usage, cost.unwrap_or(0.0));
        let row = NewUsage {
            ts_ms: now_ms(),
            bot: bill.bot.as_str().to_owned(),
            platform: bill.platform.as_str().to_owned(),
            chat: bill.chat.to_owned(),
            session: call.session.to_owned(),
            run_id: call.run_id.to_owned(),
            trigger_id: bill.trigger.to_owned(),
            instance: self.inner.instance.clone(),
            model: call.model.to_owned(),
            prompt_tokens: i64::try_from(call.usage.prompt_tokens).unwrap_or(i64::MAX),
            completion_tokens: i64::try_from(call.usage.completion_tokens).unwrap_or(i64::MAX),
            cost_usd: cost,
            estimated: call.estimated,
        };
        let mut counted = Charged {
            id: 0,
            ts_ms: row.ts_ms,
            bot: row.bot.clone(),
            platform: row.platform.clone(),
            chat: row.chat.clone(),
            trigger_id: row.trigger_id.clone(),
            tokens: row.prompt_tokens.saturating_add(row.completion_tokens),
            cost_usd: cost.unwrap_or(0.0),
        };
        // On SQLite this instance writes every row: its tally counts them here (`tally.rs`).
        // With no budget configured there is nothing to count them for.
        let local = !self.inner.store.usage_shared() && !self.inner.rules.is_empty();
        if local {
            let keys = Keys::new(&row.bot, &row.platform, &row.chat, &row.trigger_id);
            self.inner.tally.lock().await.saw(&keys);
        }
        match self.inner.store.usage_record(vec![row]).await {
            Ok(ids) if local => {
                let mut tally = self.inner.tally.lock().await;
                for id in ids {
                    counted.id = id;
                    tally.count(&self.inner.rules, &counted);
                }
            }
            Ok(_) => {}
            Err(err) => {
                tracing::error!(%err, bot = %bill.bot, "could not record a model call's usage");
            }
        }
    }

    /// Sets budget `name`'s limit over the config's, for every instance.
    pub async fn set_limit(
        &self,
        name: &str,
        kind: LimitKind,
        value: &str,
    ) -> Result<(), SetError> {
        if !self.inner.rules.iter().any(|r| r.name == name) {
            return Err(SetError::Unknown(name.to_owned()));
        }
        let bad = || SetError::BadValue(value.to_owned());
        let limit = match kind {
            LimitKind::Tokens => LimitOverride {
                tokens: Some(
                    value
                        .replace(['_', ','], "")
                        .parse()
                        .ok()
                        .filter(|v: &i64| *v > 0)
                        .ok_or_else(bad)?,
                ),
                cost_usd: None,
            },
            LimitKind::CostUsd => LimitOverride {
                tokens: None,
                cost_usd: Some(
                    value
                        .trim_start_matches('$')
                        .parse()
                        .ok()
                        .filter(|v: &f64| v.is_finite() && *v > 0.0)
                        .ok_or_else(bad)?,
                ),
            },
        };
        let store = &self.inner.store;
        store.budget_limit_set(name, limit, now_ms()).await?;
        if !store.usage_shared() {
            // Read once on SQLite (`tally.rs`), so kept here as the store keeps it.
            let mut tally = self.inner.tally.lock().await;
            let kept = tally.limits.entry(name.to_owned()).or_default();
            kept.tokens = limit.tokens.or(kept.tokens);
            kept.cost_usd = limit.cost_usd.or(kept.cost_usd);
        }
        Ok(())
    }

    /// The budgets that count calls of `bots` in `chat`, with their spend: `/baton budget`.
    /// A trigger budget is shown for the chat's latest trigger it names, so it shows nothing.
    pub async fn standing(
        &self,
        platform: Platform,
        chat: &str,
        bots: &[BotId],
    ) -> Result<Vec<Standing>, StoreError> {
        let now = now_ms();
        let mut picked: Vec<(&Rule, Bill<'_>)> = Vec::new();
        for rule in self
            .inner
            .rules
            .iter()
            .filter(|r| r.scope != BudgetScope::Trigger)
        {
            let bill = |bot| Bill {
                bot,
                platform,
                chat,
                trigger: "",
            };
            let per_bot = rule.scope == BudgetScope::Bot;
            for bot in bots {
                if rule.matches(&bill(bot)) {
                    picked.push((rule, bill(bot)));
                    if !per_bot {
                        break;
                    }
                }
            }
        }
        let queries = picked.iter().map(|(r, b)| r.query(b, now)).collect();
        let (spent, set) = self.inner.store.usage_window(queries).await?;
        Ok(picked
            .into_iter()
            .zip(spent)
            .map(|((rule, bill), spent)| {
                let limits = rule.limits(set.get(&rule.name));
                let name = match rule.scope {
                    BudgetScope::Bot if rule.bot.is_none() => {
                        format!("{} ({})", rule.name, bill.bot)
                    }
                    _ => rule.name.clone(),
                };
                Standing {
                    budget: name,
                    scope: rule.scope,
                    tokens: spent.tokens,
                    cost_usd: spent.cost_usd,
                    limits,
                    window: rule.window,
                    share: share(spent, limits),
                    resets_in: rule.window.and(spent.oldest_ms).and_then(|oldest| {
                        let left = oldest.checked_sub(rule.since_ms(now))?;
                        u64::try_from(left)
                            .ok()
                            .map(std::time::Duration::from_millis)
                    }),
                }
            })
            .collect())
    }
}

/// One finished model call (or a turn's calls together).
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The session the turn ran in.
    pub session: &'a str,
    /// Its run id.
    pub run_id: &'a str,
    /// The model that answered.
    pub model: &'a str,
    /// Its tokens.
    pub usage: Usage,
    /// Whether they are an estimate.
    pub estimated: bool,
}

/// The reason a delivery refused for a used-up budget keeps: `budget:<name>`.
pub fn refusal_reason(budget: &str) -> String {
    format!("{REFUSAL_PREFIX}{budget}")
}

/// The budget a delivery's reason names, when it was refused for one.
pub fn refused_budget(reason: &str) -> Option<&str> {
    reason.strip_prefix(REFUSAL_PREFIX)
}

const REFUSAL_PREFIX: &str = "budget:";

/// A limit as people read it: `200,000 tokens`, `$5.00`.
pub fn limit_text(limits: LimitOverride) -> String {
    let tokens = limits.tokens.map(|t| format!("{} tokens", grouped(t)));
    let cost = limits.cost_usd.map(|c| format!("${c:.2}"));
    match (tokens, cost) {
        (Some(t), Some(c)) => format!("{t} or {c}"),
        (Some(one), None) | (None, Some(one)) => one,
        (None, None) => "no limit".to_owned(),
    }
}

/// `1234567` as `1,234,567`.
pub fn grouped(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn notice_text(bot: &BotId, rule: &Rule, limits: LimitOverride) -> String {
    format!(
        "{bot} has used its budget `{}`: {}. An admin can raise it with `/baton budget`.",
        rule.name,
        limit_text(limits)
    )
}

fn warning_text(
    bot: &BotId,
    rule: &Rule,
    percent: u8,
    tokens: i64,
    limits: LimitOverride,
) -> String {
    format!(
        "Budget `{}` ({bot}) is at {percent}% of {} ({} tokens used). It only warns; \
         `/baton budget set {} tokens|cost_usd VALUE` changes it.",
        rule.name,
        limit_text(limits),
        grouped(tokens),
        rule.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{SpendQuery, testing};

    /// Instances (two store handles with their own writers on PostgreSQL, as two processes
    /// have; on SQLite, which one instance writes, one) charging one budget at once: once it is used up every
    /// call is refused, and spend passed the limit by at most the calls that were in flight
    /// (one per worker).
    #[tokio::test]
    async fn instances_charging_one_budget_overspend_by_at_most_the_calls_in_flight() {
        const LIMIT: i64 = 100;
        const PER_CALL: u64 = 10;
        const WORKERS: usize = 4;
        let config: Config = toml::from_str(
            "[[budgets]]\nname = \"all\"\nscope = \"gateway\"\ntokens = 100\nwindow = \"1h\"\n",
        )
        .unwrap();
        for db in testing::engines().await {
            let stores = if db.engine() == "postgres" {
                vec![db.open().await, db.open().await]
            } else {
                vec![db.open().await]
            };
            let instances: Vec<Budgets> = stores
                .iter()
                .enumerate()
                .map(|(i, store)| Budgets::new(&config, store.clone(), &format!("i{i}")))
                .collect();
            let mut workers = Vec::new();
            // Twice as many workers as instances on PostgreSQL: as many calls in flight.
            for budgets in instances.iter().cycle().take(2) {
                for w in 0..WORKERS {
                    let budgets = budgets.clone();
                    workers.push(tokio::spawn(async move {
                        let bot: BotId = format!("bot{w}").parse().unwrap();
                        let bill = Bill {
                            bot: &bot,
                            platform: Platform::Local,
                            chat: "room",
                            trigger: "t",
                        };
                        let mut made = 0;
                        while let Verdict::Go { .. } = budgets.check(&bill).await {
                            let usage = Usage {
                                prompt_tokens: PER_CALL / 2,
                                completion_tokens: PER_CALL / 2,
                            };
                            let call = Call {
                                session: "s",
                                run_id: "r",
                                model: "m",
                                usage,
                                estimated: false,
                            };
                            budgets.charge(&bill, call).await;
                            made += 1;
                        }
                        made
                    }));
                }
            }
            let mut calls = 0;
            for worker in workers {
                calls += worker.await.unwrap();
            }
            let all = SpendQuery {
                since_ms: i64::MIN,
                ..SpendQuery::default()
            };
            let (spent, _) = stores[0].usage_window(vec![all]).await.unwrap();
            let engine = db.engine();
            assert_eq!(spent[0].tokens, calls * PER_CALL as i64, "{engine}");
            let in_flight = (2 * WORKERS) as i64 * PER_CALL as i64;
            assert!(spent[0].tokens >= LIMIT, "{engine}: {}", spent[0].tokens);
            assert!(
                spent[0].tokens < LIMIT + in_flight,
                "{engine}: {} tokens spent of {LIMIT}",
                spent[0].tokens
            );
        }
    }

    /// The check keeps its windows' sums in memory: rows charged (on PostgreSQL, by another
    /// instance too) are counted at the next check, rows that leave the window stop counting,
    /// a chat and a trigger no row names start empty, and pruning never lets ids start again.
    #[tokio::test]
    async fn the_kept_sums_follow_the_charges_and_the_window() {
        const HOUR: i64 = 3_600_000;
        let config: Config = toml::from_str(
            "[[budgets]]\nname = \"hourly\"\nscope = \"bot\"\ntokens = 100\nwindow = \"1h\"\n\
             [[budgets]]\nname = \"per-chat\"\nscope = \"chat\"\ntokens = 100\nwindow = \"1h\"\n\
             [[budgets]]\nname = \"per-trigger\"\nscope = \"trigger\"\ntokens = 100\n",
        )
        .unwrap();
        let bot: BotId = "caid".parse().unwrap();
        let bill = |chat, trigger| Bill {
            bot: &bot,
            platform: Platform::Local,
            chat,
            trigger,
        };
        let row = |ts_ms, tokens| NewUsage {
            ts_ms,
            bot: "caid".into(),
            platform: "local".into(),
            chat: "room".into(),
            session: "s".into(),
            run_id: "r".into(),
            trigger_id: "t".into(),
            instance: "other".into(),
            model: "m".into(),
            prompt_tokens: tokens,
            completion_tokens: 0,
            cost_usd: None,
            estimated: false,
        };
        let stopped = |verdict| matches!(verdict, Verdict::Stop(_));
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let budgets = Budgets::new(&config, store.clone(), "i1");
            let now = now_ms();
            // Written before the instance started.
            store
                .usage_record(vec![row(now - 2 * HOUR, 500)])
                .await
                .unwrap();
            assert!(
                !stopped(budgets.check(&bill("room", "t2")).await),
                "{engine}: outside the window"
            );
            assert!(
                stopped(budgets.check(&bill("room", "t")).await),
                "{engine}: the trigger's 500 of 100, counted before the instance started"
            );
            let (store_ref, budgets_ref, bill_ref) = (&store, &budgets, &bill);
            let charge = |tokens: i64| async move {
                let (store, budgets, bill) = (store_ref, budgets_ref, bill_ref);
                if engine == "postgres" {
                    store.usage_record(vec![row(now, tokens)]).await.unwrap();
                } else {
                    let usage = Usage {
                        prompt_tokens: tokens as u64,
                        completion_tokens: 0,
                    };
                    let call = Call {
                        session: "s",
                        run_id: "r",
                        model: "m",
                        usage,
                        estimated: false,
                    };
                    budgets.charge(&bill("room", "t2"), call).await;
                }
            };
            charge(60).await;
            assert!(
                !stopped(budgets.check(&bill("room", "t3")).await),
                "{engine}: 60 of 100"
            );
            charge(50).await;
            assert!(
                stopped(budgets.check(&bill("other-room", "t4")).await),
                "{engine}: 110 of 100"
            );
            // Every row old enough to go, whatever the minimum age of a prune.
            let top = |store: Store| async move {
                store.usage_tally(None, Vec::new()).await.unwrap().upto
            };
            let before = top(store.clone()).await;
            store
                .prune(crate::store::PruneTable::Usage, now + 1, i64::MAX)
                .await
                .unwrap();
            assert_eq!(
                top(store.clone()).await,
                before,
                "{engine}: the newest row stays"
            );
            let ids = store.usage_record(vec![row(now, 1)]).await.unwrap();
            assert!(ids[0] > before, "{engine}: ids go on after a prune");
        }
    }

    #[test]
    fn limits_read_as_people_write_them() {
        assert_eq!(grouped(200_000), "200,000");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_234_567), "1,234,567");
        let both = LimitOverride {
            tokens: Some(200_000),
            cost_usd: Some(5.0),
        };
        assert_eq!(limit_text(both), "200,000 tokens or $5.00");
    }
}
