//! Dedupe records: which inbound events were already handled.
//!
//! Platforms redeliver: Slack retries after 3 s, webhooks retry for hours, and a restart replays
//! whatever was not acknowledged. A claim is decided inside the writer, so two copies of one
//! event racing in from two connections cannot both be `Fresh`, and it returns only once the
//! record is committed, so the event may be acknowledged right after.

use baton_contract::{AccountId, InboundEvent, Platform};

use super::sql::{Db, DbError, args};
use super::sweep::{DEDUPE, SENDS};
use super::{Store, StoreError};

/// How long a dedupe record counts (outlives every platform's retry window).
pub const DEDUPE_TTL_MS: i64 = 24 * 60 * 60 * 1000;

/// Whether an event was seen before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// None of its keys was seen within the TTL: handle it.
    Fresh,
    /// One of its keys was seen within the TTL: drop it.
    Duplicate,
}

/// The dedupe (and inbox) scope of one account: per account, because every bot account sees the
/// same message and each must handle it once.
pub fn dedupe_scope(platform: Platform, account: &AccountId) -> String {
    [platform.as_str(), ":", account.as_str()].concat()
}

/// The id `event` is recognised by: its message id, which every platform repeats in a
/// redelivery (Slack's retry and its `app_mention` + `message` pair share the message's `ts`, a
/// Feishu retry its `message_id`, a slash command its trigger or interaction id). The delivery
/// id (`event_id`) would recognise nothing more, and claiming it too cost a second row in a
/// random place of the table for every event (BENCHMARKS.md, issue 23). The `msg:` prefix is
/// the one the records have always had, so a redelivery of an event claimed before still finds
/// its record.
pub fn dedupe_key(event: &InboundEvent) -> String {
    ["msg:", event.message_id.as_str()].concat()
}

impl Store {
    /// Fresh when `key` was not claimed in `scope` within DEDUPE_TTL_MS of `now_ms` (then it is recorded); Duplicate otherwise.
    ///
    /// A key seen exactly `DEDUPE_TTL_MS` ago or earlier has expired and counts as unseen.
    pub async fn claim(&self, scope: &str, key: &str, now_ms: i64) -> Result<Claim, StoreError> {
        let scope = scope.to_owned();
        let key = key.to_owned();
        self.write(move |db| claim_key(db, &scope, &key, now_ms))
            .await
    }

    /// Delete dedupe and begun-send rows older than the TTL; returns how many dedupe rows.
    ///
    /// Run it on a timer; claims ignore expired rows anyway, this only bounds the tables. A
    /// begun send outlives any replay of its run: the replay's event would be a duplicate.
    /// Neither table has an index on its time, so each is walked a window at a time
    /// (`sweep.rs`).
    pub async fn purge_expired(&self, now_ms: i64) -> Result<usize, StoreError> {
        let expired = now_ms - DEDUPE_TTL_MS;
        self.sweep(SENDS, expired).await?;
        self.sweep(DEDUPE, expired).await
    }
}

/// The claim itself, inside a writer job: shared with [`Store::accept`], which also files the
/// event in the inbox in the same transaction.
///
/// One conditional upsert, the same text on both engines: it records a key that is new or
/// expired and counts one row changed, and leaves a live key alone and counts none. So the
/// look-up and the write are one statement (a count, not `RETURNING`, which SQLite runs through
/// a temporary table of its own: half the claim's cost, BENCHMARKS.md), and on PostgreSQL,
/// where several instances claim in one table, two claims of one key cannot both see it unseen
/// (the upsert locks the row it conflicts with).
pub(super) fn claim_key(db: Db<'_>, scope: &str, key: &str, now_ms: i64) -> Result<Claim, DbError> {
    let recorded = db.execute(
        "INSERT INTO dedupe (scope, key, seen_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT (scope, key) DO UPDATE SET seen_ms = excluded.seen_ms
         WHERE dedupe.seen_ms <= ?4",
        args![scope, key, now_ms, now_ms - DEDUPE_TTL_MS],
    )?;
    Ok(if recorded == 0 {
        Claim::Duplicate
    } else {
        Claim::Fresh
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    #[tokio::test]
    async fn survives_reopen_and_expires_after_the_ttl() {
        for db in testing::engines().await {
            let engine = db.engine();
            let t0 = 1_700_000_000_000;
            let store = db.open().await;
            assert_eq!(
                store.claim("slack:a", "msg:1", t0).await.unwrap(),
                Claim::Fresh,
                "{engine}"
            );
            store.close().await.unwrap();
            drop(store);

            let store = db.open().await;
            let late = t0 + DEDUPE_TTL_MS - 1;
            assert_eq!(
                store.claim("slack:a", "msg:1", late).await.unwrap(),
                Claim::Duplicate,
                "{engine}"
            );
            // Another scope (account) is another namespace.
            assert_eq!(
                store.claim("slack:b", "msg:1", late).await.unwrap(),
                Claim::Fresh,
                "{engine}"
            );
            // Once the TTL has passed, the same key is fresh again.
            let expired = t0 + DEDUPE_TTL_MS;
            let claim = |at| store.claim("slack:a", "msg:1", at);
            assert_eq!(claim(expired).await.unwrap(), Claim::Fresh, "{engine}");
            assert_eq!(claim(expired).await.unwrap(), Claim::Duplicate, "{engine}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_claims_of_one_key_yield_exactly_one_fresh() {
        for db in testing::engines().await {
            let store = db.open().await;
            let tasks: Vec<_> = (0..64)
                .map(|_| {
                    let store = store.clone();
                    tokio::spawn(async move { store.claim("s", "msg:shared", 5).await.unwrap() })
                })
                .collect();
            let mut fresh = 0;
            for task in tasks {
                if task.await.unwrap() == Claim::Fresh {
                    fresh += 1;
                }
            }
            assert_eq!(fresh, 1, "{}", db.engine());
        }
    }

    #[tokio::test]
    async fn purge_removes_only_expired_rows() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            store.claim("s", "old", 0).await.unwrap();
            store.claim("s", "new", 10).await.unwrap();
            let later = DEDUPE_TTL_MS + 5;
            assert_eq!(store.purge_expired(later).await.unwrap(), 1, "{engine}");
            assert_eq!(store.purge_expired(later).await.unwrap(), 0, "{engine}");
            assert_eq!(
                store.claim("s", "new", later).await.unwrap(),
                Claim::Duplicate,
                "{engine}"
            );
        }
    }
}
