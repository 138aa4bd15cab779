//! The newest entries of the sessions whose turns started lately, kept by the writer so that a
//! turn's start reads only what was said since the last one (issue 23).
//!
//! A turn's start read its session's newest entries (40 by default) every time: ~190k
//! instructions in the writer, the largest single cost of a mention and of a bot-to-bot round
//! trip (BENCHMARKS.md). The entries before the last turn have not changed since, and the
//! writer adds every entry it records to its session's copy (`transcript::insert_entry`), so a
//! turn's start reads nothing more once cheap checks show the copy still holds:
//!
//! - the session's reset point is the one the copy was read under;
//! - the session's newest entry is the copy's newest (one index look-up): an entry written any
//!   other way is read then, and ids only grow, so none was added among the copy's;
//! - an entry edited in place (a streamed reply revised or withdrawn, `sends.rs`) forgets its
//!   session's copy;
//! - a prune that deletes entries (`prune.rs`) forgets every copy; nothing else in this process
//!   deletes them;
//! - any other process that wrote to the database (`baton prune` beside a running gateway)
//!   makes every copy forgotten: SQLite's `data_version`, read in each turn's start, moves
//!   when another connection has committed. (The copy's entries were counted in the
//!   transcript at every turn's start instead, until the ninth speed session: 23k instructions
//!   a turn, against about 1k for the pragma, BENCHMARKS.md);
//! - the copies change only inside the writer's jobs, in the order the jobs run, so they show
//!   what the transaction shows; written work undone (a batch rolled back, a job rolled back
//!   to its savepoint: the writer's `undone` count moves before the next job runs) makes every
//!   copy forgotten, so none holds a row that is not in the database.
//!
//! Kept on SQLite only, where this process's writer is the database's only one (`lock.rs`). On
//! PostgreSQL other instances edit entries where this one cannot see it, so every turn there
//! reads its tail whole. The copies are bounded by [`BUDGET_BYTES`]; the sessions used least
//! lately are dropped first.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::entry_kind::EntryKind;
use super::sql::{Db, DbError};

/// What a bot is given back of an entry of its session for a turn ([`Store::session_tail`]):
/// only what the model's context is made of, so a turn does not read and parse every column
/// of its session's tail (that was the largest cost of a turn, BENCHMARKS.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailEntry {
    /// What it records.
    pub kind: EntryKind,
    /// The words.
    pub text: String,
    /// The turn it belongs to, if any (the chunks of one reply share it).
    pub run_id: Option<String>,
    /// The speaker's display name kept with an inbound entry (`meta.name`), if any.
    pub name: Option<String>,
}

/// The most the copies may take, by their entries' sizes. 40 short entries take ~8 KiB, so
/// this keeps a thousand busy sessions; a few hundred with long replies.
pub(crate) const BUDGET_BYTES: usize = 16 * 1024 * 1024;

/// An entry's own bytes: its slot in the copy, its shared allocation (two counts and the entry).
const ENTRY_BYTES: usize = std::mem::size_of::<(i64, Arc<TailEntry>)>()
    + 2 * std::mem::size_of::<usize>()
    + std::mem::size_of::<TailEntry>();

/// About how much memory an entry of a copy takes.
fn entry_bytes(e: &TailEntry) -> usize {
    ENTRY_BYTES
        + e.text.capacity()
        + e.run_id.as_ref().map_or(0, String::capacity)
        + e.name.as_ref().map_or(0, String::capacity)
}

/// A session's newest entries as a turn's start read them, with what checking them needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tail {
    /// The session's `reset_after` when they were read.
    pub(crate) reset_after: i64,
    /// The entries, oldest first, each with its id (shared, so that a copy extended by a
    /// turn does not copy the text of those it keeps).
    pub(crate) entries: Vec<(i64, Arc<TailEntry>)>,
    /// How many were asked for: `entries` holds fewer only when the session has no more since
    /// its reset.
    pub(crate) depth: usize,
}

impl Tail {
    /// Whether this copy can answer a read of the newest `last` entries under the reset point
    /// `reset_after`.
    pub(crate) fn holds(&self, last: usize, reset_after: i64) -> bool {
        let whole = self.entries.len() < self.depth;
        self.reset_after == reset_after && (last <= self.depth || whole)
    }

    /// The id after which entries are new to this copy.
    pub(crate) fn newest(&self) -> i64 {
        self.entries.last().map_or(self.reset_after, |(id, _)| *id)
    }

    /// This copy with `newer` (oldest first, all after [`Tail::newest`]) added, keeping the
    /// newest `max(depth, last)`.
    pub(crate) fn extended(&self, newer: Vec<(i64, Arc<TailEntry>)>, last: usize) -> Tail {
        let depth = self.depth.max(last);
        let keep_old = depth.saturating_sub(newer.len()).min(self.entries.len());
        let skip_new = newer.len().saturating_sub(depth);
        let mut entries = Vec::with_capacity(keep_old + newer.len() - skip_new);
        entries.extend_from_slice(&self.entries[self.entries.len() - keep_old..]);
        entries.extend(newer.into_iter().skip(skip_new));
        Tail {
            reset_after: self.reset_after,
            entries,
            depth,
        }
    }

    /// The newest `last` entries, oldest first, as the turn is given them: shared with the
    /// copy, not copied (their text was 5% of the writer's work in a round trip between bots).
    pub(crate) fn newest_entries(&self, last: usize) -> Vec<Arc<TailEntry>> {
        let from = self.entries.len().saturating_sub(last);
        self.entries[from..]
            .iter()
            .map(|(_, e)| Arc::clone(e))
            .collect()
    }

    /// About how much memory it takes.
    fn bytes(&self) -> usize {
        std::mem::size_of::<Tail>()
            + self
                .entries
                .iter()
                .map(|(_, e)| entry_bytes(e))
                .sum::<usize>()
    }
}

/// The copies, by session (its rendered key).
#[derive(Debug)]
pub(crate) struct TailCache {
    kept: Mutex<Kept>,
    budget: usize,
    /// The writer's count of work undone (`writer.rs`).
    undone: Arc<AtomicU64>,
}

#[derive(Debug, Default)]
struct Kept {
    sessions: HashMap<String, Slot>,
    bytes: usize,
    /// Counts uses, to tell the least recently used.
    clock: u64,
    /// The database's `data_version` the copies were kept under.
    version: i64,
    /// The writer's count of work undone when they were kept.
    undone: u64,
}

#[derive(Debug)]
struct Slot {
    tail: Arc<Tail>,
    bytes: usize,
    used: u64,
}

/// SQLite's count of commits by other connections, as [`TailCache::get`] takes it.
pub(super) fn data_version(db: Db<'_>) -> Result<i64, DbError> {
    db.query_row("PRAGMA data_version", &[], |row| row.get(0))
}

impl TailCache {
    /// An empty cache of at most `budget` bytes, kept by the writer whose count of work undone
    /// is `undone`.
    pub(crate) fn new(budget: usize, undone: Arc<AtomicU64>) -> Self {
        TailCache {
            kept: Mutex::new(Kept::default()),
            budget,
            undone,
        }
    }

    /// The copies, every one forgotten first if written work was undone since they were kept.
    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        let undone = self.undone.load(Ordering::Relaxed);
        if kept.undone != undone {
            kept.sessions.clear();
            kept.bytes = 0;
            kept.undone = undone;
        }
        kept
    }

    /// The copy of `session`'s tail, if one is kept, with the database at `data_version`
    /// (SQLite's pragma, read in the job that will use it): when another connection has
    /// committed since the last call, every copy is forgotten first.
    pub(crate) fn get(&self, session: &str, data_version: i64) -> Option<Arc<Tail>> {
        let mut kept = self.kept();
        if kept.version != data_version {
            kept.sessions.clear();
            kept.bytes = 0;
            kept.version = data_version;
        }
        kept.clock += 1;
        let now = kept.clock;
        let slot = kept.sessions.get_mut(session)?;
        slot.used = now;
        Some(Arc::clone(&slot.tail))
    }

    /// Keep `tail` as `session`'s copy, in place of any older one; then drop the least
    /// recently used copies while over budget (to three quarters of it, so that this is not
    /// done on every keep). A copy over the whole budget is not kept.
    pub(crate) fn keep(&self, session: &str, tail: Arc<Tail>) {
        let bytes = tail.bytes() + session.len();
        let mut kept = self.kept();
        if let Some(old) = kept.sessions.remove(session) {
            kept.bytes -= old.bytes;
        }
        if bytes > self.budget {
            return;
        }
        kept.clock += 1;
        let used = kept.clock;
        kept.sessions
            .insert(session.to_owned(), Slot { tail, bytes, used });
        kept.bytes += bytes;
        self.within_budget(&mut kept);
    }

    /// Over budget, drop the least recently used copies down to three quarters of it.
    fn within_budget(&self, kept: &mut Kept) {
        if kept.bytes <= self.budget {
            return;
        }
        let mut by_use: Vec<(u64, String)> = kept
            .sessions
            .iter()
            .map(|(key, slot)| (slot.used, key.clone()))
            .collect();
        by_use.sort_unstable();
        for (_, key) in by_use {
            if kept.bytes <= self.budget / 4 * 3 {
                break;
            }
            if let Some(slot) = kept.sessions.remove(&key) {
                kept.bytes -= slot.bytes;
            }
        }
    }

    /// Add the entry `id` just written to `session`'s copy, if one is kept (`entry` makes it
    /// then), dropping the oldest past the copy's depth.
    pub(crate) fn add(&self, session: &str, id: i64, entry: impl FnOnce() -> TailEntry) {
        let mut kept = self.kept();
        let Some(slot) = kept.sessions.get_mut(session) else {
            return;
        };
        if id <= slot.tail.newest() {
            return;
        }
        let entry = entry();
        let added = entry_bytes(&entry);
        let tail = Arc::make_mut(&mut slot.tail);
        tail.entries.push((id, Arc::new(entry)));
        let dropped = if tail.entries.len() > tail.depth {
            entry_bytes(&tail.entries.remove(0).1)
        } else {
            0
        };
        slot.bytes = slot.bytes + added - dropped;
        kept.bytes = kept.bytes + added - dropped;
        self.within_budget(&mut kept);
    }

    /// Drop `session`'s copy: one of its entries is being edited in place.
    pub(crate) fn forget(&self, session: &str) {
        let mut kept = self.kept();
        if let Some(old) = kept.sessions.remove(session) {
            kept.bytes -= old.bytes;
        }
    }

    /// Drop every copy: entries are being deleted.
    pub(crate) fn clear(&self) {
        let mut kept = self.kept();
        kept.sessions.clear();
        kept.bytes = 0;
    }

    /// How many sessions have a copy.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.kept().sessions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionKey;
    use crate::store::transcript::insert_entry;
    use crate::store::transcript::tests::entry as transcript_entry;
    use crate::store::{
        EntryKind, NewEntry, PruneTable, Store, TranscriptQuery, TurnStart, testing,
    };

    fn entry(id: i64) -> (i64, Arc<TailEntry>) {
        (
            id,
            Arc::new(TailEntry {
                kind: EntryKind::Inbound,
                text: format!("line {id}"),
                run_id: None,
                name: None,
            }),
        )
    }

    fn tail(ids: &[i64], depth: usize) -> Tail {
        Tail {
            reset_after: 0,
            entries: ids.iter().map(|&id| entry(id)).collect(),
            depth,
        }
    }

    fn ids(tail: &Tail) -> Vec<i64> {
        tail.entries.iter().map(|(id, _)| *id).collect()
    }

    #[test]
    fn a_copy_holds_only_under_its_reset() {
        let full = tail(&[3, 5, 8], 3);
        assert!(full.holds(3, 0));
        assert!(full.holds(2, 0), "fewer than it was read for");
        assert!(!full.holds(3, 7), "the session was reset");
        assert!(
            !full.holds(4, 0),
            "more than it was read for, and there may be more"
        );
        let whole = tail(&[3, 5], 3);
        assert!(whole.holds(40, 0), "it holds every entry since the reset");
    }

    #[test]
    fn newer_entries_push_out_the_oldest() {
        let copy = tail(&[3, 5, 8], 3);
        assert_eq!(copy.newest(), 8);
        let next = copy.extended(vec![entry(9), entry(12)], 3);
        assert_eq!(ids(&next), [8, 9, 12]);
        assert_eq!(
            next.newest_entries(2)
                .iter()
                .map(|e| e.text.as_str())
                .collect::<Vec<_>>(),
            ["line 9", "line 12"]
        );
        let wider = copy.extended(vec![entry(9)], 5);
        assert_eq!((ids(&wider), wider.depth), (vec![3, 5, 8, 9], 5));
        let flood = copy.extended((10..14).map(entry).collect(), 3);
        assert_eq!(ids(&flood), [11, 12, 13]);
        let empty = tail(&[], 3);
        assert_eq!(empty.newest(), 0);
    }

    #[test]
    fn the_least_recently_used_copies_go_when_over_budget() {
        let one = Arc::new(tail(&[1, 2, 3], 3));
        let size = one.bytes() + "s0".len();
        let cache = TailCache::new(size * 4, Arc::default());
        for n in 0..4 {
            cache.keep(&format!("s{n}"), Arc::clone(&one));
        }
        assert_eq!(cache.len(), 4);
        assert!(
            cache.get("s0", 0).is_some(),
            "s0 is now the most recently used"
        );
        cache.keep("s4", Arc::clone(&one));
        // Over budget: down to three quarters, the least recently used first (s1, s2).
        assert_eq!(cache.len(), 3);
        assert!(cache.get("s1", 0).is_none() && cache.get("s2", 0).is_none());
        assert!(cache.get("s0", 0).is_some() && cache.get("s4", 0).is_some());
        cache.forget("s4");
        assert!(cache.get("s4", 0).is_none());
        cache.clear();
        assert_eq!(cache.len(), 0);
        let huge = Arc::new(tail(&(0..1000).collect::<Vec<_>>(), 1000));
        cache.keep("s0", huge);
        assert!(
            cache.get("s0", 0).is_none(),
            "a copy over the whole budget is not kept"
        );
    }

    /// What a turn's start gives the session's next turn, as (kind, text, name).
    async fn started(store: &Store, session: &SessionKey, last: usize) -> Vec<(EntryKind, String)> {
        let start = TurnStart {
            session,
            now_ms: 1,
            history: None,
            heard: None,
            tail: Some(last),
            delivery: None,
        };
        let tail = store.turn_start(start).await.unwrap().tail;
        tail.iter().map(|e| (e.kind, e.text.clone())).collect()
    }

    /// The same, read whole from the transcript.
    async fn whole(store: &Store, session: &SessionKey, last: usize) -> Vec<(EntryKind, String)> {
        let query = TranscriptQuery {
            session: session.clone(),
            after_id: None,
            last: Some(last),
            since_reset: true,
        };
        let entries = store.transcript(query).await.unwrap();
        entries.into_iter().map(|e| (e.kind, e.text)).collect()
    }

    fn line(session: &SessionKey, text: &str, ts_ms: i64, key: Option<&str>) -> NewEntry {
        NewEntry {
            ts_ms,
            idempotency_key: key.map(str::to_owned),
            ..transcript_entry(session, text)
        }
    }

    /// Every change a session's entries can go through between two turns, each followed by a
    /// turn's start, whose tail must be the one a whole read gives. On SQLite the copy is used
    /// (it is the only one kept); PostgreSQL keeps none.
    #[tokio::test]
    async fn a_kept_copy_gives_what_a_whole_read_gives_after_every_change() {
        const DAY: i64 = 24 * 60 * 60 * 1000;
        let now = 400 * DAY;
        for db in testing::engines().await {
            let store = db.open().await;
            let session: SessionKey = "bot:b:slack:a:C1".parse().unwrap();
            store.touch_session(&session, 1).await.unwrap();
            for n in 0..3 {
                let old = line(&session, &format!("old {n}"), DAY, None);
                store.append(old).await.unwrap();
            }
            for n in 0..3 {
                let key = format!("k{n}");
                let reply = line(&session, &format!("reply {n}"), now, Some(&key));
                store.append(reply).await.unwrap();
            }
            let check = async |what: &str| {
                let got = started(&store, &session, 5).await;
                let want = whole(&store, &session, 5).await;
                assert_eq!(got, want, "{}: after {what}", db.engine());
            };
            check("the first read").await;
            store
                .append(line(&session, "new", now, None))
                .await
                .unwrap();
            check("an entry added").await;
            // A job that recorded an entry and then failed: its batch is undone (and run
            // again, each job in a savepoint, where it fails again).
            let undone = line(&session, "undone", now, None);
            let tails = store.tails();
            let failed = store
                .write(move |db| {
                    insert_entry(db, &undone, "null", tails.as_deref())?;
                    Err::<(), _>(DbError::NoRows)
                })
                .await;
            assert!(failed.is_err(), "{}", db.engine());
            check("an entry whose job was undone").await;
            store
                .revise_delivered("k1", "reply 1, finished")
                .await
                .unwrap();
            check("a reply revised").await;
            store.withdraw_delivered("k2", "not needed").await.unwrap();
            check("a reply withdrawn").await;
            let pruned = store
                .prune(PruneTable::Transcripts, 2 * DAY, now)
                .await
                .unwrap();
            assert_eq!(pruned, 3);
            check("a prune").await;
            store.reset_sessions("slack", "C1", None).await.unwrap();
            check("a reset").await;
            store
                .append(line(&session, "after", now, None))
                .await
                .unwrap();
            check("an entry after the reset").await;
            if let Some(tails) = store.tails() {
                assert_eq!(tails.len(), 1, "{}: the copy was kept", db.engine());
                // The copy is what the next turn is given: an edit made behind the store's
                // back (not through `sends.rs`, which forgets the copy) does not show.
                let edit = "UPDATE transcript SET text = 'edited' WHERE text = 'after'";
                store.write(move |db| db.execute(edit, &[])).await.unwrap();
                let got = started(&store, &session, 5).await;
                assert_eq!(got, [(EntryKind::Inbound, "after".to_owned())]);
                // An entry recorded is added to the copy as it is written: the next turn's
                // start reads nothing back (an edit behind the store's back shows that).
                store
                    .append(line(&session, "added", now, None))
                    .await
                    .unwrap();
                let edit = "UPDATE transcript SET text = 'read back' WHERE text = 'added'";
                store.write(move |db| db.execute(edit, &[])).await.unwrap();
                let got = started(&store, &session, 5).await;
                assert_eq!(got.last().map(|(_, text)| text.as_str()), Some("added"));
                // Another process's write (`baton prune` beside a running gateway) is seen.
                let other = db.connect();
                let deleted = tokio::task::spawn_blocking(move || {
                    other.with_db(|db| {
                        db.execute("DELETE FROM transcript WHERE text = 'read back'", &[])
                    })
                })
                .await
                .unwrap()
                .unwrap();
                assert_eq!(deleted, 1);
                check("a delete by another connection").await;
            }
        }
    }
}
