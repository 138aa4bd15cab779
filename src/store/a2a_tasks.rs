//! The A2A tasks of one bot, a page at a time (`ListTasks`, SPEC 14).
//!
//! A task is a delivery to the bot from an external agent (its sender session is an
//! `a2a-in:` one). Pages follow the order tasks are listed in, newest first, and go on from a
//! keyset cursor (the last task's creation time and run id) rather than an offset: a task
//! created between two pages neither shifts one already seen onto the next page nor hides
//! one. Each page is one bounded query on the `(target, created_ms, run_id)` index.

use super::deliveries::{SELECT, from_row, with_lineage};
use super::sql::args;
use super::{Delivery, Store, StoreError};
use crate::bot_id::BotId;
use crate::session::SessionKey;

/// Where a page of tasks starts: after the task created at `created_ms` with `run_id`, in
/// the listing's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskCursor {
    /// The creation time of the last task of the page before.
    pub created_ms: i64,
    /// Its run id (the task id), which orders tasks created in the same millisecond.
    pub run_id: String,
}

/// Which tasks of a bot to list.
#[derive(Debug, Clone)]
pub struct TaskQuery {
    /// The bot the tasks were sent to.
    pub bot: BotId,
    /// Only those of this conversation (A2A `contextId`).
    pub session: Option<SessionKey>,
    /// After this task; from the newest without it.
    pub after: Option<TaskCursor>,
    /// At most this many.
    pub limit: usize,
}

/// One page of tasks.
#[derive(Debug, Clone)]
pub struct TaskPage {
    /// Newest first.
    pub tasks: Vec<Delivery>,
    /// Where the next page starts; none on the last page.
    pub next: Option<TaskCursor>,
    /// How many tasks the query matches over all pages.
    pub total: u64,
}

/// The tasks of every bot are sent from its own `a2a-in:` sessions (`SessionKey::a2a_caller`).
const TASK_FILTER: &str = "target = ?1 AND sender = ?1 AND sender_session LIKE ?2
    AND (CAST(?3 AS TEXT) IS NULL OR target_session = ?3)";

impl Store {
    /// A page of the A2A tasks `query` names, newest first.
    pub async fn a2a_tasks(&self, query: TaskQuery) -> Result<TaskPage, StoreError> {
        self.read(move |db| {
            let bot = query.bot.as_str();
            let senders = format!("bot:{bot}:local:%:a2a-in:%");
            let session = query.session.as_ref().map(SessionKey::render);
            let (after_ms, after_run) = match &query.after {
                Some(c) => (Some(c.created_ms), Some(c.run_id.as_str())),
                None => (None, None),
            };
            // One more than asked tells whether a page follows.
            let mut tasks = db.query_take(
                &format!(
                    "{SELECT} WHERE {TASK_FILTER}
                       AND (CAST(?4 AS BIGINT) IS NULL OR created_ms < ?4
                            OR (created_ms = ?4 AND run_id < ?5))
                     ORDER BY created_ms DESC, run_id DESC"
                ),
                args![bot, &senders, &session, after_ms, after_run],
                query.limit + 1,
                from_row,
            )?;
            let next = (tasks.len() > query.limit).then(|| {
                tasks.truncate(query.limit);
                tasks.last().map(|d| TaskCursor {
                    created_ms: d.created_ms,
                    run_id: d.run_id.clone(),
                })
            });
            let total: i64 = db.query_row(
                &format!("SELECT COUNT(*) FROM deliveries WHERE {TASK_FILTER}"),
                args![bot, &senders, &session],
                |row| row.get(0),
            )?;
            with_lineage(db, &mut tasks)?;
            Ok(TaskPage {
                tasks,
                next: next.flatten(),
                total: u64::try_from(total).unwrap_or_default(),
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewDelivery;
    use crate::store::deliveries::tests::send;
    use crate::store::testing;

    /// A task of `bot` from the A2A agent `client`, created at `at`.
    fn task(run: &str, bot: &str, at: i64) -> NewDelivery {
        NewDelivery {
            sender: bot.parse().unwrap(),
            sender_session: format!("bot:{bot}:local:{bot}:a2a-in:client")
                .parse()
                .unwrap(),
            target: bot.parse().unwrap(),
            target_session: format!("bot:{bot}:local:{bot}:a2a-in:client:ctx")
                .parse()
                .unwrap(),
            ..send(run, None, run, at)
        }
    }

    #[tokio::test]
    async fn pages_list_every_task_of_the_bot_once_newest_first() {
        for db in testing::engines().await {
            let store = db.open().await;
            // Two created in the same millisecond: the run id orders them.
            for (run, at) in [("r1", 1), ("r2", 2), ("r3", 2), ("r4", 3), ("r5", 4)] {
                store
                    .delivery_begin(task(run, "caid", at), 0, None)
                    .await
                    .unwrap();
            }
            // Neither another bot's task nor a send between bots is one of caid's tasks.
            store
                .delivery_begin(task("x1", "snark", 5), 0, None)
                .await
                .unwrap();
            store
                .delivery_begin(send("x2", None, "hi", 5), 0, None)
                .await
                .unwrap();

            let mut seen = Vec::new();
            let mut after = None;
            loop {
                let page = store
                    .a2a_tasks(TaskQuery {
                        bot: "caid".parse().unwrap(),
                        session: None,
                        after: after.take(),
                        limit: 2,
                    })
                    .await
                    .unwrap();
                assert_eq!(page.total, 5);
                assert!(page.tasks.len() <= 2);
                seen.extend(page.tasks.into_iter().map(|d| d.run_id));
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            assert_eq!(seen, ["r5", "r4", "r3", "r2", "r1"]);

            let other = store
                .a2a_tasks(TaskQuery {
                    bot: "caid".parse().unwrap(),
                    session: Some("bot:caid:local:caid:a2a-in:client:other".parse().unwrap()),
                    after: None,
                    limit: 10,
                })
                .await
                .unwrap();
            assert!(other.tasks.is_empty() && other.next.is_none() && other.total == 0);
        }
    }
}
