//! Running a batch again when it collided with another instance's writer.
//!
//! On PostgreSQL every instance has a writer, and their batches run side by side. Two batches
//! that lock the same rows in opposite orders (two instances claiming the same dedupe keys, one
//! chain moved from both ends) wait for each other until the server breaks the cycle: it fails
//! one of them with `40P01` (deadlock detected), or with `40001` (serialization failure) where
//! a transaction could not be ordered. Nothing was wrong with the work, and the caller must not
//! see the error: the losing writer rolls its batch back, which frees the rows the other one is
//! waiting for, waits a moment and runs the whole batch again (its jobs are `FnMut` for that).
//! The wait is short and jittered so two writers that collided do not collide again in step;
//! the number of attempts is bounded, so a batch that keeps colliding fails with the server's
//! error instead of spinning. SQLite has one writer per database: it never gets here.

use std::time::Duration;

use rand::Rng;

/// How many times a batch is run in all before its callers get the error.
const ATTEMPTS: u32 = 5;

/// The wait before the second attempt; it doubles for each one after.
const FIRST_WAIT: Duration = Duration::from_millis(5);

/// The attempts at one batch.
pub(crate) struct Attempts {
    made: u32,
}

impl Attempts {
    /// A batch about to be run for the first time.
    pub(crate) fn new() -> Attempts {
        Attempts { made: 1 }
    }

    /// After a collision: whether to run the batch (of `jobs` jobs) again. If so, logs it and
    /// waits first (on the writer thread, which has nothing else to do meanwhile).
    pub(crate) fn again(&mut self, jobs: usize) -> bool {
        if self.made >= ATTEMPTS {
            tracing::error!(
                attempts = self.made,
                jobs,
                "a store batch kept colliding with another instance's writes; giving up on it"
            );
            return false;
        }
        let wait = jittered(FIRST_WAIT * 2u32.pow(self.made - 1));
        tracing::warn!(
            attempt = self.made,
            jobs,
            wait_ms = wait.as_millis(),
            "a store batch collided with another instance's writes (deadlock or serialization \
             failure); running it again"
        );
        self.made += 1;
        std::thread::sleep(wait);
        true
    }
}

/// `wait` scaled by a random factor between 0.5 and 1.5.
fn jittered(wait: Duration) -> Duration {
    wait.mul_f64(rand::rng().random_range(0.5..1.5))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::mpsc;

    use super::*;
    use crate::store::Store;
    use crate::store::sql::args;
    use crate::store::testing::TestDb;

    #[test]
    fn waits_grow_and_stay_jittered() {
        for _ in 0..100 {
            let wait = jittered(Duration::from_millis(40));
            assert!(
                (Duration::from_millis(20)..Duration::from_millis(60)).contains(&wait),
                "{wait:?}"
            );
        }
        let mut attempts = Attempts::new();
        let runs = (0..10).take_while(|_| attempts.again(1)).count();
        assert_eq!(
            runs + 1,
            ATTEMPTS as usize,
            "bounded: {ATTEMPTS} runs in all"
        );
    }

    /// A job that takes row `first`, waits until the other writer holds the other row, then
    /// takes row `second`. Counts its runs; only the first run waits.
    fn crossing(
        first: i64,
        second: i64,
        runs: Arc<AtomicU32>,
        locked: mpsc::Sender<()>,
        other_locked: mpsc::Receiver<()>,
    ) -> impl FnMut(crate::store::sql::Db<'_>) -> Result<(), crate::store::DbError> + Send + 'static
    {
        let other_locked = std::sync::Mutex::new(other_locked);
        move |db| {
            let run = runs.fetch_add(1, Ordering::SeqCst);
            db.execute(
                "UPDATE crossing SET hits = hits + 1 WHERE id = ?1",
                args![first],
            )?;
            if run == 0 {
                locked.send(()).unwrap();
                other_locked
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(10))
                    .expect("the other writer took its first row");
            }
            db.execute(
                "UPDATE crossing SET hits = hits + 1 WHERE id = ?1",
                args![second],
            )?;
            Ok(())
        }
    }

    /// Two instances' writers lock two rows in opposite orders: PostgreSQL detects the deadlock
    /// and fails one of them with 40P01. Neither caller sees it: the loser's batch is rolled
    /// back and run again, and both writes are committed.
    #[tokio::test]
    async fn a_batch_that_deadlocked_with_another_writer_is_run_again() {
        let db = TestDb::postgres().await;
        let (a, b): (Store, Store) = (db.open().await, db.open().await);
        a.write(|db| {
            db.execute_batch(
                "CREATE TABLE crossing (id BIGINT PRIMARY KEY, hits BIGINT NOT NULL);
                 INSERT INTO crossing VALUES (1, 0), (2, 0);",
            )
        })
        .await
        .unwrap();
        let (runs_a, runs_b) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let (a_locked, a_locked_rx) = mpsc::channel();
        let (b_locked, b_locked_rx) = mpsc::channel();
        let (x, y) = tokio::join!(
            a.write(crossing(1, 2, Arc::clone(&runs_a), a_locked, b_locked_rx)),
            b.write(crossing(2, 1, Arc::clone(&runs_b), b_locked, a_locked_rx)),
        );
        x.expect("the first writer's caller sees no deadlock");
        y.expect("the second writer's caller sees no deadlock");
        let runs = (runs_a.load(Ordering::SeqCst), runs_b.load(Ordering::SeqCst));
        // The loser runs again; it can lose once more if its new first lock comes before the
        // winner's granted one, so only "at least one ran again" is certain.
        assert!(
            runs.0.max(runs.1) >= 2,
            "one of the two was chosen to break the deadlock and ran again: {runs:?}"
        );
        let hits: Vec<i64> = a
            .read(|db| db.query_map("SELECT hits FROM crossing ORDER BY id", &[], |r| r.get(0)))
            .await
            .unwrap();
        assert_eq!(hits, [2, 2], "both writes committed once each");
    }
}
