//! A new chain: its row, its opening note, and the anchor its posts answer.

use super::rows::{Note, new_id, normalize, note, written};
use super::{BATON, Chain, ChainEntryKind, NewChain};
use crate::bot_id::{BotId, names};
use crate::store::sql::args;
use crate::store::{Store, StoreError};

impl Store {
    /// Records a new open chain with a fresh id, its coordinator holding the turn on this
    /// instance, and an opening note. Returns it once committed.
    pub async fn create_chain(&self, new: NewChain, now_ms: i64) -> Result<Chain, StoreError> {
        let participants = serde_json::json!(new.participants).to_string();
        let me = self.instance();
        self.write(move |db| {
            let o = &new.origin;
            // A taken id is drawn again; the insert itself decides, so two instances sharing
            // the database cannot both take one.
            let id = loop {
                let id = new_id();
                let inserted = db.execute(
                    "INSERT INTO chains (id, name, coordinator, holder, participants, state,
                        origin_platform, origin_chat, origin_thread, origin_anchor,
                        origin_account, started_by, created_ms, runner, trigger_id)
                     VALUES (?1, ?2, ?3, ?3, ?4, 'open', ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,
                        COALESCE(?13, ?1))
                     ON CONFLICT (id) DO NOTHING",
                    args![
                        &id,
                        &new.name,
                        new.coordinator.as_ref(),
                        &participants,
                        o.platform.as_str(),
                        &o.chat,
                        &o.thread,
                        &o.anchor,
                        &o.account,
                        &new.started_by,
                        now_ms,
                        &*me,
                        &new.trigger,
                    ],
                )?;
                if inserted == 1 {
                    break id;
                }
            };
            let content = format!(
                "chain \"{}\" started by {}; coordinator {}; participants: {}",
                new.name,
                new.started_by,
                new.coordinator.as_ref().map_or(BATON, BotId::as_str),
                if new.participants.is_empty() {
                    "none yet".to_owned()
                } else {
                    names(&new.participants)
                }
            );
            let opening = Note {
                turn: 0,
                sender: BATON,
                kind: ChainEntryKind::System,
                content: &content,
                recipient: None,
            };
            note(db, &id, opening, now_ms)?;
            written(db, &id)
        })
        .await
    }

    /// Remember the message a chain's posts answer (its announcement, when it had none).
    pub async fn chain_anchor(&self, id: &str, anchor: &str) -> Result<(), StoreError> {
        let (id, anchor) = (normalize(id), anchor.to_owned());
        self.write(move |db| {
            db.execute(
                "UPDATE chains SET origin_anchor = ?2 WHERE id = ?1",
                args![&id, &anchor],
            )?;
            Ok(())
        })
        .await
    }
}
