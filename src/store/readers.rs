//! Reader connections: a small pool, used only inside `spawn_blocking`.
//!
//! Reads never go through the writer thread, so a long transcript export does not delay the
//! dedupe record of the next event. In WAL mode a reader sees the last commit and does not block
//! the writer, with one exception: each read passes the [`ReadGate`], which the writer closes
//! to empty the WAL, waiting up to a second for the reads under way. Connections are opened on
//! demand and up to [`IDLE_READERS`] are kept for reuse. On PostgreSQL the pool is the same,
//! of read-only server connections (the gate is never closed there: there is no WAL to empty).

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

    /// Runs `read` on a pooled connection. Blocking: call from `spawn_blocking`.
    pub(crate) fn with<T>(
        &self,
        read: impl FnOnce(Db<'_>) -> Result<T, DbError>,
    ) -> Result<T, StoreError> {
        let pooled = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => self.source.open_reader()?,
        };
        let result = {
            let _open = self.gate.read();
            conn.with_db(read)
        };
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < IDLE_READERS && conn.is_usable() {
            idle.push(conn);
        }
        Ok(result?)
    }
}
