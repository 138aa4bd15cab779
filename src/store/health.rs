//! Can the store still commit? Asked by `/readyz`.
//!
//! An empty transaction commits even on a full disk or a read-only file, because it writes no
//! page. So the probe rewrites one row: it fails exactly when a user's message would.

use super::sql::args;
use super::{Store, StoreError};

impl Store {
    /// Commit one small write; an error says why the store cannot take writes now.
    pub async fn probe(&self, now_ms: i64) -> Result<(), StoreError> {
        self.write(move |db| {
            db.execute(
                "INSERT INTO health (id, probed_ms) VALUES (1, ?1)
                 ON CONFLICT (id) DO UPDATE SET probed_ms = excluded.probed_ms",
                args![now_ms],
            )
            .map(drop)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use crate::store::testing;

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
}
