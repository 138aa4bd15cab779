//! Session locks: one turn at a time per session across instances sharing the database. The
//! in-memory lane (`lanes.rs`) orders a session's turns within one instance; the row here keeps
//! two instances (webhooks for one chat reaching both, a delivery run on the target's home)
//! from running turns of one session side by side.
//!
//! Taking and renewing are one conditional upsert, as for account leases (`leases.rs`): it
//! applies when the lock is free, expired, or already the caller's, and says who holds it.
//! The holder is one turn (its instance id and a token of its own), so a turn cannot take over
//! the lock of another turn of its own instance. Letting go deletes the row and announces it
//! ([`Topic::SessionFree`]), which wakes the turns waiting on any instance; a holder that stops
//! renewing (a killed instance) loses it at its expiry, on the database's clock.
//!
//! SQLite: one instance, whose lane already orders every turn: nothing is written.

use super::leases::sql;
use super::notices::Topic;
use super::sql::{Engine, args};
use super::{Store, StoreError};

/// Take or renew: applies only when the lock is free, expired, or already the caller's.
const TAKE: [&str; 2] = with_clock!(
    "INSERT INTO session_locks (name, holder, expires_ms) VALUES (?1, ?2, "
    NOW
    " + ?3) ON CONFLICT (name) DO UPDATE
       SET holder = excluded.holder, expires_ms = excluded.expires_ms
       WHERE session_locks.holder = excluded.holder OR session_locks.expires_ms <= "
    NOW
    " RETURNING holder"
);

/// How long the current holder's lock has left, in ms.
const LEFT: [&str; 2] = with_clock!(
    "SELECT expires_ms - " NOW " FROM session_locks WHERE name = ?1"
);

/// Whether a turn got its session's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locked {
    /// The caller holds it now, for the lease asked.
    Held,
    /// Another turn holds it for up to this many more ms (unless it lets go before).
    Busy {
        /// Until it expires, unless renewed.
        left_ms: i64,
    },
}

impl Store {
    /// Whether session locks mean anything: only several instances on one database need them.
    pub fn session_locks_shared(&self) -> bool {
        self.engine() == Engine::Postgres
    }

    /// Take or renew session lock `name` for `holder`, `lease_ms` from now.
    pub async fn session_lock(
        &self,
        name: &str,
        holder: &str,
        lease_ms: i64,
    ) -> Result<Locked, StoreError> {
        if !self.session_locks_shared() {
            return Ok(Locked::Held);
        }
        let (name, holder) = (name.to_owned(), holder.to_owned());
        self.write(move |db| {
            let won: Vec<String> =
                db.query_map(sql(db, TAKE), args![&name, &holder, lease_ms], |r| r.get(0))?;
            if won.first().is_some_and(|h| *h == holder) {
                return Ok(Locked::Held);
            }
            let left: Option<i64> = db
                .query_map(sql(db, LEFT), args![&name], |r| r.get(0))?
                .pop();
            Ok(Locked::Busy {
                left_ms: left.unwrap_or(0).max(1),
            })
        })
        .await
    }

    /// `holder` lets session lock `name` go; announced, so waiting turns try again at once.
    pub async fn session_unlock(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        if !self.session_locks_shared() {
            return Ok(());
        }
        let holder = holder.to_owned();
        let named = name.to_owned();
        self.write_announcing(Topic::SessionFree, name, move |db| {
            db.execute(
                "DELETE FROM session_locks WHERE name = ?1 AND holder = ?2",
                args![&named, &holder],
            )
            .map(drop)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::testing;

    #[tokio::test]
    async fn one_holder_at_a_time_and_letting_go_wakes_the_next() {
        let db = testing::TestDb::postgres().await;
        let (a, b) = (db.open().await, db.open().await);
        assert_eq!(
            a.session_lock("s", "a/1", 60_000).await.unwrap(),
            Locked::Held
        );
        assert_eq!(
            a.session_lock("s", "a/1", 60_000).await.unwrap(),
            Locked::Held,
            "renewed"
        );
        let busy = b.session_lock("s", "b/1", 60_000).await.unwrap();
        assert!(
            matches!(busy, Locked::Busy { left_ms } if left_ms > 50_000),
            "{busy:?}"
        );
        assert!(
            matches!(
                a.session_lock("s", "a/2", 60_000).await.unwrap(),
                Locked::Busy { .. }
            ),
            "another turn of the same instance waits too"
        );
        let mut heard = b.subscribe();
        a.session_unlock("s", "a/1").await.unwrap();
        tokio::time::timeout(
            Duration::from_secs(10),
            heard.touching(Topic::SessionFree, "s"),
        )
        .await
        .expect("the release is announced");
        assert_eq!(b.session_lock("s", "b/1", 300).await.unwrap(), Locked::Held);
        // b stops renewing: its lock expires and a takes it over.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while a.session_lock("s", "a/3", 60_000).await.unwrap() != Locked::Held {
            assert!(tokio::time::Instant::now() < deadline, "never expired");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn sqlite_writes_nothing() {
        let store = Store::open(":memory:").await.unwrap();
        assert!(!store.session_locks_shared());
        assert_eq!(
            store.session_lock("s", "a/1", 1).await.unwrap(),
            Locked::Held
        );
        assert_eq!(
            store.session_lock("s", "b/1", 1).await.unwrap(),
            Locked::Held
        );
        let rows: i64 = store
            .read(|db| db.query_row("SELECT COUNT(*) FROM session_locks", &[], |r| r.get(0)))
            .await
            .unwrap();
        assert_eq!(rows, 0);
    }
}
