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
//! Copying is not enough to keep the file small. The log only starts over from its beginning
//! when a write finds it fully copied *and* no reader still using it; with readers coming and
//! going all the time that moment rarely comes, and the file grew to gigabytes under load. So
//! this thread looks at the file's size every [`SIZE_POLL`], and once it passes half of its
//! bound, asks the writer to hold still between two batches ([`Pauser`]), runs
//! `wal_checkpoint(TRUNCATE)` (which waits, up to the connection's busy timeout, for the
//! short-lived readers to finish) and lets the writer go: the file is emptied and writes wait
//! for that one checkpoint, about as long as a commit's syncs. The other half of the bound is
//! the room the log has to grow while that happens.

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::writer::Pauser;

/// How often the log is checkpointed. At the writer's top speed the log grows by about the
/// default 1000-page threshold in this time.
const INTERVAL: Duration = Duration::from_millis(200);

/// How often the log's size is looked at (one `stat`): often enough that it cannot grow by much
/// between a look and the checkpoint that empties it.
const SIZE_POLL: Duration = Duration::from_millis(20);

/// After a `TRUNCATE` that readers kept from finishing, how long before the next try: the
/// writer holds still during each try, so it must not try back to back.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The WAL file and the size it must stay under.
pub(crate) struct WalBound {
    /// `<database>-wal`.
    pub(crate) file: PathBuf,
    /// Bytes.
    pub(crate) limit: u64,
}

/// The checkpoint thread; it stops when this is dropped (with the store's last handle).
pub(crate) struct Checkpointer {
    _stop: mpsc::Sender<()>,
}

impl Checkpointer {
    /// Checkpoints through `conn` every [`INTERVAL`] until dropped, and empties the log through
    /// `writer`'s pause when it passes half of `bound`.
    pub(crate) fn spawn(conn: Connection, bound: WalBound, writer: Pauser) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("baton-store-checkpoint".into())
            .spawn(move || {
                let mut over = false;
                let mut next_passive = Instant::now() + INTERVAL;
                let mut next_truncate = Instant::now();
                // Nothing is ever sent: the channel disconnects when the store goes away.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(SIZE_POLL) {
                    let now = Instant::now();
                    if now >= next_passive {
                        checkpoint(&conn, "PASSIVE");
                        next_passive = now + INTERVAL;
                    }
                    if now >= next_truncate && wal_size(&bound) > bound.limit / 2 {
                        // Held until the checkpoint is done; dropping it lets the writer go.
                        let Some(_paused) = writer.pause() else {
                            return; // the writer has stopped: the store is closing
                        };
                        if !checkpoint(&conn, "TRUNCATE") {
                            next_truncate = Instant::now() + RETRY_AFTER;
                        }
                    }
                    over = warn_over_bound(&bound, over);
                }
            })?;
        Ok(Checkpointer { _stop: stop })
    }
}

fn wal_size(bound: &WalBound) -> u64 {
    std::fs::metadata(&bound.file).map_or(0, |m| m.len())
}

/// Warns once each time the log ends a round over its bound (a reader in another process
/// holding a snapshot for long can cause it); returns whether it is over.
fn warn_over_bound(bound: &WalBound, was_over: bool) -> bool {
    let size = wal_size(bound);
    let over = size > bound.limit;
    if over && !was_over {
        tracing::warn!(
            wal_bytes = size,
            limit_bytes = bound.limit,
            file = %bound.file.display(),
            "the WAL is over its bound (store.wal_limit_mb) and could not be emptied yet: \
             a long read (in another process?) holds it; retrying"
        );
    }
    over
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

    use super::super::{EntryKind, NewEntry, Origin, Store, StoreOptions, TranscriptQuery};

    const LIMIT: u64 = 4 * 1024 * 1024;

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
                            ..TranscriptQuery::session(format!("s{r}"))
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
                    for i in 0..2500 {
                        let entry = NewEntry {
                            session: format!("s{}", (w + i) % 3),
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
