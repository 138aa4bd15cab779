//! A new chain: its row, its opening note, and the anchor its posts answer.

use super::rows::{Note, by_id, new_id, normalize, note};
use super::{BATON, Chain, ChainEntryKind, NewChain};
use crate::store::{Store, StoreError};

impl Store {
    /// Records a new open chain with a fresh id, its coordinator holding the turn, and an
    /// opening note. Returns it once committed.
    pub async fn create_chain(&self, new: NewChain, now_ms: i64) -> Result<Chain, StoreError> {
        self.sqlite_write(move |conn| {
            let id = new_id(conn)?;
            let participants = serde_json::to_string(&new.participants)
                .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
            let o = &new.origin;
            conn.prepare_cached(
                "INSERT INTO chains (id, name, coordinator, holder, participants, state,
                    origin_platform, origin_chat, origin_thread, origin_anchor, origin_account,
                    started_by, created_ms)
                 VALUES (?1, ?2, ?3, ?3, ?4, 'open', ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(rusqlite::params![
                id,
                new.name,
                new.coordinator,
                participants,
                o.platform.as_str(),
                o.chat,
                o.thread,
                o.anchor,
                o.account,
                new.started_by,
                now_ms,
            ])?;
            let content = format!(
                "chain \"{}\" started by {}; coordinator {}; participants: {}",
                new.name,
                new.started_by,
                new.coordinator.as_deref().unwrap_or(BATON),
                if new.participants.is_empty() {
                    "none yet".to_owned()
                } else {
                    new.participants.join(", ")
                }
            );
            let opening = Note {
                turn: 0,
                sender: BATON,
                kind: ChainEntryKind::System,
                content: &content,
                recipient: None,
            };
            note(conn, &id, opening, now_ms)?;
            by_id(conn, &id)?.ok_or(rusqlite::Error::QueryReturnedNoRows)
        })
        .await
    }

    /// Remember the message a chain's posts answer (its announcement, when it had none).
    pub async fn chain_anchor(&self, id: &str, anchor: &str) -> Result<(), StoreError> {
        let (id, anchor) = (normalize(id), anchor.to_owned());
        self.sqlite_write(move |conn| {
            conn.prepare_cached("UPDATE chains SET origin_anchor = ?2 WHERE id = ?1")?
                .execute((&id, &anchor))?;
            Ok(())
        })
        .await
    }
}
