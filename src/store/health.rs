//! Can the store still commit? Asked by `/readyz`.
//!
//! An empty transaction commits even on a full disk or a read-only file, because it writes no
//! page. So the probe rewrites one row: it fails exactly when a user's message would.

use super::{Store, StoreError};

impl Store {
    /// Commit one small write; an error says why the store cannot take writes now.
    pub async fn probe(&self, now_ms: i64) -> Result<(), StoreError> {
        self.sqlite_write(move |conn| {
            conn.prepare_cached(
                "INSERT INTO health (id, probed_ms) VALUES (1, ?1)
                 ON CONFLICT (id) DO UPDATE SET probed_ms = excluded.probed_ms",
            )?
            .execute([now_ms])
            .map(drop)
        })
        .await
    }
}
