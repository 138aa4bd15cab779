//! Which instance a chain's turn runs on (`chains.runner`): the one that last moved it or
//! posted in it. A starting instance, and the survivors when an instance stops renewing, pick
//! up only the open chains whose runner is gone, so a chain a live instance is running is never
//! given its turn a second time. Picking one up is a claim (one conditional update of the
//! runner), so exactly one instance does.

use crate::store::leases::{LIVE_IDS, sql};
use crate::store::sql::{Db, DbError, args};
use crate::store::{Store, StoreError};

/// An open chain nobody live is running, and the runner it was left with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftChain {
    /// The chain's id.
    pub id: String,
    /// The instance it was left with; `None` for a chain from before runners were recorded.
    pub runner: Option<String>,
}

/// Note that the turn of `chain` runs on instance `me` now (inside the job that moved it).
pub(super) fn ran_here(db: Db<'_>, chain: &str, me: &str) -> Result<(), DbError> {
    db.execute(
        "UPDATE chains SET runner = ?2 WHERE id = ?1",
        args![chain, me],
    )
    .map(drop)
}

impl Store {
    /// The open chains nobody live runs: runner none, this instance (only when `mine`: a
    /// restart under the same id), or an instance not renewed within `lease_ms`. Oldest first.
    pub async fn chains_left(
        &self,
        mine: bool,
        lease_ms: i64,
    ) -> Result<Vec<LeftChain>, StoreError> {
        let me = self.instance();
        self.read(move |db| {
            let live = sql(db, LIVE_IDS);
            db.query_map(
                &format!(
                    "SELECT id, runner FROM chains
                     WHERE state = 'open'
                       AND (runner IS NULL OR (runner = ?1 AND ?2)
                            OR (runner <> ?1 AND runner NOT IN ({live})))
                     ORDER BY created_ms, id"
                ),
                args![&*me, mine, lease_ms],
                |row| {
                    Ok(LeftChain {
                        id: row.get(0)?,
                        runner: row.get(1)?,
                    })
                },
            )
        })
        .await
    }

    /// Take `left` over for this instance, if it is still open and still left with the same
    /// runner; whether this instance got it.
    pub async fn chain_claim(&self, left: &LeftChain) -> Result<bool, StoreError> {
        let me = self.instance();
        let (id, from) = (left.id.clone(), left.runner.clone());
        self.write(move |db| {
            let moved = db.execute(
                "UPDATE chains SET runner = ?3
                 WHERE id = ?1 AND state = 'open'
                   AND coalesce(runner, '') = coalesce(CAST(?2 AS TEXT), '')",
                args![&id, &from, &*me],
            )?;
            Ok(moved == 1)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::super::turns::tests::new_chain;
    use super::*;
    use crate::store::testing::engines;

    const LEASE_MS: i64 = 60_000;

    #[tokio::test]
    async fn only_a_gone_instances_chains_are_left_and_each_is_claimed_once() {
        for db in engines().await {
            let store = db.open().await;
            let engine = db.engine();
            store.instance_register("a", "test", 0).await.unwrap();
            let chain = store
                .create_chain(new_chain(Some("snark"), &["caid"]), 1)
                .await
                .unwrap();
            let left = LeftChain {
                id: chain.id.clone(),
                runner: Some("a".into()),
            };
            // a runs it: nothing left for a live a, its own restart finds it.
            assert_eq!(
                store.chains_left(false, LEASE_MS).await.unwrap(),
                [],
                "{engine}"
            );
            assert_eq!(
                store.chains_left(true, LEASE_MS).await.unwrap(),
                std::slice::from_ref(&left),
                "{engine}"
            );
            // b starts while a renews: a's chain is not b's to take.
            store.instance_register("b", "test", 0).await.unwrap();
            assert_eq!(
                store.chains_left(true, LEASE_MS).await.unwrap(),
                [],
                "{engine}"
            );
            // a stops renewing (a lease of 0: nobody renewed within it): b takes it, once.
            assert_eq!(
                store.chains_left(false, 0).await.unwrap(),
                std::slice::from_ref(&left),
                "{engine}"
            );
            assert!(store.chain_claim(&left).await.unwrap(), "{engine}");
            assert!(
                !store.chain_claim(&left).await.unwrap(),
                "{engine}: taken already"
            );
            assert_eq!(store.chains_left(false, 0).await.unwrap(), [], "{engine}");
        }
    }
}
