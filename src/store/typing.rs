//! Typing indicators that are up, so a crash cannot leave one up for good: a row is written
//! before an indicator is put up, given the platform's handle once it is up, and deleted once it
//! is taken away. Rows left at start belong to indicators a kill cut off (see
//! `engine/typing.rs`).
//!
//! Each row names the instance that owns it. Several instances share the table, so a start
//! takes over only its own rows and those of instances that are gone, never a live one's
//! ([`Store::typing_take_over`], one conditional statement: of two instances sweeping the same
//! dead one's rows, each row goes to exactly one).

use super::leases::sql;
use super::sql::args;
use super::{Store, StoreError};

/// Take over the rows nobody alive owns: no owner (older versions), this instance's own when
/// `?3` is 1 (a start: they were left by its previous run), or an instance whose row in
/// `instances` was not renewed within `?2` ms (the database's clock, as for leases).
const TAKE_OVER: [&str; 2] = with_clock!(
    "UPDATE typing_open SET owner = ?1
     WHERE owner IS NULL OR (owner = ?1 AND ?3 = 1) OR (owner <> ?1 AND NOT EXISTS (
        SELECT 1 FROM instances WHERE instances.id = typing_open.owner
                                  AND instances.renewed_ms > "
    NOW
    " - ?2))
     RETURNING id, platform, account, chat, thread, message, handle, owner"
);

/// An indicator being put up, or left up by an earlier run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenTyping {
    /// The row.
    pub id: i64,
    /// The platform's name.
    pub platform: String,
    /// The account that put it up.
    pub account: String,
    /// The chat.
    pub chat: String,
    /// The thread, if any.
    pub thread: Option<String>,
    /// The message being answered.
    pub message: String,
    /// The platform's handle on it, once known.
    pub handle: Option<String>,
    /// The instance that owns it (`cluster.instance_id`).
    pub owner: String,
}

impl Store {
    /// Record that `typing` (its `id` is ignored) is about to be put up; returns its row.
    pub async fn typing_opened(&self, typing: OpenTyping, now_ms: i64) -> Result<i64, StoreError> {
        self.write(move |db| {
            db.query_row(
                "INSERT INTO typing_open
                    (platform, account, chat, thread, message, handle, since_ms, owner)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 RETURNING id",
                args![
                    &typing.platform,
                    &typing.account,
                    &typing.chat,
                    &typing.thread,
                    &typing.message,
                    &typing.handle,
                    now_ms,
                    &typing.owner,
                ],
                |row| row.get(0),
            )
        })
        .await
    }

    /// The indicator of row `id` is up, with the platform's `handle` on it.
    pub async fn typing_up(&self, id: i64, handle: Option<String>) -> Result<(), StoreError> {
        self.write(move |db| {
            db.execute(
                "UPDATE typing_open SET handle = ?2 WHERE id = ?1",
                args![id, &handle],
            )?;
            Ok(())
        })
        .await
    }

    /// The indicator of row `id` is gone (or was never shown).
    pub async fn typing_closed(&self, id: i64) -> Result<(), StoreError> {
        self.write(move |db| {
            db.execute_pipelined("DELETE FROM typing_open WHERE id = ?1", args![id])
        })
        .await
    }

    /// Instance `me` takes over the indicators nobody alive owns, oldest first: those of
    /// instances not renewed within `lease_ms`, with no owner, and, at `start`, its own (left
    /// by its previous run under the same id). They are `me`'s from here on.
    pub async fn typing_take_over(
        &self,
        me: &str,
        lease_ms: i64,
        start: bool,
    ) -> Result<Vec<OpenTyping>, StoreError> {
        let me = me.to_owned();
        self.write(move |db| {
            let mut rows = db.query_map(
                sql(db, TAKE_OVER),
                args![&me, lease_ms, i64::from(start)],
                |row| {
                    Ok(OpenTyping {
                        id: row.get(0)?,
                        platform: row.get(1)?,
                        account: row.get(2)?,
                        chat: row.get(3)?,
                        thread: row.get(4)?,
                        message: row.get(5)?,
                        handle: row.get(6)?,
                        owner: row.get(7)?,
                    })
                },
            )?;
            rows.sort_by_key(|row| row.id);
            Ok(rows)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    const LEASE_MS: i64 = 60_000;

    fn typing(owner: &str, message: &str) -> OpenTyping {
        OpenTyping {
            id: 0,
            platform: "feishu".into(),
            account: "snark".into(),
            chat: "oc_1".into(),
            thread: None,
            message: message.into(),
            handle: None,
            owner: owner.into(),
        }
    }

    fn messages(rows: &[OpenTyping]) -> Vec<&str> {
        rows.iter().map(|row| row.message.as_str()).collect()
    }

    #[tokio::test]
    async fn an_indicator_is_on_record_from_before_it_is_up_until_it_is_gone() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let typing = typing("a", "om_1");
            let id = store.typing_opened(typing.clone(), 1).await.unwrap();
            let second = store.typing_opened(typing.clone(), 2).await.unwrap();
            assert_ne!(id, second, "{engine}: each indicator has its row");
            store.typing_up(id, Some("r1".into())).await.unwrap();
            store.typing_closed(second).await.unwrap();
            let left = store.typing_take_over("a", LEASE_MS, true).await.unwrap();
            let expected = OpenTyping {
                id,
                handle: Some("r1".into()),
                ..typing
            };
            assert_eq!(left, [expected], "{engine}");
            store.typing_closed(id).await.unwrap();
            let left = store.typing_take_over("a", LEASE_MS, true).await.unwrap();
            assert!(left.is_empty(), "{engine}");
        }
    }

    /// Three instances share the table. A live instance's indicators are nobody else's to take
    /// down, not even at a start; once it stops renewing, its rows go to the instances that
    /// sweep, each row to exactly one of them; a start takes back the starting instance's own.
    #[tokio::test]
    async fn only_a_dead_instances_indicators_are_taken_over_each_by_one_instance() {
        for db in testing::engines().await {
            let engine = db.engine();
            let (a, c) = (db.open().await, db.open().await);
            for id in ["a", "b", "c"] {
                a.instance_register(id, "test", 0).await.unwrap();
            }
            a.typing_opened(typing("a", "a1"), 1).await.unwrap();
            for n in 1..=4 {
                a.typing_opened(typing("b", &format!("b{n}")), 1)
                    .await
                    .unwrap();
            }
            for (store, me) in [(&a, "a"), (&c, "c")] {
                let taken = store.typing_take_over(me, LEASE_MS, true).await.unwrap();
                assert_eq!(
                    messages(&taken),
                    if me == "a" { vec!["a1"] } else { vec![] },
                    "{engine}: {me} starting takes its own rows only, b is alive"
                );
            }

            // b stops renewing (killed): its row is now older than the lease.
            a.write(|db| {
                db.execute(
                    "UPDATE instances SET renewed_ms = renewed_ms - 120000 WHERE id = 'b'",
                    &[],
                )
            })
            .await
            .unwrap();
            let (x, y) = tokio::join!(
                a.typing_take_over("a", LEASE_MS, false),
                c.typing_take_over("c", LEASE_MS, false)
            );
            let (x, y) = (x.unwrap(), y.unwrap());
            let mut all: Vec<&str> = messages(&x).into_iter().chain(messages(&y)).collect();
            all.sort_unstable();
            assert_eq!(
                all,
                ["b1", "b2", "b3", "b4"],
                "{engine}: each row taken once"
            );
            assert!(x.iter().all(|row| row.owner == "a"), "{engine}");
            assert!(y.iter().all(|row| row.owner == "c"), "{engine}");

            let again = a.typing_take_over("a", LEASE_MS, false).await.unwrap();
            assert!(
                again.is_empty(),
                "{engine}: a sweep leaves a live instance's rows, its own included: {again:?}"
            );
            a.close().await.unwrap();
            c.close().await.unwrap();
        }
    }
}
