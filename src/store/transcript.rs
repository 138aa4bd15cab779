//! The transcript: everything said in a session, in the order it happened.
//!
//! Entries are append-only and numbered by a global, never-reused id, so "after id N" is a
//! stable cursor for `--follow` and for the model's view after a reset. A delivered chunk
//! carries its idempotency key, which is how a replayed delivery finds out it already posted.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::entry_kind::{EntryKind, Origin};
use super::sessions::session_column;
use super::sql::{Db, DbError, Row, args};
use super::stored_name::parse_column;
use super::tail_cache::{Tail, TailCache, TailEntry};
use super::{NewUsage, Queued, Store, StoreError};
use crate::session::SessionKey;

/// An entry to append (the store assigns the id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewEntry {
    /// The session it is said in.
    pub session: SessionKey,
    /// When it happened, milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// What it records.
    pub kind: EntryKind,
    /// Who said it: a human id, a bot id, or `bot:<id>` for bot-origin messages.
    pub speaker: String,
    /// Human, bot or gateway.
    pub origin: Origin,
    /// The words (for tool calls: the call as text).
    pub text: String,
    /// The platform's id for the message, once known (inbound, or a delivered chunk).
    pub platform_message_id: Option<String>,
    /// The turn this belongs to, to correlate replies by run and not by position.
    pub run_id: Option<String>,
    /// For a delivered chunk: the key that makes redelivery a no-op. Unique across the store.
    pub idempotency_key: Option<String>,
    /// Anything else worth keeping (raw payload, model, timings).
    pub meta: serde_json::Value,
}

/// A stored entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Global, increasing, never reused: a cursor for "what came after".
    pub id: i64,
    /// The session it was said in.
    pub session: SessionKey,
    /// When it happened, milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// What it records.
    pub kind: EntryKind,
    /// Who said it.
    pub speaker: String,
    /// Human, bot or gateway.
    pub origin: Origin,
    /// The words.
    pub text: String,
    /// The platform's id for the message, if any.
    pub platform_message_id: Option<String>,
    /// The turn this belongs to, if any.
    pub run_id: Option<String>,
    /// The delivery idempotency key, if any.
    pub idempotency_key: Option<String>,
    /// Anything else recorded.
    pub meta: serde_json::Value,
}

impl Entry {
    /// The entry as one line for people: `HH:MM:SS speaker [kind]: text` (UTC), as
    /// `baton transcript` and `/baton transcript` print it.
    pub fn line(&self) -> String {
        let secs = self.ts_ms / 1000;
        let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
        let text = if self.text.is_empty() {
            "—"
        } else {
            &self.text
        };
        format!(
            "{h:02}:{m:02}:{s:02} {} [{}]: {text}",
            self.speaker,
            self.kind.as_str()
        )
    }
}

/// Which entries of a session to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptQuery {
    /// The session.
    pub session: SessionKey,
    /// Only entries with a greater id (for `--follow` and incremental reads).
    pub after_id: Option<i64>,
    /// Only the newest N, still returned oldest-first (the model's transcript tail).
    pub last: Option<usize>,
    /// Only entries after the session's last reset (what the model sees).
    pub since_reset: bool,
}

impl TranscriptQuery {
    /// The whole transcript of `session`.
    pub fn session(session: SessionKey) -> Self {
        TranscriptQuery {
            session,
            after_id: None,
            last: None,
            since_reset: false,
        }
    }
}

/// `entry`'s meta as stored.
pub(super) fn meta_json(entry: &NewEntry) -> Result<String, StoreError> {
    serde_json::to_string(&entry.meta)
        .map_err(|e| StoreError::Internal(format!("transcript meta is not JSON: {e}")))
}

/// [`Store::append`] inside a writer job: shared with [`Store::append_handing_over`], which
/// files the post's hand-overs in the same transaction. A new entry is added to its
/// session's kept tail (`tails`, where the writer keeps them), so the next turn's start need
/// not read it back.
pub(super) fn insert_entry(
    db: Db<'_>,
    entry: &NewEntry,
    meta: &str,
    tails: Option<&TailCache>,
) -> Result<i64, DbError> {
    let session = entry.session.render();
    let inserted = db.insert_id(
        "INSERT INTO transcript (session, ts_ms, kind, speaker, origin, text,
                platform_message_id, run_id, idempotency_key, meta)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING",
        args![
            session.as_str(),
            entry.ts_ms,
            entry.kind.as_str(),
            &entry.speaker,
            entry.origin.as_str(),
            &entry.text,
            &entry.platform_message_id,
            &entry.run_id,
            &entry.idempotency_key,
            meta,
        ],
    )?;
    match inserted {
        Some(id) => {
            if let Some(tails) = tails {
                tails.add(&session, id, || TailEntry {
                    kind: entry.kind,
                    text: entry.text.clone(),
                    run_id: entry.run_id.clone(),
                    name: match entry.kind {
                        EntryKind::Inbound => meta_name(meta),
                        _ => None,
                    },
                });
            }
            Ok(id)
        }
        None => db.query_row(
            "SELECT id FROM transcript WHERE idempotency_key = ?1",
            args![&entry.idempotency_key],
            |row| row.get(0),
        ),
    }
}

impl Store {
    /// Appends `entry` to its session's transcript and returns its id, once committed.
    ///
    /// An entry whose `idempotency_key` is already recorded is not written again: the id of the
    /// entry already holding the key is returned, so a replayed append is harmless. Give the key
    /// only to the entry that records a chunk actually delivered.
    pub async fn append(&self, entry: NewEntry) -> Result<i64, StoreError> {
        self.append_queued(entry).await?.answer().await
    }

    /// [`Store::append`], recording `usage` (the run's model calls not recorded yet) in the
    /// same job: returns their ids too.
    pub async fn append_charging(
        &self,
        entry: NewEntry,
        usage: Vec<NewUsage>,
    ) -> Result<(i64, Vec<i64>), StoreError> {
        let meta = meta_json(&entry)?;
        let tails = self.tails();
        self.write(move |db| {
            let ids = super::usage::insert(db, &usage)?;
            Ok((insert_entry(db, &entry, &meta, tails.as_deref())?, ids))
        })
        .await
    }

    /// [`Store::append`], returning once the entry has its place in the writer's queue: what
    /// the caller writes next is written after it.
    pub async fn append_queued(&self, entry: NewEntry) -> Result<Queued<i64>, StoreError> {
        let meta = meta_json(&entry)?;
        let tails = self.tails();
        self.queue(move |db| insert_entry(db, &entry, &meta, tails.as_deref()))
            .await
    }

    /// Reads entries of one session, always oldest-first.
    pub async fn transcript(&self, query: TranscriptQuery) -> Result<Vec<Entry>, StoreError> {
        self.read(move |db| {
            // The newest `last` rows are taken here rather than with `LIMIT ?` (`query_take`).
            let limit = query.last.unwrap_or(usize::MAX);
            let mut entries = db.query_take(
                "SELECT id, session, ts_ms, kind, speaker, origin, text,
                        platform_message_id, run_id, idempotency_key, meta
                 FROM transcript
                 WHERE session = ?1
                   AND id > ?2
                   AND id > CASE WHEN ?3
                        THEN coalesce((SELECT reset_after FROM sessions WHERE key = ?1), 0)
                        ELSE 0 END
                 ORDER BY id DESC",
                args![
                    query.session.render().as_str(),
                    query.after_id.unwrap_or(0),
                    query.since_reset,
                ],
                limit,
                entry_from_row,
            )?;
            entries.reverse();
            Ok(entries)
        })
        .await
    }

    /// Every session's entries with an id above `after_id`, oldest first, at most `limit`: an
    /// export (`baton transcript --all`) reads the whole store a page at a time.
    pub async fn transcript_page(
        &self,
        after_id: i64,
        limit: usize,
    ) -> Result<Vec<Entry>, StoreError> {
        self.read(move |db| {
            // Not `LIMIT ?`, for the reason given in `transcript`.
            db.query_take(
                "SELECT id, session, ts_ms, kind, speaker, origin, text,
                        platform_message_id, run_id, idempotency_key, meta
                 FROM transcript WHERE id > ?1 ORDER BY id",
                args![after_id],
                limit,
                entry_from_row,
            )
        })
        .await
    }

    /// The entries of one run in one session, oldest first: how a restart finds out whether a
    /// turn got as far as its outcome.
    pub async fn run_entries(
        &self,
        session: &SessionKey,
        run_id: &str,
    ) -> Result<Vec<Entry>, StoreError> {
        let (session, run_id) = (session.render(), run_id.to_owned());
        self.read(move |db| run_entries_in(db, &session, &run_id))
            .await
    }
}

/// [`Store::run_entries`] inside a read: `session` as rendered.
pub(super) fn run_entries_in(
    db: Db<'_>,
    session: &str,
    run_id: &str,
) -> Result<Vec<Entry>, DbError> {
    db.query_map(RUN_ENTRIES, args![session, run_id], entry_from_row)
}

/// A run's entries: found by walking the session's entries in `transcript_session`, which
/// carries each one's run id, so only the run's rows are read (schema version 21).
const RUN_ENTRIES: &str = "SELECT id, session, ts_ms, kind, speaker, origin, text,
        platform_message_id, run_id, idempotency_key, meta
    FROM transcript WHERE session = ?1 AND run_id = ?2 ORDER BY id";

/// The speaker's display name kept in an entry's meta (`meta.name`). Meta that is not JSON, or
/// a name that is not a string, is no name. Only that field is decoded: the rest is skipped.
fn meta_name(meta: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Named {
        name: Option<serde_json::Value>,
    }
    // Only an object has fields (serde would read an array positionally).
    if !meta.trim_start().starts_with('{') {
        return None;
    }
    match serde_json::from_str::<Named>(meta).ok()?.name? {
        serde_json::Value::String(name) => Some(name),
        _ => None,
    }
}

fn entry_from_row(row: &Row<'_>) -> Result<Entry, DbError> {
    let meta: String = row.get(10)?;
    Ok(Entry {
        id: row.get(0)?,
        session: session_column(row, 1)?,
        ts_ms: row.get(2)?,
        kind: parse_column(row, 3)?,
        speaker: row.get(4)?,
        origin: parse_column(row, 5)?,
        text: row.get(6)?,
        platform_message_id: row.get(7)?,
        run_id: row.get(8)?,
        idempotency_key: row.get(9)?,
        meta: serde_json::from_str(&meta).map_err(|e| row.column_error(10, e.to_string()))?,
    })
}

/// The newest `last` entries of `session` since its last reset, oldest first, in the slim form
/// a turn's context needs: what [`Store::transcript`] returns for a query with `last` and
/// `since_reset`, minus the columns the model never sees. Read inside the turn's start
/// ([`Store::turn_start`]), where the writer's pages are warm and no reader is woken for it.
/// Where the writer keeps copies of tails, [`tail_since`] reads only what is new instead.
pub(super) fn tail_in(
    db: Db<'_>,
    session: &str,
    last: usize,
) -> Result<Vec<Arc<TailEntry>>, DbError> {
    // Not `LIMIT ?`, for the reason given in `transcript`.
    let mut entries = db.query_take(
        "SELECT id, kind, text, run_id, meta
         FROM transcript
         WHERE session = ?1
           AND id > coalesce((SELECT reset_after FROM sessions WHERE key = ?1), 0)
         ORDER BY id DESC",
        args![session],
        last,
        |row| Ok(Arc::new(tail_row(row)?.1)),
    )?;
    entries.reverse();
    Ok(entries)
}

/// [`tail_in`] against `kept`, the copy of the session's tail the writer keeps
/// (`tail_cache.rs`): when the copy still holds, nothing is read if it has the session's newest
/// entry, and only the entries after it otherwise; without a copy that holds, the tail is read
/// whole. Returns the tail to keep as the next copy.
pub(super) fn tail_since(
    db: Db<'_>,
    session: &str,
    last: usize,
    kept: Option<Arc<Tail>>,
) -> Result<Arc<Tail>, DbError> {
    let (reset_after, newest): (i64, i64) = db.query_row(
        "SELECT coalesce((SELECT reset_after FROM sessions WHERE key = ?1), 0),
                coalesce((SELECT max(id) FROM transcript WHERE session = ?1), 0)",
        args![session],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?;
    let kept = kept.filter(|kept| kept.holds(last, reset_after));
    if let Some(kept) = kept.as_ref().filter(|kept| newest <= kept.newest()) {
        return Ok(Arc::clone(kept));
    }
    let after = kept.as_deref().map_or(reset_after, Tail::newest);
    let mut newer = db.query_take(
        "SELECT id, kind, text, run_id, meta FROM transcript
         WHERE session = ?1 AND id > ?2 ORDER BY id DESC",
        args![session, after],
        last,
        |row| tail_row(row).map(|(id, entry)| (id, Arc::new(entry))),
    )?;
    newer.reverse();
    Ok(Arc::new(match kept {
        Some(kept) => kept.extended(newer, last),
        None => Tail {
            reset_after,
            entries: newer,
            depth: last,
        },
    }))
}

/// A row of `id, kind, text, run_id, meta` as a tail entry and its id.
/// Only an inbound line's name is given to the model, so only its meta is decoded.
fn tail_row(row: &Row<'_>) -> Result<(i64, TailEntry), DbError> {
    let kind: EntryKind = parse_column(row, 1)?;
    let name = match kind {
        EntryKind::Inbound => meta_name(row.text(4)?),
        _ => None,
    };
    Ok((
        row.get(0)?,
        TailEntry {
            kind,
            text: row.get(2)?,
            run_id: row.get(3)?,
            name,
        },
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::session::test_key as key;
    use crate::store::testing;

    /// A plain inbound entry for tests.
    pub(crate) fn entry(session: &SessionKey, text: &str) -> NewEntry {
        NewEntry {
            session: session.clone(),
            ts_ms: 1_000,
            kind: EntryKind::Inbound,
            speaker: "U1".to_owned(),
            origin: Origin::Human,
            text: text.to_owned(),
            platform_message_id: None,
            run_id: None,
            idempotency_key: None,
            meta: serde_json::json!({}),
        }
    }

    fn texts(entries: &[Entry]) -> Vec<&str> {
        entries.iter().map(|e| e.text.as_str()).collect()
    }

    #[test]
    fn names_round_trip() {
        for &kind in EntryKind::ALL {
            assert_eq!(kind.as_str().parse::<EntryKind>(), Ok(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
        for &origin in Origin::ALL {
            assert_eq!(origin.as_str().parse::<Origin>(), Ok(origin));
            assert_eq!(serde_json::to_value(origin).unwrap(), origin.as_str());
        }
        assert!("toolcall".parse::<EntryKind>().is_err());
    }

    /// A run's entries are found in the session index, which carries run ids; the table's rows
    /// are read for the run's entries only, and a session's tail still reads the index in
    /// order.
    #[tokio::test]
    async fn a_run_and_a_tail_are_read_through_the_session_index() {
        let db = testing::TestDb::sqlite();
        let store = db.open().await;
        let plan = |sql: String| {
            store.sqlite_read(move |c| {
                let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
                let rows = stmt.query_map(["s", "r"], |r| r.get::<_, String>(3))?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
        };
        let run = plan(RUN_ENTRIES.to_owned()).await.unwrap().join("; ");
        assert_eq!(
            run,
            "SEARCH transcript USING INDEX transcript_session (session=?)"
        );
        let tail = "SELECT id FROM transcript WHERE session = ?1 AND id > ?2 ORDER BY id DESC";
        let tail = plan(tail.to_owned()).await.unwrap().join("; ");
        assert_eq!(
            tail,
            "SEARCH transcript USING COVERING INDEX transcript_session (session=? AND id>?)"
        );
    }

    #[tokio::test]
    async fn round_trips_every_field_and_reads_in_order() {
        for db in testing::engines().await {
            let store = db.open().await;
            let full = NewEntry {
                kind: EntryKind::ToolCall,
                origin: Origin::Bot,
                speaker: "bot:caid".into(),
                platform_message_id: Some("m1".into()),
                run_id: Some("r1".into()),
                idempotency_key: Some("k1".into()),
                meta: serde_json::json!({"raw": {"ts": "1.2"}}),
                ..entry(&key("s1"), "first")
            };
            let id1 = store.append(full.clone()).await.unwrap();
            let id2 = store.append(entry(&key("s2"), "elsewhere")).await.unwrap();
            let id3 = store.append(entry(&key("s1"), "second")).await.unwrap();
            assert!(id1 < id2 && id2 < id3);

            let all = store
                .transcript(TranscriptQuery::session(key("s1")))
                .await
                .unwrap();
            assert_eq!(texts(&all), ["first", "second"]);
            let e = &all[0];
            assert_eq!(e.id, id1);
            assert_eq!(
                (e.kind, e.origin, e.speaker.as_str()),
                (EntryKind::ToolCall, Origin::Bot, "bot:caid")
            );
            assert_eq!(e.meta, full.meta);
            assert_eq!(e.run_id.as_deref(), Some("r1"));

            let after = TranscriptQuery {
                after_id: Some(id1),
                ..TranscriptQuery::session(key("s1"))
            };
            assert_eq!(texts(&store.transcript(after).await.unwrap()), ["second"]);
        }
    }

    #[tokio::test]
    async fn last_n_are_the_newest_still_oldest_first() {
        for db in testing::engines().await {
            let store = db.open().await;
            for i in 0..5 {
                store
                    .append(entry(&key("s"), &i.to_string()))
                    .await
                    .unwrap();
            }
            let q = TranscriptQuery {
                last: Some(2),
                ..TranscriptQuery::session(key("s"))
            };
            assert_eq!(texts(&store.transcript(q).await.unwrap()), ["3", "4"]);
        }
    }

    #[tokio::test]
    async fn idempotency_key_records_a_delivery_once() {
        for db in testing::engines().await {
            let store = db.open().await;
            let chunk = NewEntry {
                kind: EntryKind::Reply,
                platform_message_id: Some("1712.0001".into()),
                idempotency_key: Some("k".into()),
                ..entry(&key("s"), "hello")
            };
            let id = store.append(chunk.clone()).await.unwrap();
            // Replayed: same id, nothing new written.
            assert_eq!(store.append(chunk).await.unwrap(), id);
            let all = store
                .transcript(TranscriptQuery::session(key("s")))
                .await
                .unwrap();
            assert_eq!(all.len(), 1);
            // Entries without a key never collide.
            store.append(entry(&key("s"), "a")).await.unwrap();
            store.append(entry(&key("s"), "b")).await.unwrap();
            assert_eq!(
                store
                    .transcript(TranscriptQuery::session(key("s")))
                    .await
                    .unwrap()
                    .len(),
                3
            );
        }
    }

    /// The tail a turn's start would give `session`'s next turn (it records nothing else).
    async fn tail(store: &Store, session: &SessionKey, last: usize) -> Vec<Arc<TailEntry>> {
        let start = crate::store::TurnStart {
            session,
            now_ms: 1,
            history: None,
            heard: None,
            tail: Some(last),
            delivery: None,
        };
        store.turn_start(start).await.unwrap().tail
    }

    #[tokio::test]
    async fn the_session_tail_is_the_transcript_tail_since_the_reset_in_slim_form() {
        for db in testing::engines().await {
            let store = db.open().await;
            let session: SessionKey = "bot:b:slack:a:C1".parse().unwrap();
            store.touch_session(&session, 1).await.unwrap();
            store
                .append(entry(&session, "before the reset"))
                .await
                .unwrap();
            store.reset_sessions("slack", "C1", None).await.unwrap();
            for i in 0..5 {
                let mut e = entry(&session, &format!("m{i}"));
                e.meta = serde_json::json!({"name": format!("N{i}")});
                e.run_id = Some(format!("r{i}"));
                store.append(e).await.unwrap();
            }
            store.append(entry(&session, "no name")).await.unwrap();
            let slim = tail(&store, &session, 3).await;
            let full = store
                .transcript(TranscriptQuery {
                    session: session.clone(),
                    after_id: None,
                    last: Some(3),
                    since_reset: true,
                })
                .await
                .unwrap();
            assert_eq!(slim.len(), 3);
            for (slim, full) in slim.iter().zip(&full) {
                assert_eq!(slim.kind, full.kind);
                assert_eq!(slim.text, full.text);
                assert_eq!(slim.run_id, full.run_id);
                assert_eq!(slim.name.as_deref(), full.meta["name"].as_str());
            }
            let texts: Vec<_> = slim.iter().map(|e| e.text.as_str()).collect();
            assert_eq!(texts, ["m3", "m4", "no name"]);
            let since_reset = tail(&store, &session, 40).await;
            assert_eq!(since_reset.len(), 6, "nothing from before the reset");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_thousand_concurrent_appends_are_batched_committed_and_ordered() {
        for db in testing::engines().await {
            let store = db.open().await;
            let before = store.commits();
            // 50 callers at once, each appending 20 entries one after the other.
            let tasks: Vec<_> = (0..50)
                .map(|t| {
                    let store = store.clone();
                    tokio::spawn(async move {
                        let mut ids = Vec::new();
                        for i in 0..20 {
                            ids.push(
                                store
                                    .append(entry(&key("s"), &format!("{t}-{i}")))
                                    .await
                                    .unwrap(),
                            );
                        }
                        ids
                    })
                })
                .collect();
            let mut all_ids = Vec::new();
            for task in tasks {
                let ids = task.await.unwrap();
                assert!(
                    ids.windows(2).all(|w| w[0] < w[1]),
                    "each caller's order is kept"
                );
                all_ids.extend(ids);
            }
            let batches = store.commits() - before;
            assert!(
                batches < 500,
                "{batches} commits for 1000 appends: not batched"
            );
            all_ids.sort_unstable();
            all_ids.dedup();
            assert_eq!(all_ids.len(), 1000, "distinct ids");

            // Committed: a fresh open of the file sees every one, in id order.
            store.close().await.unwrap();
            drop(store);
            let store = db.open().await;
            let stored = store
                .transcript(TranscriptQuery::session(key("s")))
                .await
                .unwrap();
            assert_eq!(stored.iter().map(|e| e.id).collect::<Vec<_>>(), all_ids);
            let pos = |text: &str| stored.iter().position(|e| e.text == text).unwrap();
            assert!(pos("7-3") < pos("7-4"));
        }
    }

    #[tokio::test]
    async fn memory_readers_see_writes_while_writes_continue() {
        let postgres = testing::TestDb::postgres().await;
        for store in [
            Store::open(":memory:").await.unwrap(),
            postgres.open().await,
        ] {
            let writer = {
                let store = store.clone();
                tokio::spawn(async move {
                    for i in 0..300 {
                        store
                            .append(entry(&key("s"), &i.to_string()))
                            .await
                            .unwrap();
                    }
                })
            };
            let mut seen = 0;
            while seen < 300 {
                let now = store
                    .transcript(TranscriptQuery::session(key("s")))
                    .await
                    .unwrap()
                    .len();
                assert!(now >= seen, "never goes backwards");
                seen = now;
                tokio::task::yield_now().await;
            }
            writer.await.unwrap();
        }
    }
}
