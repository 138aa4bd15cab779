//! Reader connections: a small pool, used only inside `spawn_blocking`.
//!
//! Reads never go through the writer thread, so a long transcript export does not delay the
//! dedupe record of the next event. In WAL mode a reader sees the last commit and does not block
//! the writer, with one exception: each read passes the [`ReadGate`], which the writer closes
//! to empty the WAL, waiting up to a second for the reads under way. Connections are opened on
//! demand and up to [`IDLE_READERS`] are kept for reuse. On PostgreSQL the pool is the same,
//! of read-only server connections (the gate is never closed there: there is no WAL to empty).
//! A pooled PostgreSQL connection can die while it waits (the server restarted), and its next
//! read is where that shows: a read that failed because its connection closed is run once more
//! on a new connection (a read changes nothing, so running it again is safe), and the dead one
//! is dropped. A read that failed on its own (an SQL error) is not run again.

use std::sync::Mutex;

use super::StoreError;
use super::checkpoint::ReadGate;
use super::connect::Location;
use super::sql::{Conn, Db, DbError, PgConn, PgUrl};

/// Reader connections kept open between calls.
const IDLE_READERS: usize = 4;

/// Where reader connections are opened.
pub(crate) enum Source {
    /// A SQLite file or memory database.
    Sqlite(Location),
    /// A PostgreSQL server.
    Postgres(PgUrl),
}

impl Source {
    /// Opens one reader connection.
    pub(crate) fn open_reader(&self) -> Result<Conn, StoreError> {
        match self {
            Source::Sqlite(location) => location.open_reader().map(Conn::Sqlite),
            Source::Postgres(url) => {
                let conn = PgConn::connect(url)?;
                // The counterpart of SQLite's `query_only`: a read that tried to write fails.
                Db::Postgres(&conn)
                    .execute_batch("SET default_transaction_read_only = on")
                    .map_err(StoreError::from)?;
                Ok(Conn::Postgres(conn))
            }
        }
    }
}

/// A pool of reader connections to one database.
pub(crate) struct Readers {
    source: Source,
    idle: Mutex<Vec<Conn>>,
    gate: ReadGate,
}

impl Readers {
    /// A pool for `source`, starting with `first` (so a memory database has a reader ready),
    /// reading through `gate`.
    pub(crate) fn new(source: Source, first: Conn, gate: ReadGate) -> Self {
        Readers {
            source,
            idle: Mutex::new(vec![first]),
            gate,
        }
    }

    /// Runs `read` on a pooled connection; once more on a new one when the pooled one turns
    /// out closed. Blocking: call from `spawn_blocking`.
    pub(crate) fn with<T>(
        &self,
        mut read: impl FnMut(Db<'_>) -> Result<T, DbError>,
    ) -> Result<T, StoreError> {
        let pooled = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let Some(conn) = pooled else {
            return self.on_new(read);
        };
        match self.run(conn, &mut read) {
            // Failed because its connection is closed, not because of the read itself.
            (Err(e), Kept::Closed) => {
                tracing::info!(error = %e, "a pooled store reader's connection was closed; reading on a new one");
                self.on_new(read)
            }
            (result, _) => Ok(result?),
        }
    }

    /// Runs `read` on a connection opened for it.
    fn on_new<T>(
        &self,
        mut read: impl FnMut(Db<'_>) -> Result<T, DbError>,
    ) -> Result<T, StoreError> {
        let conn = self.source.open_reader()?;
        Ok(self.run(conn, &mut read).0?)
    }

    /// Runs `read` on `conn` through the gate, then keeps `conn` for the next read if it is
    /// still usable and the pool has room.
    fn run<T>(
        &self,
        conn: Conn,
        read: &mut impl FnMut(Db<'_>) -> Result<T, DbError>,
    ) -> (Result<T, DbError>, Kept) {
        let result = {
            let _open = self.gate.read();
            conn.with_db(read)
        };
        if !conn.is_usable() {
            return (result, Kept::Closed);
        }
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < IDLE_READERS {
            idle.push(conn);
        }
        (result, Kept::Usable)
    }
}

/// What a read left of its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// Still usable (pooled again if there was room).
    Usable,
    /// Closed (the server went away, or ended it): dropped.
    Closed,
}
