//! Usage: one row per model call, charged to a bot, to the chat its trigger happened in and to
//! the trigger (SPEC section 12). A budget tally reads a window's rows once, when it first
//! counts it, from the index on its scope's key and the time (`usage_bot`, `usage_chat`,
//! `usage_trigger`, `usage_ts`), and then only rows with a larger id: on PostgreSQL, the rows
//! every instance wrote since its last read ([`Store::usage_tally`]); on SQLite, which one
//! instance writes, the ids [`Store::usage_record`] hands back. That needs ids that become
//! visible in their order and never start again: SQLite has one writer and pruning keeps the
//! newest row; on PostgreSQL each insert first takes the same transaction lock (a sequence
//! alone hands out ids in the order inserts begin, not the order they commit, and a reader
//! that counted id 11 would never count a 10 committed after it).
//!
//! Beside the rows: when a budget's notice or warning last went out (`budget_notices`, claimed
//! by one conditional upsert, so once per window even with several instances racing), and the
//! limits admins set with `/baton budget set` (`budget_limits`).

use std::collections::HashMap;

use serde::Serialize;

use super::sql::{Db, DbError, Engine, Value, args};
use super::{Store, StoreError};

/// One model call's usage, to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewUsage {
    /// When the call ended, ms since the epoch.
    pub ts_ms: i64,
    /// The bot that made it.
    pub bot: String,
    /// The platform of the chat it is charged to.
    pub platform: String,
    /// The chat it is charged to (where its trigger happened; a thread's channel).
    pub chat: String,
    /// The session the turn ran in.
    pub session: String,
    /// The turn's run id.
    pub run_id: String,
    /// The trigger it is charged to.
    pub trigger_id: String,
    /// The instance that made the call.
    pub instance: String,
    /// The model that answered.
    pub model: String,
    /// Tokens read.
    pub prompt_tokens: i64,
    /// Tokens written.
    pub completion_tokens: i64,
    /// What it cost, `None` for a model without a price.
    pub cost_usd: Option<f64>,
    /// Whether the tokens are an estimate (characters / 4): the backend reported none.
    pub estimated: bool,
}

/// Which rows a sum counts: those since `since_ms` with each set column equal to its value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SpendQuery {
    /// The window's start, ms since the epoch (`i64::MIN`: no window).
    pub since_ms: i64,
    /// Only this bot's calls.
    pub bot: Option<String>,
    /// Only calls charged to chats of this platform.
    pub platform: Option<String>,
    /// Only calls charged to this chat.
    pub chat: Option<String>,
    /// Only calls of this trigger.
    pub trigger_id: Option<String>,
}

/// What a set of rows spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Spent {
    /// Prompt plus completion tokens.
    pub tokens: i64,
    /// USD, over the calls whose model has a price.
    pub cost_usd: f64,
    /// When the oldest of the rows was written (`None`: no rows).
    pub oldest_ms: Option<i64>,
}

/// A usage row as a budget tally counts it.
#[derive(Debug, Clone, PartialEq)]
pub struct Charged {
    /// Its id: rows become visible in id order.
    pub id: i64,
    /// When the call ended.
    pub ts_ms: i64,
    /// The bot that made it.
    pub bot: String,
    /// The platform of the chat it is charged to.
    pub platform: String,
    /// That chat.
    pub chat: String,
    /// The trigger it is charged to.
    pub trigger_id: String,
    /// Prompt plus completion tokens.
    pub tokens: i64,
    /// USD (0 for a model without a price).
    pub cost_usd: f64,
}

/// What a budget check reads: the rows written since the last read, the windows it counts for
/// the first time, and the limits admins set.
#[derive(Debug, Clone, Default)]
pub struct UsageTally {
    /// Rows with an id above the one asked for, in id order.
    pub fresh: Vec<Charged>,
    /// The id the windows' rows go up to: the last of `fresh`, else the id asked for, else
    /// (no rows asked for) the largest in the table.
    pub upto: i64,
    /// Per window asked for, its rows up to `upto`, oldest first, with only their time, tokens
    /// and cost set.
    pub windows: Vec<Vec<Charged>>,
    /// The limits admins set, by budget name.
    pub limits: HashMap<String, LimitOverride>,
}

/// What SQLite's usage rows name, for a tally that then counts only its own instance's rows.
#[derive(Debug, Clone, Default)]
pub struct UsageSeen {
    /// Every bot.
    pub bots: Vec<String>,
    /// Every chat, as (platform, chat).
    pub chats: Vec<(String, String)>,
    /// Every trigger.
    pub triggers: Vec<String>,
    /// The limits admins set, by budget name.
    pub limits: HashMap<String, LimitOverride>,
}

/// What `group_by` a usage report sums per.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageGroup {
    /// Per bot.
    Bot,
    /// Per chat (`<platform>:<chat>`).
    Chat,
    /// Per trigger.
    Trigger,
    /// Per model.
    Model,
}

impl UsageGroup {
    /// The name in `group_by=` and in the report's rows.
    pub fn as_str(self) -> &'static str {
        match self {
            UsageGroup::Bot => "bot",
            UsageGroup::Chat => "chat",
            UsageGroup::Trigger => "trigger",
            UsageGroup::Model => "model",
        }
    }

    fn expr(self) -> &'static str {
        match self {
            UsageGroup::Bot => "bot",
            UsageGroup::Chat => "platform || ':' || chat",
            UsageGroup::Trigger => "trigger_id",
            UsageGroup::Model => "model",
        }
    }
}

impl std::str::FromStr for UsageGroup {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            UsageGroup::Bot,
            UsageGroup::Chat,
            UsageGroup::Trigger,
            UsageGroup::Model,
        ]
        .into_iter()
        .find(|g| g.as_str() == s)
        .ok_or_else(|| format!("`{s}` is not a grouping; write bot, chat, trigger or model"))
    }
}

/// One row of a usage report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageRow {
    /// The group's key (a bot id, `<platform>:<chat>`, a trigger id or a model).
    pub key: String,
    /// Tokens read.
    pub prompt_tokens: i64,
    /// Tokens written.
    pub completion_tokens: i64,
    /// Both.
    pub total_tokens: i64,
    /// USD, `None` when no call of the group had a price.
    pub cost_usd: Option<f64>,
    /// Whether some of the tokens are estimates.
    pub estimated: bool,
}

/// A limit an admin set over the config's.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitOverride {
    /// Tokens, when set.
    pub tokens: Option<i64>,
    /// USD, when set.
    pub cost_usd: Option<f64>,
}

impl SpendQuery {
    /// The `WHERE` text and its parameters.
    fn filter(&self) -> (String, Vec<Value<'_>>) {
        let mut sql = String::from("ts_ms >= ?1");
        let mut params = vec![Value::from(self.since_ms)];
        for (column, value) in [
            ("bot", &self.bot),
            ("platform", &self.platform),
            ("chat", &self.chat),
            ("trigger_id", &self.trigger_id),
        ] {
            if let Some(value) = value {
                params.push(Value::from(value));
                sql.push_str(&format!(" AND {column} = ?{}", params.len()));
            }
        }
        (sql, params)
    }
}

/// Sums of the rows `query` selects, in one statement.
fn spent(db: Db<'_>, query: &SpendQuery) -> Result<Spent, DbError> {
    let (filter, params) = query.filter();
    let sql = format!(
        "SELECT CAST(COALESCE(SUM(prompt_tokens + completion_tokens), 0) AS BIGINT),
                CAST(COALESCE(SUM(cost_usd), 0) AS DOUBLE PRECISION), MIN(ts_ms)
         FROM usage WHERE {filter}"
    );
    db.query_row(&sql, &params, |r| {
        Ok(Spent {
            tokens: r.get(0)?,
            cost_usd: r.get(1)?,
            oldest_ms: r.get(2)?,
        })
    })
}

/// Inserts `rows` inside a writer job (alone, or with the job it rides on), returning their
/// ids in order.
pub(super) fn insert(db: Db<'_>, rows: &[NewUsage]) -> Result<Vec<i64>, DbError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    // Ids drawn in commit order across instances (see the module doc).
    db.exclusive("usage")?;
    let mut ids = Vec::with_capacity(rows.len());
    for u in rows {
        let id = db.insert_id(
            "INSERT INTO usage (ts_ms, bot, platform, chat, session, run_id, trigger_id,
                instance, model, prompt_tokens, completion_tokens, cost_usd, estimated)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            args![
                u.ts_ms,
                &u.bot,
                &u.platform,
                &u.chat,
                &u.session,
                &u.run_id,
                &u.trigger_id,
                &u.instance,
                &u.model,
                u.prompt_tokens,
                u.completion_tokens,
                u.cost_usd,
                u.estimated,
            ],
        )?;
        ids.extend(id);
    }
    Ok(ids)
}

impl Store {
    /// Whether other instances may write usage rows too (PostgreSQL); on SQLite this one alone
    /// does.
    pub fn usage_shared(&self) -> bool {
        self.engine() == Engine::Postgres
    }

    /// Records model calls' usage, once committed; their ids, in order.
    pub async fn usage_record(&self, rows: Vec<NewUsage>) -> Result<Vec<i64>, StoreError> {
        self.write(move |db| insert(db, &rows)).await
    }

    /// What a tally of the one instance writing SQLite starts from: the bots, chats
    /// (`platform`, `chat`) and triggers some row names, and the limits admins set.
    pub async fn usage_seen(&self) -> Result<UsageSeen, StoreError> {
        self.read(move |db| {
            let column = |sql| db.query_map(sql, args![], |r| r.get::<String>(0));
            Ok(UsageSeen {
                bots: column("SELECT DISTINCT bot FROM usage")?,
                chats: db.query_map("SELECT DISTINCT platform, chat FROM usage", args![], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?,
                triggers: column("SELECT DISTINCT trigger_id FROM usage")?,
                limits: limits(db)?,
            })
        })
        .await
    }

    /// What each query's rows spent, in the queries' order, and the limits admins set, on one
    /// reader: what a budget check reads.
    pub async fn usage_window(
        &self,
        queries: Vec<SpendQuery>,
    ) -> Result<(Vec<Spent>, HashMap<String, LimitOverride>), StoreError> {
        self.read(move |db| {
            let spent = queries
                .iter()
                .map(|q| spent(db, q))
                .collect::<Result<_, _>>()?;
            Ok((spent, limits(db)?))
        })
        .await
    }

    /// The rows written after `after_id` (none asked for: `None`), and the rows of each of
    /// `windows` with an id up to the last of those (so they add up with the fresh ones without
    /// counting a row twice), and the limits admins set, on one reader: what a budget check
    /// reads.
    pub async fn usage_tally(
        &self,
        after_id: Option<i64>,
        windows: Vec<SpendQuery>,
    ) -> Result<UsageTally, StoreError> {
        self.read(move |db| {
            let Some(after_id) = after_id else {
                let upto = db.query_row(
                    "SELECT CAST(COALESCE(MAX(id), 0) AS BIGINT) FROM usage",
                    args![],
                    |r| r.get(0),
                )?;
                return Ok(UsageTally {
                    fresh: Vec::new(),
                    upto,
                    windows: window_rows(db, &windows, upto)?,
                    limits: limits(db)?,
                });
            };
            let fresh = db.query_map(
                "SELECT id, ts_ms, bot, platform, chat, trigger_id,
                    prompt_tokens + completion_tokens, CAST(COALESCE(cost_usd, 0) AS DOUBLE PRECISION)
                 FROM usage WHERE id > ?1 ORDER BY id",
                args![after_id],
                |r| {
                    Ok(Charged {
                        id: r.get(0)?,
                        ts_ms: r.get(1)?,
                        bot: r.get(2)?,
                        platform: r.get(3)?,
                        chat: r.get(4)?,
                        trigger_id: r.get(5)?,
                        tokens: r.get(6)?,
                        cost_usd: r.get(7)?,
                    })
                },
            )?;
            let upto = fresh.last().map_or(after_id, |c: &Charged| c.id);
            Ok(UsageTally {
                windows: window_rows(db, &windows, upto)?,
                fresh,
                upto,
                limits: limits(db)?,
            })
        })
        .await
    }

    /// Usage since `query.since_ms` matching its filters, summed per `group`, largest spend
    /// first.
    pub async fn usage_report(
        &self,
        query: SpendQuery,
        group: UsageGroup,
    ) -> Result<Vec<UsageRow>, StoreError> {
        self.read(move |db| {
            let (filter, params) = query.filter();
            let key = group.expr();
            let sql = format!(
                "SELECT {key},
                    CAST(SUM(prompt_tokens) AS BIGINT), CAST(SUM(completion_tokens) AS BIGINT),
                    CAST(SUM(cost_usd) AS DOUBLE PRECISION), CAST(MAX(estimated) AS BIGINT)
                 FROM usage WHERE {filter} GROUP BY {key}
                 ORDER BY SUM(prompt_tokens + completion_tokens) DESC, {key}"
            );
            db.query_map(&sql, &params, |r| {
                let (prompt, completion): (i64, i64) = (r.get(1)?, r.get(2)?);
                Ok(UsageRow {
                    key: r.get(0)?,
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    total_tokens: prompt + completion,
                    cost_usd: r.get(3)?,
                    estimated: r.get(4)?,
                })
            })
        })
        .await
    }

    /// Claims the notice `kind` of `budget` for `scope_key`: `true` (and remembered, durably)
    /// when none went out at or after `since_ms`, `false` when one did. One conditional upsert,
    /// so of instances racing for it exactly one wins.
    pub async fn budget_notice_claim(
        &self,
        budget: &str,
        scope_key: &str,
        kind: &str,
        now_ms: i64,
        since_ms: i64,
    ) -> Result<bool, StoreError> {
        let (budget, scope_key, kind) = (budget.to_owned(), scope_key.to_owned(), kind.to_owned());
        self.write(move |db| {
            let changed = db.execute(
                "INSERT INTO budget_notices (budget, scope_key, kind, noticed_ms)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (budget, scope_key, kind) DO UPDATE SET noticed_ms = excluded.noticed_ms
                 WHERE budget_notices.noticed_ms < ?5",
                args![&budget, &scope_key, &kind, now_ms, since_ms],
            )?;
            Ok(changed > 0)
        })
        .await
    }

    /// Sets a budget's limit over the config's (`/baton budget set`).
    pub async fn budget_limit_set(
        &self,
        name: &str,
        limit: LimitOverride,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let name = name.to_owned();
        self.write(move |db| {
            db.execute(
                "INSERT INTO budget_limits (name, tokens, cost_usd, set_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (name) DO UPDATE SET
                    tokens = COALESCE(excluded.tokens, budget_limits.tokens),
                    cost_usd = COALESCE(excluded.cost_usd, budget_limits.cost_usd),
                    set_ms = excluded.set_ms",
                args![&name, limit.tokens, limit.cost_usd, now_ms],
            )?;
            Ok(())
        })
        .await
    }
}

/// Each window's rows with an id up to `upto`, oldest first (time, tokens and cost).
fn window_rows(
    db: Db<'_>,
    windows: &[SpendQuery],
    upto: i64,
) -> Result<Vec<Vec<Charged>>, DbError> {
    windows
        .iter()
        .map(|query| {
            let (filter, mut params) = query.filter();
            params.push(Value::from(upto));
            let sql = format!(
                "SELECT ts_ms, prompt_tokens + completion_tokens,
                    CAST(COALESCE(cost_usd, 0) AS DOUBLE PRECISION)
                 FROM usage WHERE {filter} AND id <= ?{} ORDER BY ts_ms",
                params.len()
            );
            db.query_map(&sql, &params, |r| {
                Ok(Charged {
                    ts_ms: r.get(0)?,
                    tokens: r.get(1)?,
                    cost_usd: r.get(2)?,
                    id: 0,
                    bot: String::new(),
                    platform: String::new(),
                    chat: String::new(),
                    trigger_id: String::new(),
                })
            })
        })
        .collect()
}

/// The limits admins set, by budget name.
fn limits(db: Db<'_>) -> Result<HashMap<String, LimitOverride>, DbError> {
    let rows = db.query_map(
        "SELECT name, tokens, cost_usd FROM budget_limits",
        args![],
        |r| {
            Ok((
                r.get::<String>(0)?,
                LimitOverride {
                    tokens: r.get(1)?,
                    cost_usd: r.get(2)?,
                },
            ))
        },
    )?;
    Ok(rows.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    fn row(bot: &str, chat: &str, trigger: &str, ts_ms: i64, tokens: (i64, i64)) -> NewUsage {
        NewUsage {
            ts_ms,
            bot: bot.into(),
            platform: "slack".into(),
            chat: chat.into(),
            session: format!("bot:{bot}:slack:T1:{chat}"),
            run_id: format!("run_{ts_ms}"),
            trigger_id: trigger.into(),
            instance: "i1".into(),
            model: if bot == "caid" { "m" } else { "free" }.into(),
            prompt_tokens: tokens.0,
            completion_tokens: tokens.1,
            cost_usd: (bot == "caid").then_some(tokens.0 as f64 * 0.5),
            estimated: bot != "caid",
        }
    }

    #[tokio::test]
    async fn window_sums_follow_each_scope() {
        for db in testing::engines().await {
            let store = db.open().await;
            store
                .usage_record(vec![
                    row("caid", "C1", "t1", 100, (10, 5)),
                    row("snark", "C1", "t1", 200, (20, 1)),
                    row("caid", "C2", "t2", 300, (30, 2)),
                ])
                .await
                .unwrap();
            let q = |since_ms, bot: Option<&str>, chat: Option<&str>, trigger: Option<&str>| {
                SpendQuery {
                    since_ms,
                    bot: bot.map(Into::into),
                    platform: chat.map(|_| "slack".into()),
                    chat: chat.map(Into::into),
                    trigger_id: trigger.map(Into::into),
                }
            };
            let (spent, _) = store
                .usage_window(vec![
                    q(0, Some("caid"), None, None),
                    q(150, Some("caid"), None, None),
                    q(0, None, Some("C1"), None),
                    q(0, None, None, Some("t1")),
                    q(i64::MIN, None, None, None),
                    q(0, Some("nobody"), None, None),
                ])
                .await
                .unwrap();
            let tokens: Vec<i64> = spent.iter().map(|s| s.tokens).collect();
            assert_eq!(tokens, [47, 32, 36, 36, 68, 0]);
            assert_eq!(spent[0].cost_usd, 20.0);
            assert_eq!(spent[3].cost_usd, 5.0);
            assert_eq!((spent[1].oldest_ms, spent[5].oldest_ms), (Some(300), None));

            let by_bot = store
                .usage_report(q(0, None, None, None), UsageGroup::Bot)
                .await
                .unwrap();
            assert_eq!(by_bot.len(), 2);
            assert_eq!(
                (
                    by_bot[0].key.as_str(),
                    by_bot[0].prompt_tokens,
                    by_bot[0].total_tokens
                ),
                ("caid", 40, 47)
            );
            assert_eq!(by_bot[0].cost_usd, Some(20.0));
            assert!(!by_bot[0].estimated);
            assert_eq!((by_bot[1].cost_usd, by_bot[1].estimated), (None, true));
            let by_chat = store
                .usage_report(q(0, None, None, None), UsageGroup::Chat)
                .await
                .unwrap();
            assert_eq!(by_chat[0].key, "slack:C1");
        }
    }

    #[tokio::test]
    async fn retention_prunes_old_usage_rows_only() {
        const DAY: i64 = 86_400_000;
        let now = 100 * DAY;
        for db in testing::engines().await {
            let store = db.open().await;
            store
                .usage_record(vec![
                    row("caid", "C1", "t1", now - 40 * DAY, (1, 1)),
                    row("caid", "C1", "t2", now - DAY / 2, (2, 2)),
                ])
                .await
                .unwrap();
            let gone = store
                .prune(crate::store::PruneTable::Usage, now - 30 * DAY, now)
                .await
                .unwrap();
            assert_eq!(gone, 1);
            let all = SpendQuery {
                since_ms: i64::MIN,
                ..SpendQuery::default()
            };
            let (spent, _) = store.usage_window(vec![all]).await.unwrap();
            assert_eq!(spent[0].tokens, 4);
        }
    }

    #[tokio::test]
    async fn a_notice_goes_once_per_window_and_limits_overlay() {
        for db in testing::engines().await {
            let store = db.open().await;
            let claim = |now, since| store.budget_notice_claim("b", "C1", "stop", now, since);
            assert!(claim(1000, 0).await.unwrap());
            assert!(!claim(1500, 500).await.unwrap(), "same window");
            assert!(claim(2500, 1001).await.unwrap(), "the window moved past it");
            assert!(
                store
                    .budget_notice_claim("b", "C2", "stop", 2500, 1001)
                    .await
                    .unwrap()
            );

            let set = |tokens, cost_usd| LimitOverride { tokens, cost_usd };
            store
                .budget_limit_set("b", set(Some(5), None), 1)
                .await
                .unwrap();
            store
                .budget_limit_set("b", set(None, Some(2.5)), 2)
                .await
                .unwrap();
            let (_, limits) = store.usage_window(Vec::new()).await.unwrap();
            assert_eq!(limits["b"], set(Some(5), Some(2.5)));
        }
    }

    /// A run's usage rides on the start of its post or on a line of its own: one job each,
    /// ids in the order written, and a tally reading after the first sees the ones after it.
    #[tokio::test]
    async fn usage_rides_on_a_send_begin_or_an_entry() {
        for db in testing::engines().await {
            let store = db.open().await;
            let first = store
                .usage_record(vec![row("caid", "C1", "t1", 100, (1, 1))])
                .await
                .unwrap();
            let jobs = store.jobs();
            let (start, sent) = store
                .send_begin_charging("run#0", 200, vec![row("caid", "C1", "t1", 200, (2, 2))])
                .await
                .unwrap();
            assert_eq!(start, super::super::SendStart::Go);
            let line = super::super::NewEntry {
                session: crate::session::test_key("s"),
                ts_ms: 300,
                kind: super::super::EntryKind::Silent,
                speaker: "caid".into(),
                origin: super::super::Origin::Bot,
                text: String::new(),
                platform_message_id: None,
                run_id: Some("run".into()),
                idempotency_key: None,
                meta: serde_json::Value::Null,
            };
            let (_, said) = store
                .append_charging(line, vec![row("caid", "C1", "t1", 300, (3, 3))])
                .await
                .unwrap();
            assert_eq!(store.jobs() - jobs, 2, "one job each, usage included");
            assert!(
                first[0] < sent[0] && sent[0] < said[0],
                "{first:?} {sent:?} {said:?}"
            );
            let read = store.usage_tally(Some(first[0]), Vec::new()).await.unwrap();
            let fresh: Vec<(i64, i64)> = read.fresh.iter().map(|r| (r.id, r.tokens)).collect();
            assert_eq!(fresh, vec![(sent[0], 4), (said[0], 6)]);
        }
    }
}
