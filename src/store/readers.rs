//! Reader connections: a small pool, used only inside `spawn_blocking`.
//!
//! Reads never go through the writer thread, so a long transcript export does not delay the
//! dedupe record of the next event. In WAL mode a reader sees the last commit and does not block
//! the writer, with one exception: each read passes the [`ReadGate`], which the writer closes
//! to empty the WAL, waiting up to a second for the reads under way. Connections are opened on
//! demand and up to [`IDLE_READERS`] are kept for reuse.

use std::sync::Mutex;

use rusqlite::Connection;

use super::StoreError;
use super::checkpoint::ReadGate;
use super::connect::Location;

/// Reader connections kept open between calls.
const IDLE_READERS: usize = 4;

/// A pool of reader connections to one database.
pub(crate) struct Readers {
    location: Location,
    idle: Mutex<Vec<Connection>>,
    gate: ReadGate,
}

impl Readers {
    /// A pool for `location`, starting with `first` (so a memory database has a reader ready),
    /// reading through `gate`.
    pub(crate) fn new(location: Location, first: Connection, gate: ReadGate) -> Self {
        Readers {
            location,
            idle: Mutex::new(vec![first]),
            gate,
        }
    }

    /// Runs `read` on a pooled connection. Blocking: call from `spawn_blocking`.
    pub(crate) fn with<T>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let pooled = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match pooled {
            Some(conn) => conn,
            None => self.location.open_reader()?,
        };
        let result = {
            let _open = self.gate.read();
            read(&conn)
        };
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < IDLE_READERS {
            idle.push(conn);
        }
        Ok(result?)
    }
}
