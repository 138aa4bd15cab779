//! Begun sends: which chunk posts were started, so no replay ever posts one twice.
//!
//! A post is recorded as begun (committed) before the platform is called, and as delivered (the
//! transcript's reply entry, under the same idempotency key) after it answers. A process killed
//! between the two leaves a begun key with no delivered entry: the post may or may not have
//! reached the chat, and platforms take no idempotency key for plain messages, so the only way
//! never to answer twice is not to try again. The replay records a failure instead.

use super::sql::{Db, DbError, OptionalRow, args};
use super::{EntryKind, NewUsage, Store, StoreError};

/// Whether a chunk may be posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendStart {
    /// First attempt: post it (the begin is committed).
    Go,
    /// Already delivered, as this platform message id.
    Delivered(String),
    /// Begun before and never confirmed: a crash cut the post off; do not post it again.
    Interrupted,
}

impl Store {
    /// Decide, and record, whether the chunk with `idempotency_key` may be posted now.
    pub async fn send_begin(
        &self,
        idempotency_key: &str,
        now_ms: i64,
    ) -> Result<SendStart, StoreError> {
        let (start, _) = self
            .send_begin_charging(idempotency_key, now_ms, Vec::new())
            .await?;
        Ok(start)
    }

    /// [`Store::send_begin`], recording `usage` (the run's model calls not recorded yet) in the
    /// same job: returns their ids too.
    pub async fn send_begin_charging(
        &self,
        idempotency_key: &str,
        now_ms: i64,
        usage: Vec<NewUsage>,
    ) -> Result<(SendStart, Vec<i64>), StoreError> {
        let key = idempotency_key.to_owned();
        self.write(move |db| {
            let ids = super::usage::insert(db, &usage)?;
            let delivered: Option<Option<String>> = db
                .query_row(
                    "SELECT platform_message_id FROM transcript WHERE idempotency_key = ?1",
                    args![&key],
                    |row| row.get(0),
                )
                .optional()?;
            if let Some(id) = delivered {
                return Ok((SendStart::Delivered(id.unwrap_or_default()), ids));
            }
            let begun = db.execute(
                "INSERT INTO sends (key, begun_ms) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                args![&key, now_ms],
            )?;
            let start = if begun == 1 {
                SendStart::Go
            } else {
                SendStart::Interrupted
            };
            Ok((start, ids))
        })
        .await
    }
}

impl Store {
    /// Give a delivered post its final text: a streamed reply's post is recorded when it is
    /// first made (so a crash leaves it on record and never posted again) and edited after.
    pub async fn revise_delivered(
        &self,
        idempotency_key: &str,
        text: &str,
    ) -> Result<(), StoreError> {
        let text = text.to_owned();
        self.edit_delivered(idempotency_key, move |db, key| {
            db.execute(
                "UPDATE transcript SET text = ?2 WHERE idempotency_key = ?1",
                args![key, &text],
            )?;
            Ok(())
        })
        .await
    }

    /// A delivered post was deleted again (a streamed draft the finished reply did not need):
    /// its entry stays, keyed as before (a replay never posts it again), but as a notice that
    /// says why, so it is no longer read back to the model as something the bot said.
    pub async fn withdraw_delivered(
        &self,
        idempotency_key: &str,
        why: &str,
    ) -> Result<(), StoreError> {
        let why = why.to_owned();
        self.edit_delivered(idempotency_key, move |db, key| {
            let meta: Option<String> = db
                .query_row(
                    "SELECT meta FROM transcript WHERE idempotency_key = ?1",
                    args![key],
                    |row| row.get(0),
                )
                .optional()?;
            let Some(meta) = meta else {
                return Ok(());
            };
            db.execute(
                "UPDATE transcript SET kind = ?2, meta = ?3 WHERE idempotency_key = ?1",
                args![
                    key,
                    EntryKind::Notice.as_str(),
                    with_deleted(&meta, &why).as_str()
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// Runs `edit` on the delivered entry keyed `idempotency_key` in one job. An edit in place
    /// is what a kept copy of the session's tail cannot see (`tail_cache.rs`), so the copy is
    /// forgotten as the job runs.
    async fn edit_delivered(
        &self,
        idempotency_key: &str,
        mut edit: impl FnMut(Db<'_>, &str) -> Result<(), DbError> + Send + 'static,
    ) -> Result<(), StoreError> {
        let key = idempotency_key.to_owned();
        let Some(tails) = self.tails() else {
            return self.write(move |db| edit(db, &key)).await;
        };
        self.write(move |db| {
            let session: Option<String> = db
                .query_row(
                    "SELECT session FROM transcript WHERE idempotency_key = ?1",
                    args![&key],
                    |row| row.get(0),
                )
                .optional()?;
            if let Some(session) = &session {
                tails.forget(session);
            }
            edit(db, &key)
        })
        .await
    }
}

/// `meta` with `deleted: why` set: in an object, added; meta that is not JSON becomes
/// `{"deleted": why}`; any other JSON value (null, an array) is kept as it is.
fn with_deleted(meta: &str, why: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(meta) {
        Ok(serde_json::Value::Object(mut fields)) => {
            fields.insert("deleted".into(), why.into());
            serde_json::Value::Object(fields).to_string()
        }
        Ok(_) => meta.to_owned(),
        Err(_) => serde_json::json!({ "deleted": why }).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;
    use crate::store::{NewEntry, Origin};

    #[test]
    fn deleted_is_set_in_an_object_or_in_place_of_what_is_not_json() {
        assert_eq!(
            with_deleted(r#"{"a":1}"#, "why"),
            r#"{"a":1,"deleted":"why"}"#
        );
        assert_eq!(with_deleted("not json", "why"), r#"{"deleted":"why"}"#);
        assert_eq!(with_deleted("null", "why"), "null");
    }

    #[tokio::test]
    async fn go_once_then_interrupted_until_delivered() {
        for db in testing::engines().await {
            let store = db.open().await;
            assert_eq!(store.send_begin("run#0", 1).await.unwrap(), SendStart::Go);
            assert_eq!(
                store.send_begin("run#0", 2).await.unwrap(),
                SendStart::Interrupted,
                "begun and never confirmed"
            );
            let chunk = NewEntry {
                session: crate::session::test_key("s"),
                ts_ms: 3,
                kind: EntryKind::Reply,
                speaker: "bot".into(),
                origin: Origin::Bot,
                text: "hello".into(),
                platform_message_id: Some("1712.0001".into()),
                run_id: Some("run".into()),
                idempotency_key: Some("run#0".into()),
                meta: serde_json::Value::Null,
            };
            store.append(chunk).await.unwrap();
            assert_eq!(
                store.send_begin("run#0", 4).await.unwrap(),
                SendStart::Delivered("1712.0001".into())
            );
            assert_eq!(store.send_begin("run#1", 5).await.unwrap(), SendStart::Go);
        }
    }

    #[tokio::test]
    async fn expired_begins_are_purged() {
        for db in testing::engines().await {
            let store = db.open().await;
            store.send_begin("old#0", 0).await.unwrap();
            store
                .purge_expired(crate::store::DEDUPE_TTL_MS + 1)
                .await
                .unwrap();
            assert_eq!(store.send_begin("old#0", 1).await.unwrap(), SendStart::Go);
        }
    }
}
