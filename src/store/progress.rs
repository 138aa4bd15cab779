//! Progress lines: what a bot working on a delivery reported with `progress(message, step?, of?)`
//! while it worked, kept on the delivery so the sender (`session_status`), `/api/deliveries`
//! and the dashboard can show how far a long task has got.

use std::collections::HashMap;

use rusqlite::Connection;
use serde::Serialize;

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
        self.sqlite_write(move |conn| {
            let added = conn
                .prepare_cached(
                    "INSERT INTO delivery_progress (run_id, ts_ms, message, step, of)
                     SELECT ?1, ?2, ?3, ?4, ?5
                     WHERE EXISTS (SELECT 1 FROM deliveries WHERE run_id = ?1 AND state = 'running')",
                )?
                .execute(rusqlite::params![
                    run_id,
                    line.ts_ms,
                    line.message,
                    line.step,
                    line.of
                ])?;
            Ok(added == 1)
        })
        .await
    }
}

/// Every progress line of the deliveries `run_ids`, oldest first, by run id.
pub(super) fn progress_of(
    conn: &Connection,
    run_ids: &[&str],
) -> rusqlite::Result<HashMap<String, Vec<ProgressLine>>> {
    let mut lines: HashMap<String, Vec<ProgressLine>> = HashMap::new();
    let mut query = conn.prepare_cached(
        "SELECT ts_ms, message, step, of FROM delivery_progress WHERE run_id = ?1 ORDER BY id",
    )?;
    for run_id in run_ids {
        let found: Vec<ProgressLine> = query
            .query_map([run_id], |row| {
                Ok(ProgressLine {
                    ts_ms: row.get(0)?,
                    message: row.get(1)?,
                    step: row.get(2)?,
                    of: row.get(3)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        if !found.is_empty() {
            lines.insert((*run_id).to_owned(), found);
        }
    }
    Ok(lines)
}
