//! The writer's connection to a PostgreSQL server, and what happens when an instance freezes
//! inside a batch.
//!
//! A batch holds the locks of every row it wrote until it commits. An instance paused in the
//! middle of one (SIGSTOP, a suspended VM, a debugger) would hold them for as long as it sleeps,
//! and every other instance's writer that touches those rows (taking over the paused one's
//! accounts and left-over work, which is exactly what they do next) would wait behind it, their
//! lease renewals queued behind that, until their leases ran out too. So the writer's session
//! tells the server to end a transaction that waits longer than [`IDLE_IN_BATCH`] for its next
//! statement: the server rolls the batch back, which frees the rows, and closes the connection.
//! A healthy writer never waits that long inside a batch: it runs a batch's statements back to
//! back, with only its own jobs' code between them.
//!
//! The frozen instance, once awake, finds its connection closed before its batch committed: the
//! writer connects again and runs the batch once more on the new connection (`writer.rs`), on
//! whatever the other instances made of the rows meanwhile, as after a collision. Had it been
//! killed instead, the rolled-back batch is what a `kill -9` leaves, which every other instance
//! already knows how to pick up after.

use super::StoreError;
use super::sql::{Db, PgConn, PgUrl};

/// How long the server lets the writer's open transaction wait for its next statement. Well
/// under the shortest lease (3 s, renewed every second, given up at four fifths): another
/// instance blocked by a frozen one gets its rows back before its own lease is at risk.
const IDLE_IN_BATCH: &str = "1s";

/// Connects the writer to `url`, with the idle bound set for the session. Blocking: call it
/// off the async workers.
pub(crate) fn connect(url: &PgUrl) -> Result<PgConn, StoreError> {
    let conn = PgConn::connect(url)?;
    Db::Postgres(&conn)
        .execute_batch(&format!(
            "SET idle_in_transaction_session_timeout = '{IDLE_IN_BATCH}'"
        ))
        .map_err(StoreError::from)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use crate::store::Store;
    use crate::store::sql::args;
    use crate::store::testing::TestDb;

    /// Longer than [`super::IDLE_IN_BATCH`] by far: what waited this long waited for the frozen
    /// writer to wake, not for the server.
    const PATIENCE: Duration = Duration::from_secs(15);

    /// Instance a's writer stops in the middle of a batch that wrote a row, as a paused process
    /// would; instance b's writer writes the same row soon after, and must not wait for a to
    /// wake. Woken, a's batch (rolled back by the server) runs once more on a new connection
    /// and commits, once; so does its next one.
    #[tokio::test]
    async fn a_writer_frozen_inside_a_batch_holds_up_no_other_and_connects_again_when_it_wakes() {
        let db = TestDb::postgres().await;
        let (a, b): (Store, Store) = (db.open().await, db.open().await);
        a.write(|db| {
            db.execute_batch(
                "CREATE TABLE frozen (id BIGINT PRIMARY KEY, hits BIGINT NOT NULL);
                 INSERT INTO frozen VALUES (1, 0);",
            )
        })
        .await
        .unwrap();

        let (wrote, wrote_rx) = mpsc::channel();
        let (wake, wake_rx) = mpsc::channel::<()>();
        let wake_rx = std::sync::Mutex::new(wake_rx);
        let frozen = tokio::spawn({
            let a = a.clone();
            async move {
                let mut first_run = true;
                a.write(move |db| {
                    db.execute("UPDATE frozen SET hits = hits + 1 WHERE id = 1", &[])?;
                    let _ = wrote.send(());
                    if std::mem::take(&mut first_run) {
                        // Frozen: the batch is open, its row locked, and nothing reaches the
                        // server.
                        let _ = wake_rx.lock().unwrap().recv_timeout(PATIENCE * 2);
                    }
                    db.execute("UPDATE frozen SET hits = hits + 1 WHERE id = 1", &[])?;
                    Ok(())
                })
                .await
            }
        });
        tokio::task::spawn_blocking(move || wrote_rx.recv_timeout(PATIENCE))
            .await
            .unwrap()
            .expect("a's batch wrote its row");

        let b_wrote = tokio::time::timeout(
            PATIENCE,
            b.write(|db| db.execute("UPDATE frozen SET hits = hits + 10 WHERE id = 1", &[])),
        )
        .await
        .expect("b's writer got the row while a was still frozen: the server ended a's batch");
        assert_eq!(b_wrote.unwrap(), 1);

        wake.send(()).unwrap();
        let woke = frozen.await.unwrap();
        assert!(
            woke.is_ok(),
            "a's frozen batch, rolled back, ran again on a new connection: {woke:?}"
        );
        a.write(|db| {
            db.execute(
                "UPDATE frozen SET hits = hits + 100 WHERE id = ?1",
                args![1_i64],
            )
        })
        .await
        .expect("a's writer connected again after it woke");
        let hits: i64 = b
            .read(|db| db.query_row("SELECT hits FROM frozen", &[], |r| r.get(0)))
            .await
            .unwrap();
        assert_eq!(
            hits, 112,
            "b's write, a's frozen batch once (run again after waking), and a's next"
        );
    }
}
