//! Expiring dedupe keys and begun posts by a walk over their keys, a window at a time.
//!
//! Every event claims two dedupe keys and every post begins a `sends` row, on the way from a
//! message to its reply. An index on their time, there only for the hourly purge, was one more
//! B-tree written per claim and per post begun (BENCHMARKS.md, issue 23). Without it the purge
//! walks each table in key order instead: a window of [`WINDOW`] rows per writer job, deleting
//! the expired ones among them, so live writes interleave with the walk as they do with
//! `baton prune`'s chunks, and no job reads more than a window whatever the table's size.
//! Claims and begins ignore an expired row anyway; the walk only bounds the tables.

use super::sql::{Db, DbError, Value};
use super::{Store, StoreError};

/// Rows read per writer job.
const WINDOW: usize = 5000;

/// A table whose rows expire by a time column it has no index on.
#[derive(Debug, Clone, Copy)]
pub(super) struct Expiring {
    table: &'static str,
    /// The primary key's columns, in its order.
    key: &'static [&'static str],
    /// When the row was written, in ms.
    time: &'static str,
}

/// Dedupe keys, by when they were claimed.
pub(super) const DEDUPE: Expiring = Expiring {
    table: "dedupe",
    key: &["scope", "key"],
    time: "seen_ms",
};

/// Posts begun, by when they began.
pub(super) const SENDS: Expiring = Expiring {
    table: "sends",
    key: &["key"],
    time: "begun_ms",
};

impl Expiring {
    /// `(a, b) > (?1, ?2)`-style placeholders for the key, numbered from `first`.
    fn params(self, first: usize) -> String {
        let numbered: Vec<String> = (first..first + self.key.len())
            .map(|n| format!("?{n}"))
            .collect();
        format!("({})", numbered.join(", "))
    }

    /// Deletes the rows written at or before `expired` among the [`WINDOW`] rows after `after`
    /// in key order. Returns how many went, and the key the next window starts after (`None`:
    /// this was the last).
    fn window(
        self,
        db: Db<'_>,
        after: &[String],
        expired: i64,
    ) -> Result<(usize, Option<Vec<String>>), DbError> {
        let (table, time) = (self.table, self.time);
        let key = format!("({})", self.key.join(", "));
        let from = self.params(1);
        let mut args: Vec<Value<'_>> = after.iter().map(Value::from).collect();
        // The window's last key, found by the key's own index (a constant offset: a bound
        // `LIMIT` re-plans SQLite's statement on every call).
        let last: Option<Vec<String>> = db
            .query_take(
                &format!(
                    "SELECT {cols} FROM {table} WHERE {key} > {from} ORDER BY {cols} \
                     LIMIT 1 OFFSET {offset}",
                    cols = self.key.join(", "),
                    offset = WINDOW - 1,
                ),
                &args,
                1,
                |row| (0..self.key.len()).map(|i| row.get(i)).collect(),
            )?
            .pop();
        let deleted = match &last {
            Some(last) => {
                let to = self.params(1 + self.key.len());
                let at = 1 + 2 * self.key.len();
                args.extend(last.iter().map(Value::from));
                args.push(Value::from(expired));
                db.execute(
                    &format!(
                        "DELETE FROM {table} WHERE {key} > {from} AND {key} <= {to} \
                         AND {time} <= ?{at}"
                    ),
                    &args,
                )?
            }
            None => {
                let at = 1 + self.key.len();
                args.push(Value::from(expired));
                db.execute(
                    &format!("DELETE FROM {table} WHERE {key} > {from} AND {time} <= ?{at}"),
                    &args,
                )?
            }
        };
        Ok((deleted, last))
    }
}

impl Store {
    /// Deletes every row of `table` written at or before `expired`, a window per writer job;
    /// returns how many went.
    pub(super) async fn sweep(&self, table: Expiring, expired: i64) -> Result<usize, StoreError> {
        // Before every key: the key columns are never empty text.
        let mut after = vec![String::new(); table.key.len()];
        let mut total = 0;
        loop {
            let from = after.clone();
            let (deleted, next) = self
                .write(move |db| table.window(db, &from, expired))
                .await?;
            total += deleted;
            match next {
                Some(next) => after = next,
                None => return Ok(total),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    /// Over several windows, only the expired rows go, wherever they sit in key order, and the
    /// walk takes one job per window.
    #[tokio::test]
    async fn a_walk_over_several_windows_deletes_exactly_the_expired_rows() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let rows = 2 * WINDOW + 7;
            let scopes = ["slack:a", "discord:b"];
            store
                .write(move |db| {
                    for n in 0..rows {
                        // Every third row is old; the scopes interleave in key order.
                        let seen: i64 = if n % 3 == 0 { 5 } else { 50 };
                        let scope = scopes[n % 2];
                        db.execute(
                            "INSERT INTO dedupe (scope, key, seen_ms) VALUES (?1, ?2, ?3)",
                            &[
                                Value::from(scope),
                                Value::from(format!("msg:{n:05}").as_str()),
                                Value::from(seen),
                            ],
                        )?;
                    }
                    Ok(())
                })
                .await
                .unwrap();
            let jobs = store.jobs();
            let old = rows.div_ceil(3);
            assert_eq!(store.sweep(DEDUPE, 10).await.unwrap(), old, "{engine}");
            assert_eq!(store.jobs() - jobs, 3, "{engine}: a job per window");
            let left: i64 = store
                .read(|db| db.query_row("SELECT count(*) FROM dedupe", &[], |row| row.get(0)))
                .await
                .unwrap();
            assert_eq!(left as usize, rows - old, "{engine}");
            assert_eq!(store.sweep(DEDUPE, 10).await.unwrap(), 0, "{engine}");
        }
    }
}
