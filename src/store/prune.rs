//! Deleting old rows ([`Store::prune`]): `[retention]` hourly in `baton run`, and `baton prune`.
//!
//! Transcripts are kept by design; this is the operator's choice, table by table. Each rule
//! deletes only what no live flow can still need:
//!
//! - nothing younger than [`MIN_AGE_MS`] (the dedupe window) goes, whatever the date asked for:
//!   a replayed event or a retried send recognises itself by rows that young;
//! - deliveries still queued or running, or whose outcome is still to be pushed to the sender
//!   (`notify = pending`), stay;
//! - open chains stay, and a closed chain goes with its messages, by when it closed;
//! - usage rows (what model calls spent) go by when the call was made;
//! - pairing: only requests never approved go (an approval is a standing grant, not a log);
//! - history: a chat's buffer and its bots' cursors go together, once its newest message is
//!   older than the date (a chat quiet that long);
//! - artifacts made by a delivery still queued or running stay; a blob goes with the last
//!   artifact naming it;
//! - escalations: only settled ones (answered, approved, denied, failed), by when they settled;
//!   a pending question or approval stays however old;
//! - sessions: a session idle since before the date goes whole, its transcript first, then its
//!   row (a later message starts it afresh), unless something still waits on it: a pending
//!   escalation it asked or was asked in, or a delivery to or from it that is queued, running
//!   or still to be pushed back.
//!
//! The inbox, dedupe keys and posts begun (`sends`) are not touched here: the inbox empties as
//! events finish, and the others expire by their own clock (`dedupe.rs`). Rows go in chunks of
//! [`CHUNK`], one writer job each, so live writes interleave with a large prune instead of
//! waiting behind it. On SQLite each chunk's commit also lets the writer keep the WAL under its
//! bound between chunks (`checkpoint.rs`). PostgreSQL runs the same statements; it has no WAL
//! for baton to checkpoint: the deleted rows are reclaimed by its autovacuum and their space
//! reused (the files do not shrink), so there the chunks only keep live writes moving.

use super::sql::{Db, DbError, args};
use super::{DEDUPE_TTL_MS, Store, StoreError};

/// The youngest a row may be and still be pruned, in milliseconds.
pub const MIN_AGE_MS: i64 = DEDUPE_TTL_MS;

/// Rows (or, for history, chats) deleted per writer job.
const CHUNK: i64 = 2000;

/// A table `[retention]` and `baton prune` can prune.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PruneTable {
    /// Transcript entries, by when they were written, and the pipeline's decisions on the
    /// messages they hold (`baton why`), by when they were made.
    Transcripts,
    /// Admin command audit rows, by when the command ran.
    Audit,
    /// Settled bot-to-bot deliveries, by when they were sent.
    Deliveries,
    /// Closed chains and their messages, by when they closed.
    Chains,
    /// Pairing requests never approved, by when they were made.
    Pairing,
    /// History buffers and cursors of chats whose newest message is older than the date.
    History,
    /// Artifacts, by when they were made (their bytes go with the last artifact naming them).
    Artifacts,
    /// Settled escalations, by when they settled.
    Escalations,
    /// Sessions idle since before the date, with their transcripts.
    Sessions,
    /// Model calls' usage rows, by when the call was made (a budget's window older than the
    /// date then counts less), but for the newest row.
    Usage,
}

impl PruneTable {
    /// Every table, in the order they are pruned.
    pub const ALL: [PruneTable; 10] = [
        PruneTable::Transcripts,
        PruneTable::Audit,
        PruneTable::Deliveries,
        PruneTable::Chains,
        PruneTable::Pairing,
        PruneTable::History,
        PruneTable::Artifacts,
        PruneTable::Escalations,
        PruneTable::Sessions,
        PruneTable::Usage,
    ];

    /// The name used in config keys, on the command line and in logs.
    pub fn as_str(self) -> &'static str {
        match self {
            PruneTable::Transcripts => "transcripts",
            PruneTable::Audit => "audit",
            PruneTable::Deliveries => "deliveries",
            PruneTable::Chains => "chains",
            PruneTable::Pairing => "pairing",
            PruneTable::History => "history",
            PruneTable::Artifacts => "artifacts",
            PruneTable::Escalations => "escalations",
            PruneTable::Sessions => "sessions",
            PruneTable::Usage => "usage",
        }
    }

    /// Whether it deletes transcript entries: those of an idle session go with it.
    fn deletes_entries(self) -> bool {
        matches!(self, PruneTable::Transcripts | PruneTable::Sessions)
    }

    /// Deletes one chunk of rows older than `before` (ms); returns how many rows went.
    fn delete_chunk(self, db: Db<'_>, before: i64) -> Result<usize, DbError> {
        let sql = match self {
            PruneTable::Transcripts => return delete_entries_and_decisions(db, before),
            PruneTable::Audit => {
                "DELETE FROM audit WHERE id IN
                    (SELECT id FROM audit WHERE ts_ms < ?1 ORDER BY id LIMIT ?2)"
            }
            PruneTable::Deliveries => {
                "DELETE FROM deliveries WHERE run_id IN
                    (SELECT run_id FROM deliveries
                     WHERE created_ms < ?1 AND state NOT IN ('queued', 'running')
                       AND notify <> 'pending'
                     LIMIT ?2)"
            }
            PruneTable::Pairing => {
                "DELETE FROM pairing WHERE code IN
                    (SELECT code FROM pairing WHERE approved = 0 AND created_ms < ?1 LIMIT ?2)"
            }
            PruneTable::Escalations => {
                "DELETE FROM escalations WHERE id IN
                    (SELECT id FROM escalations
                     WHERE state <> 'pending' AND coalesce(resolved_ms, created_ms) < ?1
                     LIMIT ?2)"
            }
            PruneTable::Usage => {
                // The newest row stays, so ids never start again from 1 (SQLite reuses the
                // largest id once it is gone): budget tallies count rows by id.
                "DELETE FROM usage WHERE id IN
                    (SELECT id FROM usage WHERE ts_ms < ?1 AND id < (SELECT MAX(id) FROM usage)
                     ORDER BY id LIMIT ?2)"
            }
            PruneTable::Chains => return delete_closed_chains(db, before),
            PruneTable::History => return delete_idle_history(db, before),
            PruneTable::Artifacts => return super::artifacts::prune_artifacts(db, before, CHUNK),
            PruneTable::Sessions => return delete_idle_sessions(db, before),
        };
        db.execute(sql, args![before, CHUNK])
    }
}

/// Transcript entries, then the pipeline's decisions (`decisions.rs`) they explain and the
/// room's messages: kept as long as the transcript.
///
/// Every event writes a decision and a room message, so neither table has an index on its time
/// (schema 35): a chunk is the table's oldest [`CHUNK`] rows by id, of which those older than
/// `before` go. Rows are written in about the order of their time, so this takes what a
/// search by time would; a row older than rows written before it (an event delivered late)
/// goes with its chunk, or once it is among the oldest [`CHUNK`]; never a younger row.
fn delete_entries_and_decisions(db: Db<'_>, before: i64) -> Result<usize, DbError> {
    let entries = db.execute(
        "DELETE FROM transcript WHERE id IN
            (SELECT id FROM transcript WHERE ts_ms < ?1 ORDER BY id LIMIT ?2)",
        args![before, CHUNK],
    )?;
    if entries > 0 {
        return Ok(entries);
    }
    let decisions = db.execute(
        "DELETE FROM decisions WHERE ts_ms < ?1 AND id IN
            (SELECT id FROM decisions ORDER BY id LIMIT ?2)",
        args![before, CHUNK],
    )?;
    if decisions > 0 {
        return Ok(decisions);
    }
    db.execute(
        "DELETE FROM room_messages WHERE ts_ms < ?1 AND id IN
            (SELECT id FROM room_messages ORDER BY id LIMIT ?2)",
        args![before, CHUNK],
    )
}

/// A chain's messages reference it, so they go first, for the same chains.
fn delete_closed_chains(db: Db<'_>, before: i64) -> Result<usize, DbError> {
    let ids: Vec<String> = db.query_map(
        "SELECT id FROM chains
         WHERE state <> 'open' AND coalesce(closed_ms, created_ms) < ?1 LIMIT ?2",
        args![before, CHUNK],
        |row| row.get(0),
    )?;
    let mut deleted = 0;
    for id in &ids {
        deleted += db.execute("DELETE FROM chain_messages WHERE chain = ?1", args![id])?;
        deleted += db.execute("DELETE FROM chains WHERE id = ?1", args![id])?;
    }
    Ok(deleted)
}

/// A cursor only says which history rows a bot has seen; with its chat's rows gone it says
/// nothing (row ids are never reused), so it goes too.
fn delete_idle_history(db: Db<'_>, before: i64) -> Result<usize, DbError> {
    let rows = db.execute(
        "DELETE FROM history WHERE chat_key IN
            (SELECT chat_key FROM history GROUP BY chat_key HAVING max(ts_ms) < ?1 LIMIT ?2)",
        args![before, CHUNK],
    )?;
    let cursors = db.execute(
        "DELETE FROM history_cursors
         WHERE chat_key NOT IN (SELECT DISTINCT chat_key FROM history)",
        &[],
    )?;
    Ok(rows + cursors)
}

/// The condition on session `s` (of the `sessions` table) for it to go: idle since before
/// `?1`, and nothing waits on it. The sessions still awaited are listed once per statement.
macro_rules! idle_session {
    () => {
        "s.updated_ms < ?1 AND s.key NOT IN (
            SELECT session FROM escalations WHERE state = 'pending'
            UNION SELECT origin FROM escalations WHERE state = 'pending'
            UNION SELECT sender_session FROM deliveries
                WHERE state IN ('queued', 'running') OR notify = 'pending'
            UNION SELECT target_session FROM deliveries
                WHERE state IN ('queued', 'running') OR notify = 'pending')"
    };
}

/// An idle session's transcript goes first, [`CHUNK`] entries a job; its row goes once the
/// transcript is empty. Only entries older than the date go, so a session that wakes up during
/// a long prune keeps what it says now, and its row (now not idle) stays.
fn delete_idle_sessions(db: Db<'_>, before: i64) -> Result<usize, DbError> {
    let entries = db.execute(
        concat!(
            "DELETE FROM transcript WHERE id IN
                (SELECT t.id FROM sessions s JOIN transcript t ON t.session = s.key
                 WHERE t.ts_ms < ?1 AND ",
            idle_session!(),
            " LIMIT ?2)"
        ),
        args![before, CHUNK],
    )?;
    if entries > 0 {
        return Ok(entries);
    }
    db.execute(
        concat!(
            "DELETE FROM sessions WHERE key IN
                (SELECT s.key FROM sessions s
                 WHERE NOT EXISTS (SELECT 1 FROM transcript t WHERE t.session = s.key) AND ",
            idle_session!(),
            " LIMIT ?2)"
        ),
        args![before, CHUNK],
    )
}

impl Store {
    /// Deletes `table`'s rows older than `before_ms` that no live flow needs (see the module
    /// doc), never any younger than [`MIN_AGE_MS`] before `now_ms`. Returns how many rows went.
    pub async fn prune(
        &self,
        table: PruneTable,
        before_ms: i64,
        now_ms: i64,
    ) -> Result<u64, StoreError> {
        let before = before_ms.min(now_ms - MIN_AGE_MS);
        let mut total = 0;
        loop {
            let deleted = match self.tails().filter(|_| table.deletes_entries()) {
                // Kept copies of session tails do not check for deleted entries
                // (`tail_cache.rs`): they are all forgotten as each chunk's job runs. Prunes
                // are rare; turns read whole again.
                Some(tails) => {
                    let work = move |db: Db<'_>| {
                        tails.clear();
                        table.delete_chunk(db, before)
                    };
                    self.write(work).await?
                }
                None => self.write(move |db| table.delete_chunk(db, before)).await?,
            };
            if deleted == 0 {
                return Ok(total);
            }
            total += deleted as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    const DAY: i64 = 24 * 60 * 60 * 1000;
    const NOW: i64 = 400 * DAY;

    async fn count(store: &Store, sql: &'static str) -> i64 {
        store
            .read(move |db| db.query_row(sql, &[], |r| r.get(0)))
            .await
            .unwrap()
    }

    async fn exec(store: &Store, sql: &'static str) {
        store.write(move |db| db.execute_batch(sql)).await.unwrap();
    }

    /// Inserts `n` audit rows written at `ts_ms`.
    fn audit_rows(db: Db<'_>, ts_ms: i64, n: i64) -> Result<(), DbError> {
        for _ in 0..n {
            db.execute(
                "INSERT INTO audit (ts_ms, platform, chat, \"user\", command, outcome)
                 VALUES (?1, 'cli', '-', 'u', 'c', 'ok')",
                args![ts_ms],
            )?;
        }
        Ok(())
    }

    #[tokio::test]
    async fn nothing_younger_than_the_dedupe_window_goes_whatever_the_date() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            // One row an hour old, one two days old.
            store
                .write(|db| {
                    audit_rows(db, NOW - DAY / 24, 1)?;
                    audit_rows(db, NOW - 2 * DAY, 1)
                })
                .await
                .unwrap();
            let gone = store.prune(PruneTable::Audit, NOW, NOW).await.unwrap();
            assert_eq!(gone, 1, "{engine}");
            assert_eq!(
                count(&store, "SELECT count(*) FROM audit").await,
                1,
                "{engine}"
            );
        }
    }

    #[tokio::test]
    async fn live_deliveries_open_chains_and_approved_pairings_stay() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            exec(
                &store,
                "INSERT INTO deliveries (run_id, sender, sender_session, target, target_session,
                     message, depth, mode, state, notify, created_ms) VALUES
                 ('done', 'a', 's', 'b', 't', 'm', 1, 'wait', 'delivered', 'none', 1000),
                 ('queued', 'a', 's', 'b', 't', 'm', 1, 'wait', 'queued', 'none', 1000),
                 ('running', 'a', 's', 'b', 't', 'm', 1, 'wait', 'running', 'none', 1000),
                 ('notify', 'a', 's', 'b', 't', 'm', 1, 'fire', 'delivered', 'pending', 1000);
                 INSERT INTO chains (id, name, participants, state, origin_platform, origin_chat,
                     origin_account, started_by, created_ms, closed_ms) VALUES
                 ('closed', 'n', '[]', 'completed', 'local', 'c', 'a', 'u', 1000, 2000),
                 ('open', 'n', '[]', 'open', 'local', 'c', 'a', 'u', 1000, NULL);
                 INSERT INTO chain_messages (chain, turn, sender, kind, content, ts_ms) VALUES
                 ('closed', 1, 'a', 'post', 'x', 1500), ('open', 1, 'a', 'post', 'y', 1500);
                 INSERT INTO pairing (platform, \"user\", code, approved, created_ms) VALUES
                 ('slack', 'old', 'AAAA', 0, 1000), ('slack', 'friend', 'BBBB', 1, 1000);",
            )
            .await;
            let p = |t| store.prune(t, NOW, NOW);
            assert_eq!(p(PruneTable::Deliveries).await.unwrap(), 1, "{engine}");
            assert_eq!(
                p(PruneTable::Chains).await.unwrap(),
                2,
                "{engine}: a chain and its message"
            );
            assert_eq!(p(PruneTable::Pairing).await.unwrap(), 1, "{engine}");
            let left = |sql| count(&store, sql);
            assert_eq!(
                left("SELECT count(*) FROM deliveries WHERE run_id <> 'done'").await,
                3,
                "{engine}"
            );
            assert_eq!(left("SELECT count(*) FROM deliveries").await, 3, "{engine}");
            assert_eq!(
                left("SELECT count(*) FROM chains WHERE id = 'open'").await,
                1,
                "{engine}"
            );
            assert_eq!(
                left("SELECT count(*) FROM chain_messages").await,
                1,
                "{engine}"
            );
            assert_eq!(
                left("SELECT count(*) FROM pairing WHERE \"user\" = 'friend'").await,
                1,
                "{engine}"
            );
            assert_eq!(left("SELECT count(*) FROM pairing").await, 1, "{engine}");
        }
    }

    /// Decisions and room messages have no index on their time (schema 35): of the oldest rows
    /// by id, those older than the date go, a late one written after a younger one too; the
    /// younger ones stay.
    #[tokio::test]
    async fn decisions_and_room_messages_go_oldest_first_never_a_younger_one() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            exec(
                &store,
                "INSERT INTO decisions (ts_ms, platform, account, bot, chat, message_id,
                     sender, step, outcome, reason) VALUES
                 (1000, 'slack', 'a', 'b', 'c', 'm1', 'u', 'turn', 'replied', ''),
                 (2000, 'slack', 'a', 'b', 'c', 'm2', 'u', 'turn', 'replied', ''),
                 (34473600000, 'slack', 'a', 'b', 'c', 'm3', 'u', 'turn', 'replied', ''),
                 (3000, 'slack', 'a', 'b', 'c', 'm4', 'u', 'turn', 'replied', '');
                 INSERT INTO room_messages (ts_ms, room, chat, message_id, author,
                     author_name, origin, text) VALUES
                 (1000, 'r', 'c', 'm1', 'u', 'U', 'human', 'old'),
                 (34473600000, 'r', 'c', 'm3', 'u', 'U', 'human', 'new'),
                 (3000, 'r', 'c', 'm4', 'u', 'U', 'human', 'late');",
            )
            .await;
            let gone = store
                .prune(PruneTable::Transcripts, NOW - 7 * DAY, NOW)
                .await
                .unwrap();
            assert_eq!(gone, 5, "{engine}: all but m3's decision and message");
            let left = |sql| count(&store, sql);
            let young = "SELECT count(*) FROM decisions WHERE message_id = 'm3'";
            assert_eq!(left(young).await, 1, "{engine}");
            assert_eq!(left("SELECT count(*) FROM decisions").await, 1, "{engine}");
            let young = "SELECT count(*) FROM room_messages WHERE message_id = 'm3'";
            assert_eq!(left(young).await, 1, "{engine}");
            assert_eq!(
                left("SELECT count(*) FROM room_messages").await,
                1,
                "{engine}"
            );
            if engine == "sqlite" {
                let time_indexes = "SELECT count(*) FROM sqlite_master
                     WHERE name IN ('decisions_ts', 'room_messages_ts')";
                assert_eq!(left(time_indexes).await, 0, "no index on their time");
            }
        }
    }

    #[tokio::test]
    async fn idle_chats_lose_history_and_cursors_busy_ones_keep_them() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            exec(
                &store,
                "INSERT INTO history (chat_key, message_id, sender_id, speaker, text, ts_ms) VALUES
                 ('quiet', 'm1', 'u', 'u', 'old', 1000),
                 ('busy', 'm2', 'u', 'u', 'old', 1000),
                 ('busy', 'm3', 'u', 'u', 'new', 34473600000);
                 INSERT INTO history_cursors (chat_key, bot, last_id) VALUES
                 ('quiet', 'b', 1), ('busy', 'b', 2);",
            )
            .await;
            let gone = store
                .prune(PruneTable::History, NOW - 7 * DAY, NOW)
                .await
                .unwrap();
            assert_eq!(gone, 2, "{engine}: the quiet chat's row and cursor");
            assert_eq!(
                count(
                    &store,
                    "SELECT count(*) FROM history WHERE chat_key = 'busy'"
                )
                .await,
                2,
                "{engine}: a busy chat keeps even its old rows (history_limit bounds it)"
            );
            assert_eq!(
                count(&store, "SELECT count(*) FROM history_cursors").await,
                1,
                "{engine}"
            );
        }
    }

    #[tokio::test]
    async fn settled_escalations_go_by_when_they_settled_pending_ones_never() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            exec(
                &store,
                "INSERT INTO escalations (id, kind, bot, session, origin, origin_bot,
                     origin_platform, origin_account, origin_chat, chat_key, text, state,
                     created_ms, resolved_ms) VALUES
                 ('q-answered', 'question', 'a', 's', 'o', 'a', 'local', 'a', 'c', 'local:c', 't',
                     'answered', 1000, 2000),
                 ('ap-denied', 'approval', 'a', 's', 'o', 'a', 'local', 'a', 'c', 'local:c', 't',
                     'denied', 1000, 2000),
                 ('q-failed', 'question', 'a', 's', 'o', 'a', 'local', 'a', 'c', 'local:c', 't',
                     'failed', 1000, NULL),
                 ('q-pending', 'question', 'a', 's', 'o', 'a', 'local', 'a', 'c', 'local:c', 't',
                     'pending', 1000, NULL),
                 ('ap-late', 'approval', 'a', 's', 'o', 'a', 'local', 'a', 'c', 'local:c', 't',
                     'approved', 1000, 34473600000);",
            )
            .await;
            let gone = store
                .prune(PruneTable::Escalations, NOW - 30 * DAY, NOW)
                .await
                .unwrap();
            assert_eq!(gone, 3, "{engine}: answered, denied and failed long ago");
            let left: Vec<String> = store
                .read(|db| {
                    db.query_map("SELECT id FROM escalations ORDER BY id", &[], |r| r.get(0))
                })
                .await
                .unwrap();
            assert_eq!(
                left,
                ["ap-late", "q-pending"],
                "{engine}: a pending one however old, and one settled yesterday though asked \
                 long ago"
            );
        }
    }

    #[tokio::test]
    async fn idle_sessions_go_with_their_transcripts_unless_something_waits_on_them() {
        for db in testing::engines().await {
            idle_sessions_go_on(db.open().await, db.engine()).await;
        }
    }

    async fn idle_sessions_go_on(store: Store, engine: &str) {
        let old = 1000;
        let recent = 399 * DAY;
        store
            .write(move |db| {
                for (key, updated) in [
                    ("idle", old),
                    ("busy", recent),
                    ("asker", old),
                    ("asked-in", old),
                    ("sender", old),
                    ("to-notify", old),
                    ("settled", old),
                ] {
                    db.execute(
                        "INSERT INTO sessions (key, bot, platform, account, chat, created_ms,
                             updated_ms) VALUES (?1, 'a', 'local', 'a', ?1, ?2, ?2)",
                        args![key, updated],
                    )?;
                }
                let entry = |key: &str| {
                    db.execute(
                        "INSERT INTO transcript (session, ts_ms, kind, speaker, origin, text)
                         VALUES (?1, ?2, 'inbound', 'u', 'human', 'x')",
                        args![key, old],
                    )
                };
                // More entries than one job deletes, for the idle session.
                for _ in 0..=CHUNK {
                    entry("idle")?;
                }
                for key in [
                    "busy",
                    "asker",
                    "asked-in",
                    "sender",
                    "to-notify",
                    "settled",
                ] {
                    entry(key)?;
                }
                db.execute_batch(
                    "INSERT INTO escalations (id, kind, bot, session, origin, origin_bot,
                         origin_platform, origin_account, origin_chat, chat_key, text, state,
                         created_ms) VALUES
                     ('q-1', 'question', 'a', 'asker', 'asked-in', 'a', 'local', 'a', 'c',
                         'local:c', 't', 'pending', 1000),
                     ('q-2', 'question', 'a', 'settled', 'settled', 'a', 'local', 'a', 'c',
                         'local:c', 't', 'answered', 1000);
                     INSERT INTO deliveries (run_id, sender, sender_session, target,
                         target_session, message, depth, mode, state, notify, created_ms) VALUES
                     ('r1', 'a', 'sender', 'b', 'elsewhere', 'm', 1, 'wait', 'running', 'none',
                         1000),
                     ('r2', 'a', 'elsewhere', 'b', 'to-notify', 'm', 1, 'fire', 'delivered',
                         'pending', 1000),
                     ('r3', 'a', 'settled', 'b', 'settled', 'm', 1, 'wait', 'delivered', 'done',
                         1000);",
                )
            })
            .await
            .unwrap();
        let before = store.commits();
        let gone = store
            .prune(PruneTable::Sessions, NOW - 30 * DAY, NOW)
            .await
            .unwrap();
        assert_eq!(
            gone,
            (CHUNK + 1) as u64 + 1 + 2,
            "{engine}: the idle session's entries and row, the settled one's entry and row"
        );
        assert!(
            store.commits() - before >= 3,
            "{engine}: entries in chunks, then rows"
        );
        let left: Vec<(String, i64)> = store
            .read(|db| {
                db.query_map(
                    "SELECT key, (SELECT count(*) FROM transcript t WHERE t.session = s.key)
                     FROM sessions s ORDER BY key",
                    &[],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
            })
            .await
            .unwrap();
        let left: Vec<(&str, i64)> = left.iter().map(|(k, n)| (k.as_str(), *n)).collect();
        assert_eq!(
            left,
            [
                ("asked-in", 1),
                ("asker", 1),
                ("busy", 1),
                ("sender", 1),
                ("to-notify", 1),
            ],
            "{engine}: a busy session keeps even its old entries; awaited ones stay whole"
        );
        assert_eq!(
            count(&store, "SELECT count(*) FROM transcript").await,
            5,
            "{engine}"
        );
    }

    #[tokio::test]
    async fn a_large_prune_goes_in_chunks() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            store
                .write(|db| audit_rows(db, 1000, 2 * CHUNK + 5))
                .await
                .unwrap();
            let before = store.commits();
            let gone = store.prune(PruneTable::Audit, NOW, NOW).await.unwrap();
            assert_eq!(gone, (2 * CHUNK + 5) as u64, "{engine}");
            assert!(
                store.commits() - before >= 3,
                "{engine}: one commit per chunk"
            );
        }
    }
}
