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

/// Every id `event` can be recognised by: the platform's delivery id and the message id.
pub fn dedupe_keys(event: &InboundEvent) -> Vec<String> {
    let mut keys = Vec::with_capacity(2);
    if let Some(event_id) = &event.event_id {
        keys.push(["evt:", event_id].concat());
    }
    keys.push(["msg:", event.message_id.as_str()].concat());
    keys
}

impl Store {
    /// Fresh when none of `keys` was claimed in `scope` within DEDUPE_TTL_MS of `now_ms` (then all are recorded); Duplicate otherwise (and any unseen keys are recorded too).
    ///
    /// Several keys cover one event that arrives under several ids (Slack's `app_mention` and
    /// `message` for one message share the message id, not the event id). An empty `keys` is
    /// `Fresh`: there is nothing to recognise it by. A key seen exactly `DEDUPE_TTL_MS` ago or
    /// earlier has expired and counts as unseen.
    pub async fn claim(
        &self,
        scope: &str,
        keys: &[String],
        now_ms: i64,
    ) -> Result<Claim, StoreError> {
        let scope = scope.to_owned();
        let keys = keys.to_vec();
        self.write(move |db| claim_keys(db, &scope, &keys, now_ms))
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
/// One conditional upsert per key, the same text on both engines: it records a key that is new
/// or expired and counts one row changed, and leaves a live key alone and counts none. So the
/// look-up and the write are one statement (a count, not `RETURNING`, which SQLite runs through
/// a temporary table of its own: half the claim's cost, BENCHMARKS.md), and on PostgreSQL,
/// where several instances claim in one table, two claims of one key cannot both see it unseen
/// (the upsert locks the row it conflicts with).
pub(super) fn claim_keys(
    db: Db<'_>,
    scope: &str,
    keys: &[String],
    now_ms: i64,
) -> Result<Claim, DbError> {
    let expired = now_ms - DEDUPE_TTL_MS;
    let mut claim = Claim::Fresh;
    for (i, key) in keys.iter().enumerate() {
        // A key listed twice is one key, not a duplicate of itself.
        if keys[..i].contains(key) {
            continue;
        }
        let recorded = db.execute(
            "INSERT INTO dedupe (scope, key, seen_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT (scope, key) DO UPDATE SET seen_ms = excluded.seen_ms
             WHERE dedupe.seen_ms <= ?4",
            args![scope, key, now_ms, expired],
        )?;
        if recorded == 0 {
            claim = Claim::Duplicate;
        }
    }
    Ok(claim)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn survives_reopen_and_expires_after_the_ttl() {
        for db in testing::engines().await {
            let engine = db.engine();
            let t0 = 1_700_000_000_000;
            let store = db.open().await;
            assert_eq!(
                store.claim("slack:a", &keys(&["ev1"]), t0).await.unwrap(),
                Claim::Fresh,
                "{engine}"
            );
            store.close().await.unwrap();
            drop(store);

            let store = db.open().await;
            let late = t0 + DEDUPE_TTL_MS - 1;
            assert_eq!(
                store.claim("slack:a", &keys(&["ev1"]), late).await.unwrap(),
                Claim::Duplicate,
                "{engine}"
            );
            // Another scope (account) is another namespace.
            assert_eq!(
                store.claim("slack:b", &keys(&["ev1"]), late).await.unwrap(),
                Claim::Fresh,
                "{engine}"
            );
            // Once the TTL has passed, the same key is fresh again.
            let expired = t0 + DEDUPE_TTL_MS;
            let ev1 = keys(&["ev1"]);
            let claim = |at| store.claim("slack:a", &ev1, at);
            assert_eq!(claim(expired).await.unwrap(), Claim::Fresh, "{engine}");
            assert_eq!(claim(expired).await.unwrap(), Claim::Duplicate, "{engine}");
        }
    }

    #[tokio::test]
    async fn any_seen_key_makes_a_duplicate_and_unseen_keys_are_recorded() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let claim = |k: &[&str]| {
                let (store, k) = (store.clone(), keys(k));
                async move { store.claim("s", &k, 1_000).await }
            };
            assert_eq!(
                claim(&["ev1", "msg1"]).await.unwrap(),
                Claim::Fresh,
                "{engine}"
            );
            // app_mention + message for one message: different event ids, same message id.
            assert_eq!(
                claim(&["ev2", "msg1"]).await.unwrap(),
                Claim::Duplicate,
                "{engine}"
            );
            assert_eq!(claim(&["ev2"]).await.unwrap(), Claim::Duplicate, "{engine}");
            assert_eq!(claim(&[]).await.unwrap(), Claim::Fresh, "{engine}");
            // Slack sends the event id and the message id; they may be equal.
            assert_eq!(claim(&["x", "x"]).await.unwrap(), Claim::Fresh, "{engine}");
            assert_eq!(claim(&["x"]).await.unwrap(), Claim::Duplicate, "{engine}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_claims_of_one_key_yield_exactly_one_fresh() {
        for db in testing::engines().await {
            let store = db.open().await;
            let tasks: Vec<_> = (0..64)
                .map(|i| {
                    let store = store.clone();
                    tokio::spawn(async move {
                        let keys = vec![format!("ev-{i}"), "msg-shared".to_owned()];
                        store.claim("s", &keys, 5).await.unwrap()
                    })
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
            store.claim("s", &keys(&["old"]), 0).await.unwrap();
            store.claim("s", &keys(&["new"]), 10).await.unwrap();
            let later = DEDUPE_TTL_MS + 5;
            assert_eq!(store.purge_expired(later).await.unwrap(), 1, "{engine}");
            assert_eq!(store.purge_expired(later).await.unwrap(), 0, "{engine}");
            assert_eq!(
                store.claim("s", &keys(&["new"]), later).await.unwrap(),
                Claim::Duplicate,
                "{engine}"
            );
        }
    }
}
