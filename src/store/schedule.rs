//! Scheduled jobs: when each bot's heartbeat and cron entries fall due next, and the
//! last heartbeat reply each one delivered.
//!
//! Kept in the store so that a restart continues the schedule instead of restarting it: a
//! heartbeat due in ten minutes is still due in ten minutes, and a cron slot that passed while
//! the gateway was down is still owed. The last delivered text makes duplicate suppression hold
//! across restarts too.
//!
//! With several instances on one database each runs every job's clock, and the stored due time
//! decides who acts on an occurrence: [`Store::schedule_advance`] moves it on only if it still
//! holds the time the caller saw, so of the instances that find one occurrence due, exactly one
//! moves it and runs (or skips) it.

use super::sql::{Db, DbError, OptionalRow, args};
use super::{Store, StoreError};

use crate::bot_id::BotId;

/// One job's stored state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRow {
    /// The bot.
    pub bot: BotId,
    /// `heartbeat` or `cron-<n>`.
    pub job: String,
    /// What the due time was computed from; a different spec in the config re-arms the job.
    pub spec: String,
    /// When the job falls due, milliseconds since the Unix epoch.
    pub next_due_ms: i64,
}

/// The stored due time of a job with no future time (a cron schedule that names none).
pub const NEVER_DUE_MS: i64 = i64::MAX;

/// What [`Store::schedule_advance`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advanced {
    /// The occurrence was this caller's: the due time moved on.
    Won,
    /// Another instance moved the due time first; it is this now.
    Lost {
        /// The stored due time, ms since the Unix epoch ([`NEVER_DUE_MS`] for none).
        next_due_ms: i64,
    },
}

/// A heartbeat reply that reached its chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastDelivered {
    /// The text as delivered.
    pub text: String,
    /// When, milliseconds since the Unix epoch.
    pub at_ms: i64,
}

impl Store {
    /// Every stored job, for the scheduler's first tick.
    pub async fn schedule_jobs(&self) -> Result<Vec<ScheduleRow>, StoreError> {
        self.read(|db| {
            db.query_map(
                "SELECT bot, job, spec, next_due_ms FROM schedule_jobs",
                &[],
                |row| {
                    Ok(ScheduleRow {
                        bot: row.get(0)?,
                        job: row.get(1)?,
                        spec: row.get(2)?,
                        next_due_ms: row.get(3)?,
                    })
                },
            )
        })
        .await
    }

    /// Record a job's first due time unless the store already holds one for the same spec
    /// (another instance armed it first, or an earlier run did); returns the due time that
    /// counts now.
    pub async fn schedule_arm(&self, row: ScheduleRow) -> Result<i64, StoreError> {
        self.write(move |db| {
            let armed: Option<i64> = db
                .query_map(
                    "INSERT INTO schedule_jobs (bot, job, spec, next_due_ms) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (bot, job) DO UPDATE
                        SET spec = excluded.spec, next_due_ms = excluded.next_due_ms
                        WHERE schedule_jobs.spec <> excluded.spec
                     RETURNING next_due_ms",
                    args![&row.bot, &row.job, &row.spec, row.next_due_ms],
                    |r| r.get(0),
                )?
                .pop();
            match armed {
                Some(due) => Ok(due),
                None => stored_due(db, &row),
            }
        })
        .await
    }

    /// Move `row`'s job from the occurrence due at `due_ms` to `row.next_due_ms`, only if the
    /// store still holds `due_ms` (or nothing): the claim that makes one instance of several act
    /// on an occurrence. One conditional upsert; its row lock serialises racing instances.
    pub async fn schedule_advance(
        &self,
        row: ScheduleRow,
        due_ms: i64,
    ) -> Result<Advanced, StoreError> {
        self.write(move |db| {
            let moved = db
                .query_map(
                    "INSERT INTO schedule_jobs (bot, job, spec, next_due_ms) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (bot, job) DO UPDATE
                        SET spec = excluded.spec, next_due_ms = excluded.next_due_ms
                        WHERE schedule_jobs.next_due_ms = ?5
                     RETURNING next_due_ms",
                    args![&row.bot, &row.job, &row.spec, row.next_due_ms, due_ms],
                    |r| r.get::<i64>(0),
                )?
                .pop();
            Ok(match moved {
                Some(_) => Advanced::Won,
                None => Advanced::Lost {
                    next_due_ms: stored_due(db, &row)?,
                },
            })
        })
        .await
    }

    /// Remember the reply `bot`'s `job` just delivered.
    pub async fn schedule_delivered(
        &self,
        bot: &BotId,
        job: &str,
        delivered: LastDelivered,
    ) -> Result<(), StoreError> {
        let (bot, job) = (bot.clone(), job.to_owned());
        self.write(move |db| {
            db.execute(
                "UPDATE schedule_jobs SET last_text = ?3, last_text_ms = ?4
                 WHERE bot = ?1 AND job = ?2",
                args![&bot, &job, &delivered.text, delivered.at_ms],
            )?;
            Ok(())
        })
        .await
    }

    /// The reply `bot`'s `job` last delivered, if any.
    pub async fn schedule_last_delivered(
        &self,
        bot: &BotId,
        job: &str,
    ) -> Result<Option<LastDelivered>, StoreError> {
        let (bot, job) = (bot.clone(), job.to_owned());
        self.read(move |db| {
            db.query_row(
                "SELECT last_text, last_text_ms FROM schedule_jobs
                 WHERE bot = ?1 AND job = ?2 AND last_text IS NOT NULL",
                args![&bot, &job],
                |row| {
                    Ok(LastDelivered {
                        text: row.get(0)?,
                        at_ms: row.get(1)?,
                    })
                },
            )
            .optional()
        })
        .await
    }
}

/// The due time stored for `row`'s job.
fn stored_due(db: Db<'_>, row: &ScheduleRow) -> Result<i64, DbError> {
    db.query_row(
        "SELECT next_due_ms FROM schedule_jobs WHERE bot = ?1 AND job = ?2",
        args![&row.bot, &row.job],
        |r| r.get(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    fn row(job: &str, spec: &str, due: i64) -> ScheduleRow {
        ScheduleRow {
            bot: "snark".parse().unwrap(),
            job: job.into(),
            spec: spec.into(),
            next_due_ms: due,
        }
    }

    #[tokio::test]
    async fn due_times_and_the_last_reply_survive_a_reopen() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            store
                .schedule_arm(row("heartbeat", "every=1800", 10))
                .await
                .unwrap();
            store
                .schedule_arm(row("cron-0", "0 9 * * *", 20))
                .await
                .unwrap();
            let said = LastDelivered {
                text: "standup in 5".into(),
                at_ms: 11,
            };
            store
                .schedule_delivered(&"snark".parse().unwrap(), "heartbeat", said.clone())
                .await
                .unwrap();
            // Moving the due time keeps the last reply.
            store
                .schedule_advance(row("heartbeat", "every=1800", 30), 10)
                .await
                .unwrap();
            store.close().await.unwrap();
            drop(store);

            let store = db.open().await;
            let mut jobs = store.schedule_jobs().await.unwrap();
            jobs.sort_by(|a, b| a.job.cmp(&b.job));
            assert_eq!(
                jobs,
                [
                    row("cron-0", "0 9 * * *", 20),
                    row("heartbeat", "every=1800", 30)
                ],
                "{engine}"
            );
            assert_eq!(
                store
                    .schedule_last_delivered(&"snark".parse().unwrap(), "heartbeat")
                    .await
                    .unwrap(),
                Some(said),
                "{engine}"
            );
            assert_eq!(
                store
                    .schedule_last_delivered(&"snark".parse().unwrap(), "cron-0")
                    .await
                    .unwrap(),
                None,
                "{engine}"
            );
        }
    }

    /// Two instances find the same occurrence due at once: exactly one moves it on, the other
    /// is told where it is now; arming again keeps a due time stored under the same spec.
    #[tokio::test]
    async fn of_two_instances_claiming_one_due_tick_exactly_one_wins() {
        for db in testing::engines().await {
            let engine = db.engine();
            let (a, b) = (db.open().await, db.open().await);
            assert_eq!(
                a.schedule_arm(row("heartbeat", "every=60", 100))
                    .await
                    .unwrap(),
                100
            );
            assert_eq!(
                b.schedule_arm(row("heartbeat", "every=60", 130))
                    .await
                    .unwrap(),
                100,
                "{engine}: armed by the first instance already"
            );
            for round in 0..20_i64 {
                let due = 100 + 60 * round;
                let next = row("heartbeat", "every=60", due + 60);
                let (x, y) = tokio::join!(
                    a.schedule_advance(next.clone(), due),
                    b.schedule_advance(next.clone(), due)
                );
                let mut results = [x.unwrap(), y.unwrap()];
                results.sort_by_key(|r| matches!(r, Advanced::Lost { .. }));
                assert_eq!(
                    results,
                    [
                        Advanced::Won,
                        Advanced::Lost {
                            next_due_ms: due + 60
                        }
                    ],
                    "{engine}: round {round}"
                );
            }
            assert_eq!(
                b.schedule_arm(row("heartbeat", "every=90", 5000))
                    .await
                    .unwrap(),
                5000,
                "{engine}: a changed spec re-arms"
            );
            a.close().await.unwrap();
            b.close().await.unwrap();
        }
    }
}
