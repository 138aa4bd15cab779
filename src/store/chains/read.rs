//! Reading chains back: one by id, the open ones of a chat, a chain's log.

use super::rows::{SELECT, by_id, chain_from_row, entry_from_row, normalize};
use super::{Chain, ChainEntry};
use crate::store::sql::args;
use crate::store::{Store, StoreError};

impl Store {
    /// One chain.
    pub async fn chain(&self, id: &str) -> Result<Option<Chain>, StoreError> {
        let id = normalize(id);
        self.read(move |db| by_id(db, &id)).await
    }

    /// Chains, newest first: all of them, or only the open ones started in one chat.
    pub async fn chains(&self, query: ChainQuery) -> Result<Vec<Chain>, StoreError> {
        let limit = query.limit.unwrap_or(usize::MAX);
        let (platform, chat) = query.open_in.unzip();
        self.read(move |db| {
            // The first `limit` rows are taken here rather than with `LIMIT ?` (`query_take`).
            db.query_take(
                &format!(
                    "{SELECT} WHERE CAST(?1 AS TEXT) IS NULL
                        OR (state = 'open' AND origin_platform = ?1 AND origin_chat = ?2)
                     ORDER BY created_ms DESC, id"
                ),
                args![&platform, &chat],
                limit,
                chain_from_row,
            )
        })
        .await
    }

    /// A chain's log, oldest first.
    pub async fn chain_entries(&self, id: &str) -> Result<Vec<ChainEntry>, StoreError> {
        let id = normalize(id);
        self.read(move |db| {
            db.query_map(
                "SELECT id, chain, turn, sender, kind, content, recipient, ts_ms
                 FROM chain_messages WHERE chain = ?1 ORDER BY id",
                args![&id],
                entry_from_row,
            )
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
