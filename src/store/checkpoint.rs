//! WAL checkpoints on a thread of their own, off the writer's path.
//!
//! SQLite copies the write-ahead log back into the database file ("checkpoints") every 1000
//! pages by default, inside whichever commit crosses the mark: here, always the one writer
//! thread, and under `synchronous=NORMAL` a checkpoint is where the syncs happen. Every job
//! queued behind it waited for two `fsync`s and the copy; at 1,000 events/s that was several
//! times a second, and it was the p99 latency (BENCHMARKS.md). So the writer connection does not
//! checkpoint (`wal_autocheckpoint = 0`), and this thread runs a `PASSIVE` checkpoint on its own
//! connection every [`INTERVAL`]: it copies what no reader still needs, never blocks the writer,
//! and the writer never waits for its syncs. A memory database has no WAL and no checkpointer.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use rusqlite::Connection;

/// How often the log is checkpointed. At the writer's top speed the log grows by about the
/// default 1000-page threshold in this time.
const INTERVAL: Duration = Duration::from_millis(200);

/// The checkpoint thread; it stops when this is dropped (with the store's last handle).
pub(crate) struct Checkpointer {
    _stop: mpsc::Sender<()>,
}

impl Checkpointer {
    /// Checkpoints through `conn` every [`INTERVAL`] until dropped.
    pub(crate) fn spawn(conn: Connection) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("baton-store-checkpoint".into())
            .spawn(move || {
                // Nothing is ever sent: the channel disconnects when the store goes away.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(INTERVAL) {
                    checkpoint(&conn);
                }
            })?;
        Ok(Checkpointer { _stop: stop })
    }
}

fn checkpoint(conn: &Connection) {
    let done = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        row.get::<_, i64>(0)
    });
    if let Err(err) = done {
        // The log keeps growing until a later checkpoint succeeds; nothing is lost.
        tracing::warn!(%err, "WAL checkpoint failed; will try again");
    }
}
