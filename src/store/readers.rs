//! Reader connections: a small pool, used only inside `spawn_blocking`.
//!
//! Reads never go through the writer thread, so a long transcript export does not delay the
//! dedupe record of the next event. In WAL mode a reader sees the last commit and does not block
//! the writer, with one exception: each read passes the [`ReadGate`], which the writer closes
//! to empty the WAL, waiting up to a second for the reads under way. SQLite connections are
//! opened on demand and up to [`IDLE_READERS`] are kept for reuse: opening one is cheap.
//!
//! On PostgreSQL the pool is of read-only server connections (the gate is never closed there:
//! there is no WAL to empty), and it is bounded instead: at most [`POSTGRES_READERS`] are open,
//! all kept, and a read finding them all busy waits for one. Each connection is a server
//! process (a fork, its catalog caches warmed again, its statements prepared again), so a
//! connection opened for one read and closed after it cost the server more than the read: under
//! load that was most of the server's time (BENCHMARKS.md). A pooled PostgreSQL connection can
//! die while it waits (the server restarted), and its next read is where that shows: a read that
//! failed because its connection closed is run once more on a new connection (a read changes
//! nothing, so running it again is safe), and the dead one is dropped. A read that failed on its
//! own (an SQL error) is not run again.

use std::sync::{Condvar, Mutex, MutexGuard};

use super::StoreError;
use super::checkpoint::ReadGate;
use super::connect::Location;
use super::sql::{Conn, Db, DbError, PgConn, PgUrl};

/// SQLite reader connections kept open between calls.
const IDLE_READERS: usize = 4;

/// Most PostgreSQL reader connections open at once, per instance (docs/cluster.md counts them
/// in the server's `max_connections`).
pub(crate) const POSTGRES_READERS: usize = 8;

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

impl Source {
    /// How many connections the pool keeps, and whether that many is also the most it opens.
    fn bound(&self) -> Bound {
        match self {
            Source::Sqlite(_) => Bound::KeepIdle(IDLE_READERS),
            Source::Postgres(_) => Bound::AtMost(POSTGRES_READERS),
        }
    }
}

/// How a pool limits its connections.
#[derive(Debug, Clone, Copy)]
enum Bound {
    /// Open as many as reads need; keep this many between reads.
    KeepIdle(usize),
    /// Open at most this many and keep them all; a read waits for a free one.
    AtMost(usize),
}

/// A pool of reader connections to one database.
pub(crate) struct Readers {
    source: Source,
    bound: Bound,
    pool: Mutex<Pool>,
    /// Signalled when a connection is given back or closed.
    freed: Condvar,
    gate: ReadGate,
}

/// The connections of a pool.
struct Pool {
    idle: Vec<Conn>,
    /// Connections open, idle or in a read.
    open: usize,
}

/// A connection for one read, and whether it waited in the pool (so may have died there).
struct Taken {
    conn: Conn,
    pooled: bool,
}

impl Readers {
    /// A pool for `source`, starting with `first` (so a memory database has a reader ready),
    /// reading through `gate`.
    pub(crate) fn new(source: Source, first: Conn, gate: ReadGate) -> Self {
        Readers {
            bound: source.bound(),
            source,
            pool: Mutex::new(Pool {
                idle: vec![first],
                open: 1,
            }),
            freed: Condvar::new(),
            gate,
        }
    }

    /// Runs `read` on a pooled connection; once more on a new one when the pooled one turns
    /// out closed. Blocking: call from `spawn_blocking`.
    pub(crate) fn with<T>(
        &self,
        mut read: impl FnMut(Db<'_>) -> Result<T, DbError>,
    ) -> Result<T, StoreError> {
        let taken = self.take(Want::Any)?;
        match self.run(taken.conn, &mut read) {
            // Failed because its connection is closed, not because of the read itself.
            (Err(e), Kept::Closed) if taken.pooled => {
                tracing::info!(error = %e, "a pooled store reader's connection was closed; reading on a new one");
                let fresh = self.take(Want::New)?;
                Ok(self.run(fresh.conn, &mut read).0?)
            }
            (result, _) => Ok(result?),
        }
    }

    fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A connection for one read: an idle one unless `want` is [`Want::New`], else a new one
    /// if the bound allows, else (at the bound) the next one given back.
    fn take(&self, want: Want) -> Result<Taken, StoreError> {
        let mut pool = self.pool();
        loop {
            if want == Want::Any
                && let Some(conn) = pool.idle.pop()
            {
                return Ok(Taken { conn, pooled: true });
            }
            match self.bound {
                Bound::AtMost(most) if pool.open >= most => {
                    // A new connection wanted at the bound takes the place of an idle one
                    // (after a restart, the idle ones are as dead as the one that failed).
                    if pool.idle.pop().is_none() {
                        pool = self.freed.wait(pool).unwrap_or_else(|p| p.into_inner());
                        continue;
                    }
                }
                _ => pool.open += 1,
            }
            drop(pool);
            return match self.source.open_reader() {
                Ok(conn) => Ok(Taken {
                    conn,
                    pooled: false,
                }),
                Err(e) => {
                    self.closed();
                    Err(e)
                }
            };
        }
    }

    /// One connection fewer is open.
    fn closed(&self) {
        self.pool().open -= 1;
        self.freed.notify_one();
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
            drop(conn);
            self.closed();
            return (result, Kept::Closed);
        }
        let mut pool = self.pool();
        let room = match self.bound {
            Bound::KeepIdle(most) => pool.idle.len() < most,
            Bound::AtMost(_) => true,
        };
        if room {
            pool.idle.push(conn);
        } else {
            pool.open -= 1;
        }
        drop(pool);
        self.freed.notify_one();
        (result, Kept::Usable)
    }
}

/// Which connection a read takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// An idle one if there is one.
    Any,
    /// A new one (the pooled one it had turned out closed).
    New,
}

/// What a read left of its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// Still usable (pooled again if there was room).
    Usable,
    /// Closed (the server went away, or ended it): dropped.
    Closed,
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::store::sql::args;
    use crate::store::testing::TestDb;

    /// Many reads at once on PostgreSQL are all answered on no more than the bound's server
    /// connections: a read finding them all busy waits for one rather than opening one for
    /// itself.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_at_once_share_a_bounded_set_of_postgres_connections() {
        let db = TestDb::postgres().await;
        let store = db.open().await;
        let reads = (0..4 * POSTGRES_READERS).map(|_| {
            store.read(|db| {
                let sql = "SELECT pg_backend_pid()::bigint, pg_sleep(0.05)::text";
                db.query_row(sql, args![], |row| row.get::<i64>(0))
            })
        });
        let servers: HashSet<i64> = futures::future::try_join_all(reads)
            .await
            .expect("every read answered")
            .into_iter()
            .collect();
        assert!(
            servers.len() <= POSTGRES_READERS,
            "{} server processes answered",
            servers.len()
        );
    }
}
