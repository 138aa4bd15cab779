//! A sender's wait for its delivery, on record: which instance waits (`waiter`), the sender
//! giving up (the outcome is then pushed to its session), and a wait taken over from an
//! instance that is gone. Each is one conditional update, so when a settle and a wait's end
//! race, exactly one side is responsible for telling the sender, decided in the database.

use super::deliveries::{Delivery, SELECT, by_run, from_row, settled_with_lineage};
use super::leases::{LIVE_IDS, sql};
use super::sql::args;
use super::{Store, StoreError};

impl Store {
    /// A sender stops waiting for `run_id`: if the run is still open, its outcome is now to be
    /// pushed to the sender's session (`Ok(None)`); if it settled first, the settled row with
    /// its lineage, which the sender takes as its answer. See [`Store::delivery_settle`].
    pub async fn delivery_give_up(&self, run_id: &str) -> Result<Option<Delivery>, StoreError> {
        let run_id = run_id.to_owned();
        self.write(move |db| {
            let moved = db.execute(
                "UPDATE deliveries SET notify = 'pending', waiter = NULL
                 WHERE run_id = ?1 AND state IN ('queued', 'running')",
                args![&run_id],
            )?;
            if moved == 1 {
                return Ok(None);
            }
            by_run(db, &run_id)?
                .map(|d| settled_with_lineage(db, d))
                .transpose()
        })
        .await
    }

    /// The sender waiting on instance `waiter` got `run_id`'s outcome in its tool call: nobody
    /// waits any more. Returns once the job has its place in the writer's queue, so it is
    /// committed no later than anything the sender's turn writes after it.
    pub async fn delivery_waited(&self, run_id: &str, waiter: &str) -> Result<(), StoreError> {
        let (run_id, waiter) = (run_id.to_owned(), waiter.to_owned());
        let queued = self
            .queue(move |db| {
                db.execute(
                    "UPDATE deliveries SET waiter = NULL WHERE run_id = ?1 AND waiter = ?2",
                    args![&run_id, &waiter],
                )?;
                Ok(())
            })
            .await?;
        drop(queued);
        Ok(())
    }

    /// Take over the wait on `run_id` from instance `from` (gone), for instance `to`: the
    /// sender's turn run again there, or (`to` none) the push of its outcome to the sender's
    /// session, which the row then says is pending. One conditional update: of an instance
    /// pushing it and the sender's turn run again, exactly one gets the row as it reads after
    /// (settled or not: a run settling first told nobody), the others none.
    pub async fn delivery_take_wait(
        &self,
        run_id: &str,
        from: &str,
        to: Option<&str>,
    ) -> Result<Option<Delivery>, StoreError> {
        let (run_id, from, to) = (run_id.to_owned(), from.to_owned(), to.map(str::to_owned));
        self.write(move |db| {
            let moved = db.execute(
                "UPDATE deliveries
                 SET waiter = CAST(?3 AS TEXT),
                     notify = CASE WHEN CAST(?3 AS TEXT) IS NULL THEN 'pending' ELSE notify END
                 WHERE run_id = ?1 AND waiter = ?2 AND notify = 'none'",
                args![&run_id, &from, &to],
            )?;
            if moved == 0 {
                return Ok(None);
            }
            by_run(db, &run_id)?
                .map(|d| settled_with_lineage(db, d))
                .transpose()
        })
        .await
    }

    /// Deliveries whose sender waits on an instance that is gone (not renewed within
    /// `lease_ms`), or on `me` when `mine` (a restart under the same id). Oldest first.
    pub async fn deliveries_waiter_gone(
        &self,
        me: &str,
        mine: bool,
        lease_ms: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        let me = me.to_owned();
        self.read(move |db| {
            let live = sql(db, LIVE_IDS);
            db.query_map(
                &format!(
                    "{SELECT} WHERE waiter IS NOT NULL
                       AND ((waiter = ?1 AND ?2) OR (waiter <> ?1 AND waiter NOT IN ({live})))
                     ORDER BY created_ms, run_id"
                ),
                args![&me, mine, lease_ms],
                from_row,
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use crate::store::deliveries::tests::send;
    use crate::store::{DeliveryChange, DeliveryState, NewDelivery, Notify, SendMode, testing};

    /// A run finishing and its waiter giving up, on two instances at once: exactly one of them
    /// is responsible for the outcome, decided in the database. Either the waiter got the
    /// settled row, or the settle saw `pending` and pushes it; never both, never neither.
    #[tokio::test]
    async fn settle_and_give_up_race_and_exactly_one_is_responsible() {
        for db in testing::engines().await {
            let (a, b) = (db.open().await, db.open().await);
            for round in 0..20 {
                let run = format!("r{round}");
                let mut new = send(&run, None, &format!("text {round}"), round);
                new.mode = SendMode::Wait;
                a.delivery_begin(new, 0, Some("a")).await.unwrap();
                let done = DeliveryChange {
                    reply: Some("ok".into()),
                    ..DeliveryChange::to(&run, DeliveryState::Delivered, 9)
                };
                let (settled, gave_up) =
                    tokio::join!(a.delivery_settle(done), b.delivery_give_up(&run));
                let push = settled.unwrap() == Some(Notify::Pending);
                let got = gave_up.unwrap().is_some();
                assert!(
                    push != got,
                    "{}: round {round}: push {push}, got {got}",
                    db.engine()
                );
            }
        }
    }

    /// A sender waiting on an instance that died: its rows are listed (not those whose sender
    /// got the outcome, nor those waited on by a live instance). The run settling, an instance
    /// taking the wait to push it and the sender's turn run again taking it over race: exactly
    /// one of the two takes it, and the outcome reaches the session once: the settle pushes it
    /// (it came after a push's take), the pusher pushes it (it came after the settle), or the
    /// turn run again gets it.
    #[tokio::test]
    async fn a_dead_senders_wait_is_taken_once_and_its_outcome_reaches_the_session_once() {
        for db in testing::engines().await {
            let engine = db.engine();
            let (a, b) = (db.open().await, db.open().await);
            a.instance_register("live", "0.1", 60_000).await.unwrap();
            let waited_on = |run: &str, waiter: &str, at: i64| NewDelivery {
                waiter: Some(waiter.into()),
                ..send(run, None, &format!("text {run}"), at)
            };
            a.delivery_begin(waited_on("got", "dead", 1), 0, Some("live"))
                .await
                .unwrap();
            a.delivery_waited("got", "dead").await.unwrap();
            a.delivery_begin(waited_on("kept", "live", 2), 0, Some("live"))
                .await
                .unwrap();
            a.delivery_begin(waited_on("left", "dead", 3), 0, Some("live"))
                .await
                .unwrap();
            a.flush().await.unwrap();
            let gone = b
                .deliveries_waiter_gone("live", false, 30_000)
                .await
                .unwrap();
            let runs: Vec<&str> = gone.iter().map(|d| d.run_id.as_str()).collect();
            assert_eq!(runs, ["left"], "{engine}");

            for round in 0..20 {
                let run = format!("r{round}");
                a.delivery_begin(waited_on(&run, "dead", 10 + round), 0, Some("live"))
                    .await
                    .unwrap();
                let done = DeliveryChange {
                    reply: Some("ok".into()),
                    ..DeliveryChange::to(&run, DeliveryState::Delivered, 9)
                };
                let (settled, pushing, rerun) = tokio::join!(
                    a.delivery_settle(done),
                    b.delivery_take_wait(&run, "dead", None),
                    a.delivery_take_wait(&run, "dead", Some("live")),
                );
                let (pushing, rerun) = (pushing.unwrap(), rerun.unwrap());
                assert!(
                    pushing.is_some() != rerun.is_some(),
                    "{engine}: round {round}: taken by both or neither"
                );
                let by_settle = settled.unwrap() == Some(Notify::Pending);
                let by_pusher = pushing.as_ref().is_some_and(|d| d.state.is_settled());
                let by_rerun = rerun.is_some();
                let times = [by_settle, by_pusher, by_rerun]
                    .iter()
                    .filter(|b| **b)
                    .count();
                assert_eq!(
                    times, 1,
                    "{engine}: round {round}: {by_settle} {by_pusher} {by_rerun}"
                );
            }
        }
    }
}
