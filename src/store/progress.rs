//! Progress lines: what a bot working on a delivery reported with `progress(message, step?, of?)`
//! while it worked, kept on the delivery so the sender (`session_status`), `/api/deliveries`
//! and the dashboard can show how far a long task has got.

use std::collections::HashMap;

use serde::Serialize;

use super::sql::{Db, DbError, args};
use super::{Store, StoreError};

/// One progress line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgressLine {
    /// When, milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// What the bot said.
    pub message: String,
    /// Which step it is on, if it said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    /// Of how many steps, if it said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of: Option<u32>,
}

impl Store {
    /// Record `line` on the delivery `run_id` if it is running; `false` (nothing kept) if it is
    /// not: a finished delivery's record does not change.
    pub async fn progress_add(&self, run_id: &str, line: ProgressLine) -> Result<bool, StoreError> {
        let run_id = run_id.to_owned();
        self.write(move |db| {
            // One statement, so the delivery cannot finish between the look and the insert,
            // even on another instance sharing the database.
            let added = db.execute(
                "INSERT INTO delivery_progress (run_id, ts_ms, message, step, of)
                 SELECT ?1, ?2, ?3, ?4, ?5
                 WHERE EXISTS (SELECT 1 FROM deliveries WHERE run_id = ?1 AND state = 'running')",
                args![&run_id, line.ts_ms, &line.message, line.step, line.of],
            )?;
            Ok(added == 1)
        })
        .await
    }
}

/// Every progress line of the deliveries `run_ids`, oldest first, by run id.
pub(super) fn progress_of<'c>(
    db: impl Into<Db<'c>>,
    run_ids: &[&str],
) -> Result<HashMap<String, Vec<ProgressLine>>, DbError> {
    let db = db.into();
    let mut lines: HashMap<String, Vec<ProgressLine>> = HashMap::new();
    for run_id in run_ids {
        let found: Vec<ProgressLine> = db.query_map(
            "SELECT ts_ms, message, step, of FROM delivery_progress WHERE run_id = ?1 ORDER BY id",
            args![*run_id],
            |row| {
                Ok(ProgressLine {
                    ts_ms: row.get(0)?,
                    message: row.get(1)?,
                    step: row.get(2)?,
                    of: row.get(3)?,
                })
            },
        )?;
        if !found.is_empty() {
            lines.insert((*run_id).to_owned(), found);
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    fn line(ts_ms: i64, message: &str, step: Option<u32>) -> ProgressLine {
        ProgressLine {
            ts_ms,
            message: message.into(),
            step,
            of: step.map(|_| 3),
        }
    }

    #[tokio::test]
    async fn lines_are_kept_on_a_running_delivery_only_in_order() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            store
                .write(|db| {
                    db.execute_batch(
                        "INSERT INTO deliveries (run_id, sender, sender_session, target,
                             target_session, message, depth, mode, state, notify, created_ms)
                         VALUES
                         ('run', 'a', 's', 'b', 't', 'm', 1, 'wait', 'running', 'none', 1),
                         ('done', 'a', 's', 'b', 't', 'm', 1, 'wait', 'delivered', 'none', 1)",
                    )
                })
                .await
                .unwrap();
            let add = |run: &'static str, l: ProgressLine| store.progress_add(run, l);
            assert!(
                add("run", line(2, "reading", Some(1))).await.unwrap(),
                "{engine}"
            );
            assert!(
                add("run", line(3, "writing", None)).await.unwrap(),
                "{engine}"
            );
            assert!(
                !add("done", line(4, "late", None)).await.unwrap(),
                "{engine}"
            );
            assert!(
                !add("nobody", line(5, "lost", None)).await.unwrap(),
                "{engine}"
            );
            let lines = store
                .read(|db| progress_of(db, &["run", "done", "nobody"]))
                .await
                .unwrap();
            assert_eq!(
                lines,
                HashMap::from([(
                    "run".to_owned(),
                    vec![line(2, "reading", Some(1)), line(3, "writing", None)]
                )]),
                "{engine}"
            );
        }
    }
}
