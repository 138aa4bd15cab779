//! Session wakes: a message for a session (an escalation's answer, a late reply) that arrived on
//! one instance and is for the home instance of the session's bot to wake it with. The row keeps
//! the message until the woken turn has run: announced when written ([`Topic::Wake`]), claimed
//! by exactly one instance (a conditional update of its runner), deleted once done. A row whose
//! runner is gone, or that nobody claimed, is picked up like a delivery (`relay/recover.rs`).

use super::leases::{LIVE_IDS, sql};
use super::notices::Topic;
use super::sql::args;
use super::{Store, StoreError};

/// A wake nobody is working on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftWake {
    /// Its id.
    pub id: String,
    /// The bot whose session it wakes.
    pub bot: String,
    /// Who claimed it (none: nobody yet).
    pub runner: Option<String>,
}

impl Store {
    /// Keep `message` (JSON) for `bot`'s home instance to wake its session with; announced
    /// under the bot's id, so its home looks for what is left for it.
    pub async fn wake_hand(
        &self,
        id: &str,
        bot: &str,
        message: String,
        at_ms: i64,
    ) -> Result<(), StoreError> {
        let (row, bot) = (id.to_owned(), bot.to_owned());
        let announced = bot.clone();
        self.write_announcing(Topic::Wake, &announced, move |db| {
            db.execute(
                "INSERT INTO session_wakes (id, bot, message, created_ms) VALUES (?1, ?2, ?3, ?4)",
                args![&row, &bot, &message, at_ms],
            )
            .map(drop)
        })
        .await
    }

    /// Claim wake `id` for `runner` if its runner is still `from`; its message if won.
    pub async fn wake_claim(
        &self,
        id: &str,
        from: Option<&str>,
        runner: &str,
    ) -> Result<Option<String>, StoreError> {
        let (id, from, runner) = (id.to_owned(), from.map(str::to_owned), runner.to_owned());
        self.write(move |db| {
            Ok(db
                .query_map(
                    "UPDATE session_wakes SET runner = ?3
                     WHERE id = ?1 AND coalesce(runner, '') = coalesce(CAST(?2 AS TEXT), '')
                     RETURNING message",
                    args![&id, &from, &runner],
                    |r| r.get(0),
                )?
                .pop())
        })
        .await
    }

    /// Wake `id` has woken its session: gone.
    pub async fn wake_done(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(move |db| {
            db.execute("DELETE FROM session_wakes WHERE id = ?1", args![&id])
                .map(drop)
        })
        .await
    }

    /// Wakes nobody is working on: unclaimed, claimed by `me` (only when `mine`: a restart
    /// under the same id) or by an instance not renewed within `lease_ms`. Oldest first.
    pub async fn wakes_left(
        &self,
        me: &str,
        mine: bool,
        lease_ms: i64,
    ) -> Result<Vec<LeftWake>, StoreError> {
        let me = me.to_owned();
        self.read(move |db| {
            let live = sql(db, LIVE_IDS);
            db.query_map(
                &format!(
                    "SELECT id, bot, runner FROM session_wakes
                     WHERE runner IS NULL OR (runner = ?1 AND ?2)
                        OR (runner <> ?1 AND runner NOT IN ({live}))
                     ORDER BY created_ms, id"
                ),
                args![&me, mine, lease_ms],
                |r| {
                    Ok(LeftWake {
                        id: r.get(0)?,
                        bot: r.get(1)?,
                        runner: r.get(2)?,
                    })
                },
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use crate::store::testing;

    #[tokio::test]
    async fn a_wake_is_claimed_once_and_a_gone_runner_leaves_it() {
        for db in testing::engines().await {
            let store = db.open().await;
            store.instance_register("a", "0.1", 60_000).await.unwrap();
            store
                .wake_hand("w1", "asker", "{}".into(), 1)
                .await
                .unwrap();
            store
                .wake_hand("w2", "asker", "{}".into(), 2)
                .await
                .unwrap();
            let (one, two) = tokio::join!(
                store.wake_claim("w1", None, "a"),
                store.wake_claim("w1", None, "b"),
            );
            assert!(
                one.unwrap().is_some() != two.unwrap().is_some(),
                "{}",
                db.engine()
            );
            assert!(
                store
                    .wake_claim("w2", None, "gone")
                    .await
                    .unwrap()
                    .is_some()
            );
            let left = store.wakes_left("a", false, 60_000).await.unwrap();
            let ids: Vec<&str> = left.iter().map(|w| w.id.as_str()).collect();
            // w1 is a's (live) or b's (never registered: gone); w2's runner is gone.
            assert!(ids.contains(&"w2"), "{}: {left:?}", db.engine());
            store.wake_done("w2").await.unwrap();
            let left = store.wakes_left("a", true, 60_000).await.unwrap();
            assert!(left.iter().all(|w| w.id != "w2"), "{}", db.engine());
        }
    }
}
