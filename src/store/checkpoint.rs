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
//! once the file passes half of its bound, this thread asks the writer to hold still between two
//! batches ([`Pauser`]), runs `wal_checkpoint(TRUNCATE)` (which waits, up to the connection's
//! busy timeout, for the short-lived readers to finish) and lets the writer go: the file is
//! emptied and writes wait for that one checkpoint, about as long as a commit's syncs. The other
//! half of the bound is the room the log has to grow while that happens.

use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use rusqlite::Connection;

use super::writer::Pauser;

/// How often the log is checkpointed. At the writer's top speed the log grows by about the
/// default 1000-page threshold in this time.
const INTERVAL: Duration = Duration::from_millis(200);

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
                // Nothing is ever sent: the channel disconnects when the store goes away.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(INTERVAL) {
                    checkpoint(&conn, "PASSIVE");
                    let size = wal_size(&bound);
                    if size > bound.limit / 2 {
                        // Held until the checkpoint is done; dropping it lets the writer go.
                        let Some(_paused) = writer.pause() else {
                            return; // the writer has stopped: the store is closing
                        };
                        checkpoint(&conn, "TRUNCATE");
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

fn checkpoint(conn: &Connection, mode: &str) {
    let sql = format!("PRAGMA wal_checkpoint({mode})");
    match conn.query_row(&sql, [], |row| row.get::<_, i64>(0)) {
        Ok(0) => {}
        // Readers or another process's writer kept it from finishing: tried again next round.
        Ok(_) => tracing::debug!(mode, "WAL checkpoint could not finish; will try again"),
        // The log keeps growing until a later checkpoint succeeds; nothing is lost.
        Err(err) => tracing::warn!(%err, mode, "WAL checkpoint failed; will try again"),
    }
}
