//! Scheduled jobs: when each bot's heartbeat and cron entries fall due next, and the
//! last heartbeat reply each one delivered.
//!
//! Kept in the store so that a restart continues the schedule instead of restarting it: a
//! heartbeat due in ten minutes is still due in ten minutes, and a cron slot that passed while
//! the gateway was down is still owed. The last delivered text makes duplicate suppression hold
//! across restarts too.

use super::sql::{OptionalRow, args};
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

    /// Record when `row`'s job falls due next (and under which spec), keeping its last
    /// delivered text.
    pub async fn schedule_set_due(&self, row: ScheduleRow) -> Result<(), StoreError> {
        self.write(move |db| {
            db.execute(
                "INSERT INTO schedule_jobs (bot, job, spec, next_due_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (bot, job) DO UPDATE
                    SET spec = excluded.spec, next_due_ms = excluded.next_due_ms",
                args![&row.bot, &row.job, &row.spec, row.next_due_ms],
            )?;
            Ok(())
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
                .schedule_set_due(row("heartbeat", "every=1800", 10))
                .await
                .unwrap();
            store
                .schedule_set_due(row("cron-0", "0 9 * * *", 20))
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
                .schedule_set_due(row("heartbeat", "every=1800", 30))
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
}
