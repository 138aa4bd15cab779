//! Dedupe records: which inbound events were already handled.
//!
//! Platforms redeliver: Slack retries after 3 s, webhooks retry for hours, and a restart replays
//! whatever was not acknowledged. A claim is decided inside the writer, so two copies of one
//! event racing in from two connections cannot both be `Fresh`, and it returns only once the
//! record is committed, so the event may be acknowledged right after.

use baton_contract::{AccountId, InboundEvent, Platform};
use rusqlite::{Connection, OptionalExtension};

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
    format!("{platform}:{account}")
}

/// Every id `event` can be recognised by: the platform's delivery id and the message id.
pub fn dedupe_keys(event: &InboundEvent) -> Vec<String> {
    let mut keys = Vec::with_capacity(2);
    if let Some(event_id) = &event.event_id {
        keys.push(format!("evt:{event_id}"));
    }
    keys.push(format!("msg:{}", event.message_id));
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
        self.write(move |conn| claim_keys(conn, &scope, &keys, now_ms))
            .await
    }

    /// Delete dedupe and begun-send rows older than the TTL; returns how many dedupe rows.
    ///
    /// Run it on a timer; claims ignore expired rows anyway, this only bounds the tables. A
    /// begun send outlives any replay of its run: the replay's event would be a duplicate.
    pub async fn purge_expired(&self, now_ms: i64) -> Result<usize, StoreError> {
        self.write(move |conn| {
            conn.execute(
                "DELETE FROM sends WHERE begun_ms <= ?1 - ?2",
                (now_ms, DEDUPE_TTL_MS),
            )?;
            conn.execute(
                "DELETE FROM dedupe WHERE seen_ms <= ?1 - ?2",
                (now_ms, DEDUPE_TTL_MS),
            )
        })
        .await
    }
}

/// The claim itself, inside a writer job: shared with [`Store::accept`], which also files the
/// event in the inbox in the same transaction.
pub(super) fn claim_keys(
    conn: &Connection,
    scope: &str,
    keys: &[String],
    now_ms: i64,
) -> rusqlite::Result<Claim> {
    let mut seen =
        conn.prepare_cached("SELECT seen_ms > ?3 - ?4 FROM dedupe WHERE scope = ?1 AND key = ?2")?;
    let mut record = conn.prepare_cached(
        "INSERT INTO dedupe (scope, key, seen_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT (scope, key) DO UPDATE SET seen_ms = excluded.seen_ms",
    )?;
    // Look at every key before recording any, so a key listed twice is not a duplicate of
    // itself.
    let mut unseen = Vec::with_capacity(keys.len());
    for key in keys {
        let live: Option<bool> = seen
            .query_row((scope, key, now_ms, DEDUPE_TTL_MS), |r| r.get(0))
            .optional()?;
        if live != Some(true) {
            unseen.push(key);
        }
    }
    for key in &unseen {
        record.execute((scope, key, now_ms))?;
    }
    Ok(if unseen.len() == keys.len() {
        Claim::Fresh
    } else {
        Claim::Duplicate
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[tokio::test]
    async fn survives_reopen_and_expires_after_the_ttl() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let path = path.to_str().unwrap();
        let t0 = 1_700_000_000_000;

        let store = Store::open(path).await.unwrap();
        assert_eq!(
            store.claim("slack:a", &keys(&["ev1"]), t0).await.unwrap(),
            Claim::Fresh
        );
        store.close().await.unwrap();
        drop(store);

        let store = Store::open(path).await.unwrap();
        let late = t0 + DEDUPE_TTL_MS - 1;
        assert_eq!(
            store.claim("slack:a", &keys(&["ev1"]), late).await.unwrap(),
            Claim::Duplicate
        );
        // Another scope (account) is another namespace.
        assert_eq!(
            store.claim("slack:b", &keys(&["ev1"]), late).await.unwrap(),
            Claim::Fresh
        );
        // Once the TTL has passed, the same key is fresh again.
        let expired = t0 + DEDUPE_TTL_MS;
        assert_eq!(
            store
                .claim("slack:a", &keys(&["ev1"]), expired)
                .await
                .unwrap(),
            Claim::Fresh
        );
        assert_eq!(
            store
                .claim("slack:a", &keys(&["ev1"]), expired)
                .await
                .unwrap(),
            Claim::Duplicate
        );
    }

    #[tokio::test]
    async fn any_seen_key_makes_a_duplicate_and_unseen_keys_are_recorded() {
        let store = Store::open(":memory:").await.unwrap();
        let t = 1_000;
        assert_eq!(
            store.claim("s", &keys(&["ev1", "msg1"]), t).await.unwrap(),
            Claim::Fresh
        );
        // app_mention + message for one message: different event ids, same message id.
        assert_eq!(
            store.claim("s", &keys(&["ev2", "msg1"]), t).await.unwrap(),
            Claim::Duplicate
        );
        assert_eq!(
            store.claim("s", &keys(&["ev2"]), t).await.unwrap(),
            Claim::Duplicate
        );
        assert_eq!(store.claim("s", &[], t).await.unwrap(), Claim::Fresh);
        // Slack sends the event id and the message id; they may be equal.
        assert_eq!(
            store.claim("s", &keys(&["x", "x"]), t).await.unwrap(),
            Claim::Fresh
        );
        assert_eq!(
            store.claim("s", &keys(&["x"]), t).await.unwrap(),
            Claim::Duplicate
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_claims_of_one_key_yield_exactly_one_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("d.db").to_str().unwrap())
            .await
            .unwrap();
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
        assert_eq!(fresh, 1);
    }

    #[tokio::test]
    async fn purge_removes_only_expired_rows() {
        let store = Store::open(":memory:").await.unwrap();
        store.claim("s", &keys(&["old"]), 0).await.unwrap();
        store.claim("s", &keys(&["new"]), 10).await.unwrap();
        assert_eq!(store.purge_expired(DEDUPE_TTL_MS + 5).await.unwrap(), 1);
        assert_eq!(store.purge_expired(DEDUPE_TTL_MS + 5).await.unwrap(), 0);
        assert_eq!(
            store
                .claim("s", &keys(&["new"]), DEDUPE_TTL_MS + 5)
                .await
                .unwrap(),
            Claim::Duplicate
        );
    }
}
