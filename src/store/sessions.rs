//! Sessions: one row per bot per chat (per thread), with when it was last active and where
//! the model's view of its transcript starts.
//!
//! A reset (`/new`) does not delete anything: it moves the session's `reset_after` cursor to its
//! current last entry, so the transcript stays whole for people and the model starts afresh.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::sql::{Db, DbError, OptionalRow, Row, args};
use super::{Store, StoreError};
use crate::bot_id::BotId;
use crate::session::SessionKey;

/// A stored session, for `baton sessions` and `sessions_list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionRecord {
    /// Session key.
    pub key: SessionKey,
    /// Bot id.
    pub bot: BotId,
    /// Platform name.
    pub platform: String,
    /// Account id.
    pub account: String,
    /// Chat id.
    pub chat: String,
    /// Thread id, if thread-level.
    pub thread: Option<String>,
    /// First seen, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// Last activity, milliseconds since the Unix epoch.
    pub updated_ms: i64,
    /// How many transcript entries it has (all of them, resets included).
    pub entries: i64,
}

const SELECT_SESSIONS: &str = "SELECT key, bot, platform, account, chat, thread, created_ms,
        updated_ms, (SELECT count(*) FROM transcript t WHERE t.session = s.key)
     FROM sessions s";

fn session_from_row(row: &Row<'_>) -> Result<SessionRecord, DbError> {
    Ok(SessionRecord {
        key: session_column(row, 0)?,
        bot: row.get(1)?,
        platform: row.get(2)?,
        account: row.get(3)?,
        chat: row.get(4)?,
        thread: row.get(5)?,
        created_ms: row.get(6)?,
        updated_ms: row.get(7)?,
        entries: row.get(8)?,
    })
}

/// Reads the session key in column `idx` of `row`, whose column 0 is the row's id. A key that
/// does not parse is an error naming the row and the column: flows get typed keys or a reason,
/// never a row silently left out.
pub(super) fn session_column<'r>(
    row: impl Into<Row<'r>>,
    idx: usize,
) -> Result<SessionKey, DbError> {
    let row = row.into();
    let text: String = row.get(idx)?;
    parse_session(&row, idx, text)
}

/// [`session_column`] for a column that may be NULL.
pub(super) fn optional_session_column<'r>(
    row: impl Into<Row<'r>>,
    idx: usize,
) -> Result<Option<SessionKey>, DbError> {
    let row = row.into();
    let text: Option<String> = row.get(idx)?;
    text.map(|text| parse_session(&row, idx, text)).transpose()
}

fn parse_session(row: &Row<'_>, idx: usize, text: String) -> Result<SessionKey, DbError> {
    text.parse().map_err(|err| {
        let id: String = row.get(0).unwrap_or_default();
        let column = row.column_name(idx);
        DbError::Column {
            idx,
            why: format!("row `{id}`, column `{column}`: {err}"),
        }
    })
}

/// How far `updated_ms` must move before a touch writes it: a session's activity is shown
/// and pruned by the second or the day, and a busy session is touched at every turn. An
/// unchanged row dirties no page of the table or of its index on `updated_ms`, each of which a
/// commit writes to the log whole (BENCHMARKS.md, issue 23).
const TOUCH_STEP_MS: i64 = 1000;

/// The sessions this process's touches wrote lately, with the `updated_ms` each wrote, so that
/// a touch within [`TOUCH_STEP_MS`] of it runs no statement at all: the look-up alone (an
/// upsert that finds its row and leaves it) was 12k instructions of the writer's at every
/// turn's start (BENCHMARKS.md, issue 23). A write is noted once its job has committed, so a
/// session whose row a rolled-back batch did not create is never taken as written. A row goes
/// only with a prune of sessions idle for a day or more, long after its note stopped counting.
#[derive(Debug, Default)]
pub(crate) struct Touched {
    wrote: Mutex<HashMap<String, i64>>,
}

/// Notes kept before they all go (as the history trims' counts do): a bound on memory. A
/// session whose note went is only touched once more.
const NOTED_SESSIONS: usize = 4096;

impl Touched {
    fn wrote(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.wrote.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `session` (rendered) was written by a touch no more than [`TOUCH_STEP_MS`]
    /// before `now_ms`: a touch then would not move it.
    pub(crate) fn fresh(&self, session: &str, now_ms: i64) -> bool {
        self.wrote()
            .get(session)
            .is_some_and(|&at| now_ms < at + TOUCH_STEP_MS)
    }

    /// Note that a committed touch wrote `session` (rendered) at `at_ms`.
    pub(crate) fn note(&self, session: &str, at_ms: i64) {
        let mut wrote = self.wrote();
        if wrote.len() >= NOTED_SESSIONS && !wrote.contains_key(session) {
            wrote.clear();
        }
        let at = wrote.entry(session.to_owned()).or_insert(at_ms);
        *at = (*at).max(at_ms);
    }
}

/// [`Store::touch_session`] inside a writer job: shared with [`Store::turn_start`], which
/// records the session in the job that records the turn's inbound message. Returns whether it
/// ran: `false` when `touched` says a touch wrote it lately (note it with [`Touched::note`]
/// once the job has committed, when it ran).
pub(super) fn touch_unless_fresh(
    db: Db<'_>,
    touched: &Touched,
    s: &SessionKey,
    rendered: &str,
    now_ms: i64,
) -> Result<bool, DbError> {
    if touched.fresh(rendered, now_ms) {
        return Ok(false);
    }
    touch(db, s, rendered, now_ms)?;
    Ok(true)
}

/// The session's row created, or its `updated_ms` moved forward by [`TOUCH_STEP_MS`] or more.
fn touch(db: Db<'_>, s: &SessionKey, rendered: &str, now_ms: i64) -> Result<(), DbError> {
    db.execute_pipelined(
        "INSERT INTO sessions (key, bot, platform, account, chat, thread, created_ms,
            updated_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)
         ON CONFLICT (key) DO UPDATE SET updated_ms = excluded.updated_ms
            WHERE excluded.updated_ms >= sessions.updated_ms + ?8",
        args![
            rendered,
            s.bot.as_str(),
            s.platform.as_str(),
            s.account.as_str(),
            s.chat.as_str(),
            s.thread.as_ref().map(|t| t.as_str()),
            now_ms,
            TOUCH_STEP_MS,
        ],
    )?;
    Ok(())
}

impl Store {
    /// Records activity in `session`: creates it on first use, otherwise moves `updated_ms`
    /// forward once it is a second or more behind (never back, so a late write cannot
    /// make a busy session look idle).
    pub async fn touch_session(&self, session: &SessionKey, now_ms: i64) -> Result<(), StoreError> {
        let (s, rendered) = (session.clone(), session.render());
        let touched = Arc::clone(self.touched());
        let note = Arc::clone(&touched);
        let key = rendered.clone();
        let work = move |db: Db<'_>| touch_unless_fresh(db, &touched, &s, &rendered, now_ms);
        self.write_then(work, move |&ran| {
            if ran {
                note.note(&key, now_ms);
            }
        })
        .await
        .map(drop)
    }

    /// Every session, most recently updated first.
    pub async fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        self.read(|db| {
            db.query_map(
                &format!("{SELECT_SESSIONS} ORDER BY updated_ms DESC, key"),
                &[],
                session_from_row,
            )
        })
        .await
    }

    /// One session by key.
    pub async fn session(&self, key: &SessionKey) -> Result<Option<SessionRecord>, StoreError> {
        let key = key.render();
        self.read(move |db| {
            db.query_row(
                &format!("{SELECT_SESSIONS} WHERE key = ?1"),
                args![&key],
                session_from_row,
            )
            .optional()
        })
        .await
    }

    /// Start a new conversation in matching sessions: the model's view (TranscriptQuery::since_reset) starts after the current last entry. The transcript keeps everything. `bot: None` = every bot. Returns how many sessions were reset.
    ///
    /// Matches on platform and chat, so the chat's thread sessions are reset too.
    pub async fn reset_sessions(
        &self,
        platform: &str,
        chat: &str,
        bot: Option<&BotId>,
    ) -> Result<usize, StoreError> {
        let (platform, chat, bot) = (platform.to_owned(), chat.to_owned(), bot.cloned());
        self.write(move |db| {
            // The newest entry past the current cursor, if there is one; else it stays.
            db.execute(
                "UPDATE sessions SET reset_after = coalesce(
                    (SELECT max(id) FROM transcript t
                     WHERE t.session = sessions.key AND t.id > sessions.reset_after),
                    reset_after)
                 WHERE platform = ?1 AND chat = ?2 AND bot = coalesce(?3, bot)",
                args![&platform, &chat, bot.as_ref()],
            )
        })
        .await
    }
}

/// Session `session`'s reset point: the transcript id its current conversation starts after
/// (0 before its first reset).
pub(super) fn reset_point(db: Db<'_>, session: &str) -> Result<i64, DbError> {
    db.query_row(
        "SELECT coalesce((SELECT reset_after FROM sessions WHERE key = ?1), 0)",
        args![session],
        |row| row.get(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::TranscriptQuery;
    use crate::store::testing;
    use crate::store::transcript::tests::entry;

    fn session(bot: &str, chat: &str, thread: Option<&str>) -> SessionKey {
        SessionKey {
            bot: bot.parse().unwrap(),
            platform: baton_contract::Platform::Slack,
            account: bot.into(),
            chat: chat.into(),
            thread: thread.map(Into::into),
        }
    }

    /// A touch noted is fresh for a step, then runs again; past the bound, the notes start
    /// over.
    #[test]
    fn a_noted_touch_is_fresh_for_one_step() {
        let touched = Touched::default();
        assert!(!touched.fresh("s", 1_000), "never written");
        touched.note("s", 1_000);
        assert!(touched.fresh("s", 1_999));
        assert!(!touched.fresh("s", 2_000), "a step later it moves the row");
        touched.note("s", 500);
        assert!(
            touched.fresh("s", 1_999),
            "a late note does not move it back"
        );
        for n in 0..NOTED_SESSIONS {
            touched.note(&format!("old {n}"), 0);
        }
        touched.note("new", 5_000);
        let wrote = touched.wrote();
        assert!(wrote.len() <= 2, "the notes started over: {}", wrote.len());
        assert!(wrote.contains_key("new") && !wrote.contains_key("s"));
    }

    #[tokio::test]
    async fn touch_creates_then_bumps_and_lists_newest_first() {
        for db in testing::engines().await {
            let store = db.open().await;
            let a = session("snark", "C1", None);
            let b = session("caid", "C1", Some("171.1"));
            store.touch_session(&a, 100).await.unwrap();
            store.touch_session(&b, 2_000).await.unwrap();
            store.touch_session(&a, 3_000).await.unwrap();
            store.touch_session(&a, 2_500).await.unwrap(); // late: ignored
            store.touch_session(&a, 3_999).await.unwrap(); // within the step: not written
            store.append(entry(&a, "hi")).await.unwrap();
            store.close().await.unwrap();

            let store = db.open().await;
            let all = store.sessions().await.unwrap();
            assert_eq!(
                all.iter().map(|s| s.key.clone()).collect::<Vec<_>>(),
                [a.clone(), b]
            );
            let rec = store.session(&a).await.unwrap().unwrap();
            assert_eq!(
                (rec.created_ms, rec.updated_ms, rec.entries),
                (100, 3_000, 1)
            );
            assert_eq!(all[1].thread.as_deref(), Some("171.1"));
            let unknown = session("nope", "C1", None);
            assert_eq!(store.session(&unknown).await.unwrap(), None);
        }
    }

    #[tokio::test]
    async fn reset_hides_old_entries_only_from_since_reset_queries() {
        for db in testing::engines().await {
            let store = db.open().await;
            let snark = session("snark", "C1", None);
            let caid = session("caid", "C1", None);
            let other = session("snark", "C2", None);
            for s in [&snark, &caid, &other] {
                store.touch_session(s, 1).await.unwrap();
                store.append(entry(s, "old")).await.unwrap();
            }

            assert_eq!(
                store
                    .reset_sessions("slack", "C1", Some(&"snark".parse().unwrap()))
                    .await
                    .unwrap(),
                1
            );
            store.append(entry(&snark, "new")).await.unwrap();

            let view = |key: &SessionKey, since_reset| TranscriptQuery {
                since_reset,
                ..TranscriptQuery::session(key.clone())
            };
            let texts =
                |v: Vec<crate::store::Entry>| v.into_iter().map(|e| e.text).collect::<Vec<_>>();
            assert_eq!(
                texts(store.transcript(view(&snark, true)).await.unwrap()),
                ["new"]
            );
            assert_eq!(
                texts(store.transcript(view(&snark, false)).await.unwrap()),
                ["old", "new"]
            );
            // Other bot in the chat, and the same bot elsewhere, keep their context.
            assert_eq!(
                texts(store.transcript(view(&caid, true)).await.unwrap()),
                ["old"]
            );
            assert_eq!(
                texts(store.transcript(view(&other, true)).await.unwrap()),
                ["old"]
            );

            // Every bot in the chat.
            assert_eq!(store.reset_sessions("slack", "C1", None).await.unwrap(), 2);
            assert!(
                store
                    .transcript(view(&caid, true))
                    .await
                    .unwrap()
                    .is_empty()
            );
            assert!(
                store
                    .transcript(view(&snark, true))
                    .await
                    .unwrap()
                    .is_empty()
            );
            assert_eq!(store.reset_sessions("slack", "C9", None).await.unwrap(), 0);
        }
    }
}
