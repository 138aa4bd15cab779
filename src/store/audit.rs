//! The audit log: every admin command, who ran it where, and what became of it.
//!
//! Admin commands change how bots behave in a chat; when someone asks "who paused the bot?",
//! the answer is here.

use serde::Serialize;

use super::sql::args;
use super::{Store, StoreError};

/// An admin command to record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewAudit {
    /// When it was run, milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// Platform name.
    pub platform: String,
    /// Chat id it was run in.
    pub chat: String,
    /// Platform user id of who ran it.
    pub user: String,
    /// The command as typed.
    pub command: String,
    /// What happened (`ok`, `refused: not an admin`, an error).
    pub outcome: String,
}

/// A recorded admin command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    /// Increasing record id.
    pub id: i64,
    /// When it was run, milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// Platform name.
    pub platform: String,
    /// Chat id.
    pub chat: String,
    /// Who ran it.
    pub user: String,
    /// The command as typed.
    pub command: String,
    /// What happened.
    pub outcome: String,
}

impl Store {
    /// Records an admin command, once committed.
    pub async fn audit(&self, record: NewAudit) -> Result<(), StoreError> {
        // `user` is quoted: PostgreSQL reserves the word.
        self.write(move |db| {
            db.execute(
                "INSERT INTO audit (ts_ms, platform, chat, \"user\", command, outcome)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                args![
                    record.ts_ms,
                    &record.platform,
                    &record.chat,
                    &record.user,
                    &record.command,
                    &record.outcome,
                ],
            )?;
            Ok(())
        })
        .await
    }

    /// The newest `limit` records, newest first.
    pub async fn audit_log(&self, limit: usize) -> Result<Vec<AuditRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(move |db| {
            db.query_map(
                "SELECT id, ts_ms, platform, chat, \"user\", command, outcome FROM audit
                 ORDER BY id DESC LIMIT ?1",
                args![limit],
                |r| {
                    Ok(AuditRecord {
                        id: r.get(0)?,
                        ts_ms: r.get(1)?,
                        platform: r.get(2)?,
                        chat: r.get(3)?,
                        user: r.get(4)?,
                        command: r.get(5)?,
                        outcome: r.get(6)?,
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
    async fn newest_first_and_limited() {
        for db in testing::engines().await {
            let store = db.open().await;
            for (i, cmd) in ["/pause", "/resume", "/activation always"]
                .iter()
                .enumerate()
            {
                store
                    .audit(NewAudit {
                        ts_ms: i as i64,
                        platform: "slack".into(),
                        chat: "C1".into(),
                        user: "U0ADMIN".into(),
                        command: (*cmd).into(),
                        outcome: "ok".into(),
                    })
                    .await
                    .unwrap();
            }
            let log = store.audit_log(2).await.unwrap();
            let cmds: Vec<_> = log.iter().map(|r| r.command.as_str()).collect();
            assert_eq!(cmds, ["/activation always", "/resume"]);
            assert!(log[0].id > log[1].id);
            assert_eq!((log[0].ts_ms, log[0].user.as_str()), (2, "U0ADMIN"));
            assert_eq!(store.audit_log(10).await.unwrap().len(), 3);
        }
    }
}
