//! WAL checkpoints on a thread of their own, off the writer's path, and the WAL's size bound.
//!
//! SQLite copies the write-ahead log back into the database file ("checkpoints") every 1000
//! pages by default, inside whichever commit crosses the mark: here, always the one writer
//! thread, and under `synchronous=NORMAL` a checkpoint is where the syncs happen. Every job
//! queued behind it waited for two `fsync`s and the copy; at 1,000 events/s that was several
//! times a second, and it was the p99 latency (BENCHMARKS.md). So the writer connection does not
//! checkpoint (`wal_autocheckpoint = 0`), and this thread runs a `PASSIVE` checkpoint on its own
//! connection every [`INTERVAL`]: it copies what no reader still needs, never blocks the writer,
//! and the writer never waits for its syncs. A memory database has no WAL and no checkpointer.
//!
//! Copying is not enough to keep the log small. The log only starts over from its beginning
//! when a write finds it fully copied *and* no reader still using it; under continuous writes
//! that moment never comes (frames arrive while a copy runs), and the file grew to gigabytes
//! under load. So the writer learns the log's length after each commit (SQLite's WAL hook, free)
//! and once it passes half of its bound, runs `wal_checkpoint(RESTART)` itself before it takes
//! the next batch: the next commit then writes from the log's start again. That is the pause
//! such a checkpoint needs: no transaction writes while it runs (a busy writer leaves only gaps
//! too short for a checkpoint's busy handler on another connection to catch).
//!
//! The pause is the syncs of whatever the passive copies have not covered yet, so the writer
//! first asks this thread for two copies at once and restarts right after they finished: what
//! is left is a few milliseconds of frames, not up to [`INTERVAL`]'s worth (each sync waited
//! tens of milliseconds here, and every event behind the pause waited with it: the p99 latency
//! in BENCHMARKS.md). It restarts rather than truncates: cutting the file to zero freed its
//! blocks inside the pause (another 25 ms for 32 MiB); reused from its start, the file stays
//! under the bound, and a clean stop still empties it. If the log reaches three quarters of the
//! bound before the copies are done, the writer restarts without waiting for them.
//!
//! Readers must let the restart through too: overlapping reads always leave one holding an old
//! snapshot, and SQLite's busy wait never sees a moment without one, so the log grew past its
//! bound whenever reads were continuous. So reads pass a [`ReadGate`], which the restart closes:
//! new reads wait, the ones under way finish, and the log starts over. It waits up to
//! [`RESTART_WAIT`] for them (a long export may take longer). The other half of the bound is the
//! room the log has to grow if a read (here or in another process) keeps a restart from
//! finishing; the next try comes [`RETRY_AFTER`] later. SQLite runs one checkpoint at a time
//! ([`OneCheckpoint`]).

use std::cell::Cell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use rusqlite::hooks::Wal;

use super::log_ahead::LogAhead;

/// How long a connection waits for a lock held by another one before giving up. Kept here,
/// where a `RESTART` checkpoint sets a shorter wait and restores this one; `connect.rs` sets it
/// on every connection it opens.
pub(super) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the log is checkpointed. At the writer's top speed the log grows by about the
/// default 1000-page threshold in this time.
const INTERVAL: Duration = Duration::from_millis(200);

/// How long a restart waits for this process's reads to finish, and then for other
/// processes' readers, before it gives up for this round; the writer holds still meanwhile.
const RESTART_WAIT: Duration = Duration::from_secs(1);

/// After a restart that readers kept from finishing, how long before the next try: writes
/// wait during each try, so they must not come back to back.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// One checkpoint at a time: SQLite refuses a second at once without waiting (no busy handler
/// for that lock), so a restart would fail whenever it met a passive copy in progress.
pub(crate) type OneCheckpoint = Arc<Mutex<()>>;

/// Every read of this process holds it shared; a restart holds it alone. Fair: once a
/// restart waits, new reads queue behind it instead of keeping it out forever.
pub(crate) type ReadGate = Arc<parking_lot::RwLock<()>>;

/// The checkpoint thread; it stops when this and every [`Copies`] are dropped (with the store's
/// last handle and its writer).
pub(crate) struct Checkpointer {
    _stop: mpsc::Sender<()>,
}

impl Checkpointer {
    /// Checkpoints through `conn` every [`INTERVAL`], or at once when asked through the returned
    /// [`Copies`], each inside `one`, until dropped.
    pub(crate) fn spawn(conn: Connection, one: OneCheckpoint) -> std::io::Result<(Self, Copies)> {
        let (ask, asked) = mpsc::channel::<()>();
        let finished = Arc::new(AtomicU64::new(0));
        let copies = Copies {
            ask: ask.clone(),
            finished: Arc::clone(&finished),
        };
        std::thread::Builder::new()
            .name("baton-store-checkpoint".into())
            .spawn(move || {
                // Asked, or the interval passed; disconnected when the store goes away.
                while let Ok(()) | Err(RecvTimeoutError::Timeout) = asked.recv_timeout(INTERVAL) {
                    let _one = one.lock().unwrap_or_else(PoisonError::into_inner);
                    checkpoint(&conn, "PASSIVE");
                    finished.fetch_add(1, Ordering::Release);
                }
            })?;
        Ok((Checkpointer { _stop: ask }, copies))
    }
}

/// The writer's line to the passive copies: ask for one now, and tell when one has finished.
pub(crate) struct Copies {
    ask: mpsc::Sender<()>,
    finished: Arc<AtomicU64>,
}

impl Copies {
    /// No checkpoint thread behind it (a test's writer alone): nothing is ever copied.
    #[cfg(test)]
    fn none() -> Self {
        Copies {
            ask: mpsc::channel().0,
            finished: Arc::default(),
        }
    }

    fn finished(&self) -> u64 {
        self.finished.load(Ordering::Acquire)
    }

    fn ask(&self) {
        // The thread is gone only when the store is: nothing left to copy for.
        let _ = self.ask.send(());
    }
}

thread_local! {
    /// Frames in the log after the last commit on this thread's connection: the writer thread's,
    /// set by SQLite's WAL hook ([`record_log_length`]).
    static LOG_FRAMES: Cell<u64> = const { Cell::new(0) };
}

/// SQLite's WAL hook on the writer's connection: called after each commit with the log's length
/// in frames. Installed by `connect.rs` once `wal_autocheckpoint` is off (that pragma replaces
/// the hook).
pub(crate) fn record_log_length(_: &Wal, frames: std::ffi::c_int) -> rusqlite::Result<()> {
    LOG_FRAMES.set(u64::try_from(frames).unwrap_or(0));
    Ok(())
}

/// The WAL file, the size it must stay under, and the writer's state in keeping it there.
pub(crate) struct WalBound {
    /// `<database>-wal`, named in the warning when the log is over its bound.
    file: PathBuf,
    /// Bytes.
    limit: u64,
    /// Bytes a frame takes in the log (the page size and a header), read at the first look.
    frame: Option<u64>,
    /// No restart before this (after one that could not finish).
    next_try: Instant,
    /// The passive copies finished when the writer asked for two, while it waits for them.
    asked: Option<u64>,
    /// Whether the last look found the log over its bound (warned once per crossing).
    over: bool,
    /// Shared with the passive checkpoints.
    one: OneCheckpoint,
    /// The passive copies, to ask for two before a restart.
    copies: Copies,
    /// Closed while the log is restarted.
    gate: ReadGate,
    /// The log's next pages, asked back into memory ahead of the writer.
    ahead: LogAhead,
}

/// The frame header SQLite writes before each page in the log.
const FRAME_HEADER: u64 = 24;

/// The header at the log's start, before its first frame.
const WAL_HEADER: u64 = 32;

impl WalBound {
    /// The bound for `file`, of `limit` bytes; restarts take turns with the passive checkpoints
    /// through `one`, follow copies asked of `copies`, and close `gate` to this process's
    /// readers meanwhile.
    pub(crate) fn new(
        file: PathBuf,
        limit: u64,
        one: OneCheckpoint,
        copies: Copies,
        gate: ReadGate,
    ) -> Self {
        WalBound {
            ahead: LogAhead::new(file.clone()),
            file,
            limit,
            frame: None,
            next_try: Instant::now(),
            asked: None,
            over: false,
            one,
            copies,
            gate,
        }
    }

    /// Run by the writer after a commit, outside any transaction on `conn`: once the log has
    /// passed half of the bound, asks for passive copies, and restarts the log right after them
    /// (or at once past three quarters of the bound).
    pub(crate) fn keep(&mut self, conn: &Connection) {
        let frame = *self
            .frame
            .get_or_insert_with(|| page_size(conn) + FRAME_HEADER);
        let bytes = LOG_FRAMES.get() * frame;
        self.ahead.committed(WAL_HEADER + bytes);
        if bytes <= self.limit / 2 {
            self.asked = None;
            self.over = false;
            return;
        }
        if Instant::now() >= self.next_try && self.copied_or_urgent(bytes) {
            // Waits for a passive copy in progress, which leaves the restart less to copy.
            let started = Instant::now();
            let _one = self.one.lock().unwrap_or_else(PoisonError::into_inner);
            // New reads queue from here (the gate is fair) until it opens again.
            let closing = Instant::now();
            let restarted = match self.gate.try_write_for(RESTART_WAIT) {
                Some(_closed) => restart(conn),
                None => false,
            };
            // How long the writer held still, and how long new reads waited at most: what
            // `BENCHMARKS.md` measures ("Soak").
            tracing::debug!(
                wal_bytes = bytes,
                held_us = started.elapsed().as_micros(),
                reads_held_us = closing.elapsed().as_micros(),
                restarted,
                "WAL restart"
            );
            self.asked = None;
            if restarted {
                // The next commit writes from the log's start; until then nothing is left.
                LOG_FRAMES.set(0);
                self.over = false;
                return;
            }
            self.next_try = Instant::now() + RETRY_AFTER;
        }
        let over = bytes > self.limit;
        if over && !self.over {
            tracing::warn!(
                wal_bytes = bytes,
                limit_bytes = self.limit,
                file = %self.file.display(),
                "the WAL is over its bound (store.wal_limit_mb) and could not be emptied yet: \
                 a long read (in another process?) holds it; retrying every second"
            );
        }
        self.over = over;
    }

    /// Whether to restart now: two passive copies have finished since the writer asked for them
    /// (asking now if it has not yet), or the log is too close to its bound to wait. The first
    /// copy takes what piled up since the last one, the second only what came during the first,
    /// so the restart is left the least to sync.
    fn copied_or_urgent(&mut self, bytes: u64) -> bool {
        let finished = self.copies.finished();
        let asked = *self.asked.get_or_insert_with(|| {
            self.copies.ask();
            self.copies.ask();
            finished
        });
        finished >= asked + 2 || bytes > self.limit / 4 * 3
    }
}

impl WalBound {
    /// Run by the writer when the store closes: copies the whole log into the database and
    /// empties it, so that a clean stop leaves no large log behind. Nothing is lost if it
    /// cannot finish (the log stays valid and is replayed at the next open).
    pub(crate) fn empty_at_stop(&self, conn: &Connection) {
        let _one = self.one.lock().unwrap_or_else(PoisonError::into_inner);
        if !checkpoint(conn, "TRUNCATE") {
            tracing::info!("the WAL could not be emptied at stop: another process is using it");
        }
    }
}

/// The database's page size; SQLite's default if it cannot say.
fn page_size(conn: &Connection) -> u64 {
    conn.query_row("PRAGMA page_size", [], |row| row.get::<_, u64>(0))
        .unwrap_or(4096)
}

/// A `RESTART` checkpoint that waits at most [`RESTART_WAIT`] for readers.
fn restart(conn: &Connection) -> bool {
    if let Err(err) = conn.busy_timeout(RESTART_WAIT) {
        tracing::warn!(%err, "cannot set the checkpoint's wait");
        return false;
    }
    let done = checkpoint(conn, "RESTART");
    if let Err(err) = conn.busy_timeout(BUSY_TIMEOUT) {
        tracing::warn!(%err, "cannot restore the writer's busy timeout");
    }
    done
}

/// Runs one checkpoint; returns whether it finished.
fn checkpoint(conn: &Connection, mode: &str) -> bool {
    let sql = format!("PRAGMA wal_checkpoint({mode})");
    match conn.query_row(&sql, [], |row| row.get::<_, i64>(0)) {
        Ok(0) => true,
        // Readers or another process's writer kept it from finishing: tried again later.
        Ok(_) => {
            tracing::debug!(mode, "WAL checkpoint could not finish; will try again");
            false
        }
        // The log keeps growing until a later checkpoint succeeds; nothing is lost.
        Err(err) => {
            tracing::warn!(%err, mode, "WAL checkpoint failed; will try again");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use super::super::connect::Location;
    use super::super::readers::{Readers, Source};
    use super::super::sql::{Conn, Db, Sqlite};
    use super::super::{EntryKind, NewEntry, Origin, Store, StoreOptions, TranscriptQuery};
    use super::{Copies, LOG_FRAMES, OneCheckpoint, RESTART_WAIT, ReadGate, WalBound};

    const LIMIT: u64 = 4 * 1024 * 1024;

    /// How long any step of the read-gate tests may take before they fail: many times
    /// [`RESTART_WAIT`], so only a read that waits for the blocker itself runs into it.
    const DEADLINE: Duration = Duration::from_secs(15);

    /// What keeps a restart from finishing.
    #[derive(Clone, Copy)]
    enum Blocker {
        /// A long read of this process, through the read gate.
        GatedRead,
        /// A read transaction on a connection the gate does not know (another process's).
        ForeignSnapshot,
    }

    /// A database in `dir` whose writer (with a log bound of `limit` bytes) has committed a
    /// table `t` holding one blob of `bytes`, so the log holds at least that much; and the log's
    /// path.
    fn writer_with_a_blob(
        dir: &tempfile::TempDir,
        limit: u64,
        bytes: u32,
    ) -> (Location, rusqlite::Connection, std::path::PathBuf) {
        let path = dir.path().join("baton.db");
        let location = Location::parse(path.to_str().unwrap());
        let writer = location.open_writer(limit).unwrap();
        writer
            .execute_batch(&format!(
                "CREATE TABLE t (x BLOB); INSERT INTO t VALUES (zeroblob({bytes}));"
            ))
            .unwrap();
        (location, writer, dir.path().join("baton.db-wal"))
    }

    /// A WAL over half its bound, a `blocker` that outlasts the restart, and a read that comes
    /// while the restart holds the gate closed: returns how long that read waited, counted from
    /// when the gate was seen closed, and the log's length in frames after the restart.
    /// The blocker is told to finish only once the read is through; a read still waiting at
    /// [`DEADLINE`] (waiting for the blocker) fails the test.
    fn read_behind_a_stuck_restart(blocker: Blocker) -> (Duration, u64) {
        const SMALL: u64 = 256 * 1024;
        let dir = tempfile::tempdir().unwrap();
        let (location, writer, wal) = writer_with_a_blob(&dir, SMALL, 400_000);
        let foreign = location.open_reader().unwrap();
        let gate = ReadGate::default();
        let readers = Arc::new(Readers::new(
            Source::Sqlite(location.clone()),
            Conn::Sqlite(location.open_reader().unwrap()),
            Arc::clone(&gate),
        ));
        assert!(std::fs::metadata(&wal).unwrap().len() > SMALL / 2);
        let count = |db: Db<'_>| db.query_row("SELECT count(*) FROM t", &[], |r| r.get::<i64>(0));

        // The blocker begins and holds until told to finish (or the deadline).
        let (began, blocker_began) = mpsc::channel();
        let (finish, may_finish) = mpsc::channel::<()>();
        let blocking = std::thread::spawn({
            let readers = Arc::clone(&readers);
            move || match blocker {
                Blocker::GatedRead => readers
                    .with(|conn| {
                        began.send(()).unwrap();
                        let _ = may_finish.recv_timeout(DEADLINE);
                        count(conn)
                    })
                    .unwrap(),
                Blocker::ForeignSnapshot => {
                    foreign.execute_batch("BEGIN").unwrap();
                    let rows = Sqlite::with(&foreign, count).unwrap();
                    began.send(()).unwrap();
                    let _ = may_finish.recv_timeout(DEADLINE);
                    foreign.execute_batch("COMMIT").unwrap();
                    rows
                }
            }
        });
        blocker_began
            .recv_timeout(DEADLINE)
            .expect("the blocker began");

        // The restart, on the writer's connection, as the writer runs it after a commit (which
        // tells this thread the log's length). No passive copy comes: the log is past three
        // quarters of the bound, so the restart does not wait for one.
        let mut bound = WalBound::new(
            wal.clone(),
            SMALL,
            OneCheckpoint::default(),
            Copies::none(),
            gate.clone(),
        );
        let restart = std::thread::spawn(move || {
            writer.execute_batch("INSERT INTO t VALUES (1)").unwrap();
            bound.keep(&writer);
            LOG_FRAMES.get()
        });
        let deadline = Instant::now() + DEADLINE;
        while !gate.is_locked_exclusive() {
            assert!(
                Instant::now() < deadline,
                "the restart never closed the gate"
            );
            std::thread::yield_now();
        }

        // A read arrives while the gate is closed.
        let asked = Instant::now();
        let (done, read_done) = mpsc::channel();
        std::thread::spawn({
            let readers = Arc::clone(&readers);
            move || {
                let rows = readers.with(count).unwrap();
                done.send((rows, asked.elapsed())).unwrap();
            }
        });
        let (rows, waited) = read_done
            .recv_timeout(DEADLINE)
            .expect("the read still waits behind the restart: it waited for the blocker");
        assert_eq!(rows, 2);
        // Only now may the blocker finish: the read went through while it still held.
        finish.send(()).unwrap();
        // It saw the first row, and the second if its read began after that commit.
        assert!(blocking.join().unwrap() >= 1);
        (waited, restart.join().unwrap())
    }

    /// A restart that cannot finish holds new reads back for about [`RESTART_WAIT`], not
    /// for as long as what keeps it from finishing: a long read of this process (the
    /// restart gives up waiting for the gate) or another process's open snapshot (it has
    /// the gate, and SQLite gives up waiting for that reader).
    #[test]
    fn a_read_waits_at_most_about_restart_wait_behind_a_restart_that_cannot_finish() {
        for blocker in [Blocker::GatedRead, Blocker::ForeignSnapshot] {
            let (waited, frames_after) = read_behind_a_stuck_restart(blocker);
            assert!(
                frames_after > 0,
                "the restart went through: nothing kept it from finishing"
            );
            // The read came after the gate closed, so it waits less than one RESTART_WAIT;
            // the rest is slack for a loaded machine's scheduling.
            assert!(
                waited < RESTART_WAIT + Duration::from_secs(2),
                "the read waited {waited:?} behind a restart (RESTART_WAIT {RESTART_WAIT:?})"
            );
        }
    }

    /// Past half the bound the writer asks for two passive copies and waits for them before it
    /// restarts the log (so the restart syncs little); it does not restart before they finish.
    #[test]
    fn the_restart_waits_for_two_copies_it_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let (_, writer, wal) = writer_with_a_blob(&dir, LIMIT, 100_000);
        let frame = super::page_size(&writer) + super::FRAME_HEADER;
        // The log at two thirds of the bound: past half, short of three quarters.
        let limit = LOG_FRAMES.get() * frame / 2 * 3;
        let (ask, asked) = mpsc::channel();
        let copies = Copies {
            ask,
            finished: Arc::default(),
        };
        let finished = Arc::clone(&copies.finished);
        let mut bound = WalBound::new(
            wal,
            limit,
            OneCheckpoint::default(),
            copies,
            ReadGate::default(),
        );

        bound.keep(&writer);
        assert_eq!(asked.try_iter().count(), 2, "two copies asked for");
        assert!(LOG_FRAMES.get() > 0, "restarted before any copy");
        finished.store(1, Ordering::Release);
        bound.keep(&writer);
        assert!(LOG_FRAMES.get() > 0, "restarted after one copy of two");
        assert_eq!(asked.try_iter().count(), 0, "asked again while waiting");

        finished.store(2, Ordering::Release);
        bound.keep(&writer);
        assert_eq!(LOG_FRAMES.get(), 0, "not restarted after both copies");
        writer.execute_batch("INSERT INTO t VALUES (1)").unwrap();
        assert!(
            LOG_FRAMES.get() * frame < limit / 2,
            "the next commit did not write from the log's start"
        );
    }

    /// Sustained writes with readers reading all along: the WAL, sampled as it runs, stays
    /// under its bound although many times the bound is written, and a clean close empties it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn the_wal_stays_under_its_bound_under_sustained_writes_and_is_empty_after_close() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wal.db");
        let wal = dir.path().join("wal.db-wal");
        let options = StoreOptions { wal_limit: LIMIT };
        let store = Store::open_with(path.to_str().unwrap(), options)
            .await
            .unwrap();

        let done = Arc::new(AtomicBool::new(false));
        let largest = Arc::new(AtomicU64::new(0));
        // Sampling, not synchronising: a stat every millisecond until the writes are done.
        let sampler = std::thread::spawn({
            let (done, largest, wal) = (Arc::clone(&done), Arc::clone(&largest), wal.clone());
            move || {
                while !done.load(Ordering::Relaxed) {
                    let size = std::fs::metadata(&wal).map_or(0, |m| m.len());
                    largest.fetch_max(size, Ordering::Relaxed);
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        });
        let readers: Vec<_> = (0..3)
            .map(|r| {
                let (store, done) = (store.clone(), Arc::clone(&done));
                tokio::spawn(async move {
                    let mut reads = 0u64;
                    while !done.load(Ordering::Relaxed) {
                        let query = TranscriptQuery {
                            last: Some(50),
                            ..TranscriptQuery::session(crate::session::test_key(&format!("s{r}")))
                        };
                        store.transcript(query).await.unwrap();
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();

        let text = "x".repeat(2048);
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let (store, text) = (store.clone(), text.clone());
                tokio::spawn(async move {
                    for i in 0..1200 {
                        let entry = NewEntry {
                            session: crate::session::test_key(&format!("s{}", (w + i) % 3)),
                            ts_ms: i,
                            kind: EntryKind::Inbound,
                            speaker: "alice".into(),
                            origin: Origin::Human,
                            text: text.clone(),
                            platform_message_id: None,
                            run_id: None,
                            idempotency_key: None,
                            meta: serde_json::Value::Null,
                        };
                        store.append(entry).await.unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap();
        }
        done.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        let mut reads = 0;
        for reader in readers {
            reads += reader.await.unwrap();
        }
        assert!(reads > 0, "the readers never read");

        let written = std::fs::metadata(&path).unwrap().len();
        assert!(
            written > 4 * LIMIT,
            "only {written} bytes reached the database: the test wrote too little to matter"
        );
        let largest = largest.load(Ordering::Relaxed);
        assert!(
            largest < LIMIT,
            "the WAL reached {largest} bytes, over its bound of {LIMIT}"
        );
        store.close().await.unwrap();
        let left = std::fs::metadata(&wal).map_or(0, |m| m.len());
        assert_eq!(left, 0, "a clean close leaves an empty WAL");
    }
}
