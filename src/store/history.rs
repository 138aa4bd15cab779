//! The history buffer: per chat, the messages that did not wake a bot, given
//! to a bot as context on its next turn, then cleared *for that bot*.
//!
//! One buffer per chat is shared by every bot in it; each bot has its own cursor (the id of the
//! last entry it was given), so one bot taking its context does not clear another's. The buffer
//! keeps the newest `limit` entries, trimmed back to them every [`TRIM_EVERY`] pushes (see
//! [`Trims`]). Both survive restarts.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;

use super::sql::{Db, DbError, args};
use super::{Store, StoreError};
use baton_contract::ChatKey;

use crate::bot_id::BotId;

/// A message kept as context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryEntry {
    /// Platform message id (one message is stored once per chat, whichever bot saw it).
    pub message_id: String,
    /// Platform user id of the sender.
    pub sender_id: String,
    /// Display name of the sender, as the model should see it.
    pub speaker: String,
    /// The message text.
    pub text: String,
    /// When it was sent, milliseconds since the Unix epoch.
    pub ts_ms: i64,
}

/// What [`Store::history_take`] should return and for whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryTake<'a> {
    /// The chat's buffer.
    pub chat_key: &'a ChatKey,
    /// The bot taking its context (whose cursor moves).
    pub bot: &'a BotId,
    /// Leave out messages from this sender (the bot's own account: it knows what it said).
    pub skip_sender: Option<&'a str>,
    /// Leave out this message (the one that woke the bot, given to it separately).
    pub skip_message: Option<&'a str>,
    /// At most this many entries (the newest ones).
    pub limit: usize,
}

impl Store {
    /// Keep `entry` in the chat's buffer, which keeps the newest `limit` entries (trimmed back
    /// to them every [`TRIM_EVERY`] pushes). The same message_id pushed twice for one chat_key
    /// is stored once (several bot accounts see the same message).
    pub async fn history_push(
        &self,
        chat_key: &ChatKey,
        entry: HistoryEntry,
        limit: usize,
    ) -> Result<(), StoreError> {
        let trim = self.trim_due(chat_key, limit);
        let chat_key = chat_key.as_str().to_owned();
        self.write(move |db| push(db, &chat_key, &entry, trim))
            .await
    }

    /// Entries the bot has not been given yet (newer than its cursor), at most `take.limit` (the newest ones), oldest first, skipping entries whose sender_id == take.skip_sender and whose message_id == take.skip_message; then moves the bot's cursor past every current entry (durably).
    ///
    /// The two skip rules apply independently: an entry is left out if it is from
    /// `skip_sender`, and the entry `skip_message` is left out whoever sent it. Skipped and
    /// over-the-limit entries are passed over for good, like the ones returned.
    pub async fn history_take(
        &self,
        take: HistoryTake<'_>,
    ) -> Result<Vec<HistoryEntry>, StoreError> {
        let owned = OwnedTake::of(take);
        self.write(move |db| take_in(db, &owned)).await
    }
}

/// A [`HistoryTake`] that owns its strings, to be moved into a writer job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct OwnedTake {
    chat_key: String,
    bot: BotId,
    skip_sender: Option<String>,
    skip_message: Option<String>,
    limit: usize,
}

impl OwnedTake {
    pub(super) fn of(take: HistoryTake<'_>) -> Self {
        OwnedTake {
            chat_key: take.chat_key.as_str().to_owned(),
            bot: take.bot.clone(),
            skip_sender: take.skip_sender.map(str::to_owned),
            skip_message: take.skip_message.map(str::to_owned),
            limit: take.limit,
        }
    }
}

/// [`Store::history_take`] inside a writer job: shared with [`Store::turn_start`], which takes
/// a turn's history in the job that records its inbound message.
pub(super) fn take_in(db: Db<'_>, take: &OwnedTake) -> Result<Vec<HistoryEntry>, DbError> {
    let cursor: i64 = db.query_row(
        "SELECT coalesce(
                (SELECT last_id FROM history_cursors WHERE chat_key = ?1 AND bot = ?2), 0)",
        args![&take.chat_key, &take.bot],
        |row| row.get(0),
    )?;
    // Not `LIMIT ?` (`query_take`). The casts type a parameter PostgreSQL would
    // otherwise meet first where it cannot tell its type.
    let mut entries = db.query_take(
        "SELECT message_id, sender_id, speaker, text, ts_ms FROM history
             WHERE chat_key = ?1 AND id > ?2
               AND (CAST(?3 AS TEXT) IS NULL OR sender_id IS DISTINCT FROM ?3)
               AND (CAST(?4 AS TEXT) IS NULL OR message_id IS DISTINCT FROM ?4)
             ORDER BY id DESC",
        args![
            &take.chat_key,
            cursor,
            &take.skip_sender,
            &take.skip_message
        ],
        take.limit,
        |row| {
            Ok(HistoryEntry {
                message_id: row.get(0)?,
                sender_id: row.get(1)?,
                speaker: row.get(2)?,
                text: row.get(3)?,
                ts_ms: row.get(4)?,
            })
        },
    )?;
    entries.reverse();
    db.execute(
        "INSERT INTO history_cursors (chat_key, bot, last_id)
             SELECT ?1, ?2, newest FROM
                (SELECT max(id) AS newest FROM history WHERE chat_key = ?1 AND id > ?3)
                AS latest
             WHERE newest IS NOT NULL
             ON CONFLICT (chat_key, bot) DO UPDATE SET last_id = CASE
                WHEN excluded.last_id > history_cursors.last_id THEN excluded.last_id
                ELSE history_cursors.last_id END",
        args![&take.chat_key, &take.bot, cursor],
    )?;
    Ok(entries)
}

/// [`Store::history_push`] inside a writer job: shared with [`Store::inbox_done_as_history`],
/// which ends the event's run in the same job. Trims the buffer to `trim` entries when given
/// ([`Trims::due`]).
pub(super) fn push(
    db: Db<'_>,
    chat_key: &str,
    entry: &HistoryEntry,
    trim: Option<Trim>,
) -> Result<(), DbError> {
    db.execute_pipelined(
        "INSERT INTO history (chat_key, message_id, sender_id, speaker, text, ts_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (chat_key, message_id) DO NOTHING",
        args![
            chat_key,
            &entry.message_id,
            &entry.sender_id,
            &entry.speaker,
            &entry.text,
            entry.ts_ms,
        ],
    )?;
    if let Some(Trim(limit)) = trim {
        db.execute_pipelined(TRIM, args![chat_key, to_sql_limit(limit)])?;
    }
    Ok(())
}

/// How many pushes to a chat go between two trims of its buffer.
pub(crate) const TRIM_EVERY: u32 = 8;

/// At most this many chats' pushes are counted; past it the counts start over (each chat's next
/// push trims), so the map stays under ~1.5 MB however many chats there are.
const COUNTED_CHATS: usize = 16_384;

/// A buffer to be trimmed back to its newest this many entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Trim(pub(super) usize);

/// Which pushes trim their chat's buffer: the first to each chat after the store opens, then
/// every [`TRIM_EVERY`]th. A trim finds where to cut by stepping through the chat's newest
/// `limit` entries, which cost as much as the push itself and was a sixth of the store writer's
/// work under chatter (BENCHMARKS.md, issue 23). So a buffer holds at most
/// `limit + TRIM_EVERY - 1` entries, a few more if a push's write failed; a take still gives at
/// most its own `limit`, the newest. Pushes are counted in memory, per process, and decided
/// before the writer runs the push, so a push run twice (a batch run again) counts once.
#[derive(Debug, Default)]
pub(crate) struct Trims {
    pushes: Mutex<HashMap<String, u32>>,
}

impl Trims {
    /// Counts a push to `chat_key`; whether it is one that trims.
    pub(crate) fn due(&self, chat_key: &str) -> bool {
        let mut pushes = self.pushes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = pushes.get_mut(chat_key) {
            *count = (*count + 1) % TRIM_EVERY;
            return *count == 0;
        }
        if pushes.len() >= COUNTED_CHATS {
            pushes.clear();
        }
        pushes.insert(chat_key.to_owned(), 0);
        true
    }
}

impl Store {
    /// The trim a push of `chat_key`'s with buffer limit `limit` makes, if it is due.
    pub(super) fn trim_due(&self, chat_key: &ChatKey, limit: usize) -> Option<Trim> {
        self.history_trims()
            .due(chat_key.as_str())
            .then_some(Trim(limit))
    }
}

/// Keeps the newest `?2` entries of chat `?1`.
const TRIM: &str = "DELETE FROM history WHERE chat_key = ?1 AND id <= coalesce(
    (SELECT id FROM history WHERE chat_key = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2), 0)";

/// A `usize` count as an SQL `LIMIT`/`OFFSET` value.
fn to_sql_limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::Sqlite;
    use crate::store::testing;

    fn msg(id: &str, sender: &str) -> HistoryEntry {
        HistoryEntry {
            message_id: id.into(),
            sender_id: sender.into(),
            speaker: sender.to_lowercase(),
            text: format!("text of {id}"),
            ts_ms: 1,
        }
    }

    /// The chat every test pushes into (a `'static` key so [`take`] can lend it).
    static C1: std::sync::LazyLock<ChatKey> = std::sync::LazyLock::new(|| slack("C1"));

    fn slack(chat: &str) -> ChatKey {
        ChatKey::new(baton_contract::Platform::Slack, &chat.into(), None)
    }

    /// What `bot` takes (its parsed name leaked: a test's lifetime is the process's).
    fn take(bot: &str, limit: usize) -> HistoryTake<'static> {
        HistoryTake {
            chat_key: &C1,
            bot: Box::leak(Box::new(bot.parse().unwrap())),
            skip_sender: None,
            skip_message: None,
            limit,
        }
    }

    fn ids(entries: &[HistoryEntry]) -> Vec<&str> {
        entries.iter().map(|e| e.message_id.as_str()).collect()
    }

    /// Every push trims the buffer: its statement must stay prepared. SQLite re-plans a
    /// statement whose plan depends on a bound value (a bound `LIMIT` on a sorted query,
    /// BENCHMARKS.md), at ~140k instructions a time; the trim's `OFFSET ?2` is not one of them.
    /// The control query shows the counter does count.
    #[tokio::test]
    async fn the_trim_after_each_push_is_prepared_once() {
        let store = testing::TestDb::sqlite().open().await;
        let (trim, control) = store
            .sqlite_write(|conn| {
                let replan =
                    "SELECT text FROM history WHERE chat_key = ?1 ORDER BY id DESC LIMIT ?2";
                for n in 0..4 {
                    let entry = msg(&format!("m{n}"), "U1");
                    Sqlite::with(conn, |db| push(db, C1.as_str(), &entry, Some(Trim(2))))?;
                    let mut control = conn.prepare_cached(replan)?;
                    control
                        .query_map((C1.as_str(), 5), |r| r.get::<_, String>(0))?
                        .for_each(drop);
                }
                let trim = conn.prepare_cached(TRIM)?;
                let control = conn.prepare_cached(replan)?;
                let reprepared = rusqlite::StatementStatus::RePrepare;
                Ok((trim.get_status(reprepared), control.get_status(reprepared)))
            })
            .await
            .unwrap();
        assert!(control > 0, "the control query was never re-prepared");
        assert_eq!(trim, 0);
    }

    #[tokio::test]
    async fn keeps_the_newest_limit_entries_once_each() {
        for db in testing::engines().await {
            let store = db.open().await;
            for i in 1..=5 {
                store
                    .history_push(&C1, msg(&format!("m{i}"), "U1"), 3)
                    .await
                    .unwrap();
            }
            // Seen again by a second bot account: not stored twice, not moved.
            store.history_push(&C1, msg("m4", "U1"), 3).await.unwrap();
            store
                .history_push(&slack("C2"), msg("x1", "U1"), 3)
                .await
                .unwrap();
            let got = store.history_take(take("snark", 3)).await.unwrap();
            assert_eq!(ids(&got), ["m3", "m4", "m5"]);
            assert_eq!(got[0].text, "text of m3");
        }
    }

    async fn rows(store: &Store) -> i64 {
        store
            .read(|db| db.query_row("SELECT count(*) FROM history", &[], |r| r.get(0)))
            .await
            .unwrap()
    }

    /// The first push to a chat trims its buffer, then every `TRIM_EVERY`th: in between it
    /// grows past its limit by fewer than `TRIM_EVERY`.
    #[tokio::test]
    async fn the_buffer_is_trimmed_every_few_pushes() {
        let limit = 3;
        let every = TRIM_EVERY as i64;
        for db in testing::engines().await {
            let store = db.open().await;
            let mut most = 0;
            for i in 0..(4 * every) {
                let entry = msg(&format!("m{i}"), "U1");
                store.history_push(&C1, entry, limit).await.unwrap();
                let kept = rows(&store).await;
                let pushed = i + 1;
                if pushed % every == 1 {
                    assert_eq!(
                        kept,
                        pushed.min(limit as i64),
                        "{}: push {pushed}",
                        db.engine()
                    );
                }
                most = most.max(kept);
            }
            assert_eq!(most, limit as i64 + every - 1, "{}", db.engine());
        }
    }

    #[tokio::test]
    async fn cursors_are_per_bot_and_take_returns_only_new_entries() {
        for db in testing::engines().await {
            let store = db.open().await;
            store.history_push(&C1, msg("m1", "U1"), 50).await.unwrap();
            store.history_push(&C1, msg("m2", "U1"), 50).await.unwrap();
            assert_eq!(
                ids(&store.history_take(take("snark", 10)).await.unwrap()),
                ["m1", "m2"]
            );
            assert!(
                store
                    .history_take(take("snark", 10))
                    .await
                    .unwrap()
                    .is_empty()
            );

            store.history_push(&C1, msg("m3", "U1"), 50).await.unwrap();
            assert_eq!(
                ids(&store.history_take(take("snark", 10)).await.unwrap()),
                ["m3"]
            );
            // caid has taken nothing yet; it gets the newest `limit`, and then nothing.
            assert_eq!(
                ids(&store.history_take(take("caid", 2)).await.unwrap()),
                ["m2", "m3"]
            );
            assert!(
                store
                    .history_take(take("caid", 2))
                    .await
                    .unwrap()
                    .is_empty()
            );
        }
    }

    #[tokio::test]
    async fn skip_rules_leave_out_the_bots_own_messages_and_the_trigger() {
        for db in testing::engines().await {
            let store = db.open().await;
            for (id, sender) in [("m1", "U1"), ("m2", "BOT"), ("m3", "U2"), ("m4", "U1")] {
                store.history_push(&C1, msg(id, sender), 50).await.unwrap();
            }
            let got = store
                .history_take(HistoryTake {
                    skip_sender: Some("BOT"),
                    skip_message: Some("m4"),
                    ..take("snark", 10)
                })
                .await
                .unwrap();
            assert_eq!(ids(&got), ["m1", "m3"]);
            // The cursor moved past the skipped entries too.
            store.history_push(&C1, msg("m5", "U1"), 50).await.unwrap();
            assert_eq!(
                ids(&store.history_take(take("snark", 10)).await.unwrap()),
                ["m5"]
            );
        }
    }

    #[tokio::test]
    async fn buffer_and_cursors_survive_reopen() {
        for db in testing::engines().await {
            let store = db.open().await;
            store.history_push(&C1, msg("m1", "U1"), 50).await.unwrap();
            store.history_take(take("snark", 10)).await.unwrap();
            store.history_push(&C1, msg("m2", "U1"), 50).await.unwrap();
            store.close().await.unwrap();
            drop(store);

            let store = db.open().await;
            assert_eq!(
                ids(&store.history_take(take("snark", 10)).await.unwrap()),
                ["m2"]
            );
            assert_eq!(
                ids(&store.history_take(take("caid", 10)).await.unwrap()),
                ["m1", "m2"]
            );
        }
    }

    #[tokio::test]
    async fn trimming_to_zero_never_reuses_ids() {
        for db in testing::engines().await {
            let store = db.open().await;
            store.history_push(&C1, msg("m1", "U1"), 1).await.unwrap();
            store.history_take(take("snark", 10)).await.unwrap();
            // Pushes up to the next trim, which empties the buffer.
            for n in 1..=TRIM_EVERY {
                let entry = msg(&format!("x{n}"), "U1");
                store.history_push(&C1, entry, 0).await.unwrap();
            }
            assert_eq!(rows(&store).await, 0);
            store.history_push(&C1, msg("m3", "U1"), 1).await.unwrap();
            assert_eq!(
                ids(&store.history_take(take("snark", 10)).await.unwrap()),
                ["m3"]
            );
        }
    }
}
