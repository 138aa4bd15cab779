//! Reading chains back: one by id, the open ones of a chat, a chain's log.

use super::rows::{SELECT, by_id, chain_from_row, entry_from_row, normalize};
use super::{Chain, ChainEntry};
use crate::store::{Store, StoreError};

impl Store {
    /// One chain.
    pub async fn chain(&self, id: &str) -> Result<Option<Chain>, StoreError> {
        let id = normalize(id);
        self.sqlite_read(move |conn| by_id(conn, &id)).await
    }

    /// Chains, newest first: all of them, or only the open ones started in one chat.
    pub async fn chains(&self, query: ChainQuery) -> Result<Vec<Chain>, StoreError> {
        let limit = i64::try_from(query.limit.unwrap_or(usize::MAX)).unwrap_or(i64::MAX);
        let (platform, chat) = query.open_in.unzip();
        self.sqlite_read(move |conn| {
            conn.prepare_cached(&format!(
                "{SELECT} WHERE ?1 IS NULL
                    OR (state = 'open' AND origin_platform = ?1 AND origin_chat = ?2)
                 ORDER BY created_ms DESC, id LIMIT ?3"
            ))?
            .query_map(rusqlite::params![platform, chat, limit], chain_from_row)?
            .collect()
        })
        .await
    }

    /// A chain's log, oldest first.
    pub async fn chain_entries(&self, id: &str) -> Result<Vec<ChainEntry>, StoreError> {
        let id = normalize(id);
        self.sqlite_read(move |conn| {
            conn.prepare_cached(
                "SELECT id, chain, turn, sender, kind, content, recipient, ts_ms
                 FROM chain_messages WHERE chain = ?1 ORDER BY id",
            )?
            .query_map([&id], entry_from_row)?
            .collect()
        })
        .await
    }
}

/// Which chains to list ([`Store::chains`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChainQuery {
    /// Only the open chains started in this chat: (platform, chat id).
    pub open_in: Option<(String, String)>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
}
