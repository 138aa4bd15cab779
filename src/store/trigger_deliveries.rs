//! The deliveries one trigger set off: every `sessions_send` its first turn began, and those
//! their targets' turns began in turn, all charged to it (`trigger_id`, indexed). `why` reads
//! them whole to tell what became of a message; a canceled A2A task stops the ones still open
//! (`relay/cancel.rs`).

use super::deliveries::{Delivery, SELECT, from_row, with_lineage};
use super::sql::{Db, DbError, args};
use super::{Store, StoreError};

/// The deliveries charged to trigger `run_id`, oldest first, with their lineage once settled.
pub(super) fn triggered_by(db: Db<'_>, run_id: &str) -> Result<Vec<Delivery>, DbError> {
    let mut found = db.query_map(
        &format!("{SELECT} WHERE trigger_id = ?1 ORDER BY created_ms, run_id"),
        args![run_id],
        from_row,
    )?;
    with_lineage(db, &mut found)?;
    Ok(found)
}

impl Store {
    /// The deliveries charged to `trigger` still queued or running, oldest first.
    pub async fn deliveries_open_in_trigger(
        &self,
        trigger: &str,
    ) -> Result<Vec<Delivery>, StoreError> {
        let trigger = trigger.to_owned();
        self.read(move |db| {
            db.query_map(
                &format!(
                    "{SELECT} WHERE trigger_id = ?1 AND state IN ('queued', 'running')
                     ORDER BY created_ms, run_id"
                ),
                args![&trigger],
                from_row,
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use crate::store::deliveries::tests::send;
    use crate::store::{DeliveryChange, DeliveryState, NewDelivery, testing};

    /// A send charged to trigger `t1` (or to `trigger`).
    fn charged(run: &str, trigger: &str, at: i64) -> NewDelivery {
        NewDelivery {
            trigger: Some(trigger.into()),
            ..send(run, None, run, at)
        }
    }

    #[tokio::test]
    async fn a_triggers_open_deliveries_are_found_and_no_other_triggers_or_settled_ones() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            for new in [
                charged("r1", "t1", 1),
                charged("r2", "t1", 2),
                charged("r3", "t1", 3),
                charged("x1", "t2", 4),
            ] {
                store.delivery_begin(new, 0, None).await.unwrap();
            }
            let running = DeliveryChange::to("r3", DeliveryState::Running, 5);
            store.delivery_settle(running).await.unwrap();
            let done = DeliveryChange::to("r1", DeliveryState::Delivered, 6);
            store.delivery_settle(done).await.unwrap();
            let open: Vec<String> = store
                .deliveries_open_in_trigger("t1")
                .await
                .unwrap()
                .into_iter()
                .map(|d| d.run_id)
                .collect();
            assert_eq!(open, ["r2", "r3"], "{engine}");
            assert!(
                store
                    .deliveries_open_in_trigger("t9")
                    .await
                    .unwrap()
                    .is_empty(),
                "{engine}"
            );
        }
    }
}
