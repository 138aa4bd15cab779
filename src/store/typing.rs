//! Typing indicators that are up, so a crash cannot leave one up for good: a row is written
//! before an indicator is put up, given the platform's handle once it is up, and deleted once it
//! is taken away. Rows left at start belong to indicators a kill cut off (see
//! `engine/typing.rs`).

use super::sql::args;
use super::{Store, StoreError};

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
}

impl Store {
    /// Record that `typing` (its `id` is ignored) is about to be put up; returns its row.
    pub async fn typing_opened(&self, typing: OpenTyping, now_ms: i64) -> Result<i64, StoreError> {
        self.write(move |db| {
            db.query_row(
                "INSERT INTO typing_open (platform, account, chat, thread, message, handle, since_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 RETURNING id",
                args![
                    &typing.platform,
                    &typing.account,
                    &typing.chat,
                    &typing.thread,
                    &typing.message,
                    &typing.handle,
                    now_ms,
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
            db.execute("DELETE FROM typing_open WHERE id = ?1", args![id])?;
            Ok(())
        })
        .await
    }

    /// Every indicator on record as up, oldest first.
    pub async fn typing_left(&self) -> Result<Vec<OpenTyping>, StoreError> {
        self.read(|db| {
            db.query_map(
                "SELECT id, platform, account, chat, thread, message, handle
                 FROM typing_open ORDER BY id",
                &[],
                |row| {
                    Ok(OpenTyping {
                        id: row.get(0)?,
                        platform: row.get(1)?,
                        account: row.get(2)?,
                        chat: row.get(3)?,
                        thread: row.get(4)?,
                        message: row.get(5)?,
                        handle: row.get(6)?,
                    })
                },
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    #[tokio::test]
    async fn an_indicator_is_on_record_from_before_it_is_up_until_it_is_gone() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let typing = OpenTyping {
                id: 0,
                platform: "feishu".into(),
                account: "snark".into(),
                chat: "oc_1".into(),
                thread: None,
                message: "om_1".into(),
                handle: None,
            };
            let id = store.typing_opened(typing.clone(), 1).await.unwrap();
            let second = store.typing_opened(typing.clone(), 2).await.unwrap();
            assert_ne!(id, second, "{engine}: each indicator has its row");
            store.typing_up(id, Some("r1".into())).await.unwrap();
            store.typing_closed(second).await.unwrap();
            let left = store.typing_left().await.unwrap();
            let expected = OpenTyping {
                id,
                handle: Some("r1".into()),
                ..typing
            };
            assert_eq!(left, [expected], "{engine}");
            store.typing_closed(id).await.unwrap();
            assert!(store.typing_left().await.unwrap().is_empty(), "{engine}");
        }
    }
}
