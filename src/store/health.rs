//! Can the store still commit? Asked by `/readyz`.
//!
//! An empty transaction commits even on a full disk or a read-only file, because it writes no
//! page. So the probe rewrites one row. That still fits in a database that cannot grow, where
//! a user's message would not: so a batch the writer lost lately fails the probe too
//! (`write_health.rs`).

use super::sql::args;
use super::{Store, StoreError};

impl Store {
    /// Commit one small write; an error says why the store cannot take writes now (this
    /// write's failure, or the latest lost batch's within [`write_health::HOLD`]).
    ///
    /// [`write_health::HOLD`]: super::write_health::HOLD
    pub async fn probe(&self, now_ms: i64) -> Result<(), StoreError> {
        self.write(move |db| {
            db.execute(
                "INSERT INTO health (id, probed_ms) VALUES (1, ?1)
                 ON CONFLICT (id) DO UPDATE SET probed_ms = excluded.probed_ms",
                args![now_ms],
            )
            .map(drop)
        })
        .await?;
        match self.inner.writer.failing() {
            Some(failing) => Err(failing),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::store::StoreError;
    use crate::store::testing::{self, TestDb};

    #[tokio::test]
    async fn the_probe_rewrites_its_one_row() {
        for db in testing::engines().await {
            let store = db.open().await;
            store.probe(1).await.unwrap();
            store.probe(2).await.unwrap();
            let rows: Vec<(i64, i64)> = store
                .read(|db| {
                    db.query_map("SELECT id, probed_ms FROM health", &[], |row| {
                        Ok((row.get(0)?, row.get(1)?))
                    })
                })
                .await
                .unwrap();
            assert_eq!(rows, [(1, 2)]);
        }
    }

    /// A batch lost (here: its transaction ended under it, as SQLite ends one on an I/O error)
    /// fails the probe after it, though the probe's own one-row write commits.
    #[tokio::test]
    async fn a_batch_lost_lately_fails_the_probe_though_its_own_write_fits() {
        let store = TestDb::sqlite().open().await;
        store.probe(1).await.unwrap();
        let lost = store.write(|db| db.execute_batch("ROLLBACK")).await;
        assert!(lost.is_err(), "{lost:?}");
        let probe = store.probe(2).await;
        assert!(
            matches!(&probe, Err(StoreError::Commit(why)) if why.contains("rolled back")),
            "{probe:?}"
        );
    }
}
