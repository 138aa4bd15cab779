//! One SQL text per query, two engines: the layer every ported store module writes its queries
//! against, so the same job runs on SQLite (the embedded default) and on PostgreSQL (several
//! instances sharing one database, issue 22).
//!
//! Queries are written in the subset both engines speak: `?N` placeholders (rewritten to `$N`
//! for PostgreSQL, once per statement), `ON CONFLICT ... DO NOTHING / DO UPDATE` instead of
//! `INSERT OR ...`, [`Db::insert_id`] instead of `last_insert_rowid()`, explicit id columns instead
//! of `rowid`, `CASE` instead of SQLite's two-argument `max`, and no JSON functions (JSON is
//! handled in Rust). Parameters are [`Value`]s, which borrow text and blobs so the SQLite hot
//! path copies nothing; columns are read with [`Row::get`] into any [`Column`] type, converting
//! between the engines' integer widths and booleans.
//!
//! Both engines keep a prepared statement per SQL text: held by a [`Sqlite`] for as long as it
//! borrows its connection (`sqlite.rs`), behind it rusqlite's statement cache; a map of
//! `tokio_postgres::Statement`s for PostgreSQL (`postgres.rs`). A statement whose answer the
//! job does not read goes through [`Db::execute_pipelined`]: on PostgreSQL it is sent without
//! waiting, with the next statement that waits.

mod error;
mod postgres;
mod row;
mod sqlite;
mod tls;
mod value;

pub use error::DbError;
pub(crate) use error::OptionalRow;
pub(crate) use postgres::PgConn;
pub use postgres::PgUrl;
pub(crate) use row::{Column, Row};
use sqlite::Prepared;
pub(crate) use sqlite::Sqlite;
pub(crate) use value::Value;

/// The engine a connection talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    /// The embedded SQLite file (or a private memory database).
    Sqlite,
    /// A PostgreSQL server shared by every instance.
    Postgres,
}

/// A connection of either engine, owned: the writer's, or a pooled reader.
pub(crate) enum Conn {
    /// A SQLite connection.
    Sqlite(rusqlite::Connection),
    /// A PostgreSQL connection.
    Postgres(PgConn),
}

impl Conn {
    /// Whether it can serve another query: a PostgreSQL connection the server closed is
    /// dropped from the pool rather than handed out again.
    pub(crate) fn is_usable(&self) -> bool {
        match self {
            Conn::Sqlite(_) => true,
            Conn::Postgres(conn) => !conn.is_closed(),
        }
    }

    /// Runs `work` on the handle jobs run their queries through; a SQLite connection's
    /// statements stay prepared until it returns ([`Sqlite`]).
    pub(crate) fn with_db<T>(&self, work: impl FnOnce(Db<'_>) -> T) -> T {
        match self {
            Conn::Sqlite(conn) => Sqlite::with(conn, work),
            Conn::Postgres(conn) => work(Db::Postgres(conn)),
        }
    }
}

/// A borrowed connection of either engine, inside the writer's open transaction or on a reader.
#[derive(Clone, Copy)]
pub(crate) enum Db<'c> {
    /// SQLite ([`Sqlite`]).
    Sqlite(&'c dyn Prepared),
    /// PostgreSQL.
    Postgres(&'c PgConn),
}

/// Parameters for a query: `args![a, b, c]` is a `&[Value]` of each converted by `From`.
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        &[$($crate::store::sql::Value::from($arg)),*][..]
    };
}
pub(crate) use args;

impl<'c> Db<'c> {
    /// Which engine this is.
    pub(crate) fn engine(self) -> Engine {
        match self {
            Db::Sqlite(_) => Engine::Sqlite,
            Db::Postgres(_) => Engine::Postgres,
        }
    }

    /// The SQLite connection, for tests that read its pragmas.
    #[cfg(test)]
    pub(crate) fn sqlite(self) -> &'c rusqlite::Connection {
        match self {
            Db::Sqlite(sqlite) => sqlite.conn(),
            Db::Postgres(_) => panic!("a test of SQLite's pragmas ran on PostgreSQL"),
        }
    }

    /// Runs one statement; returns how many rows it changed.
    pub(crate) fn execute(self, sql: &str, args: &[Value<'_>]) -> Result<usize, DbError> {
        match self {
            Db::Sqlite(sqlite) => {
                let mut changed = 0;
                sqlite.with_statement(sql, &mut |statement| {
                    changed = statement.execute(rusqlite::params_from_iter(args))?;
                    Ok(())
                })?;
                Ok(changed)
            }
            Db::Postgres(conn) => conn.execute(sql, args),
        }
    }

    /// Runs one statement whose count nobody reads. On PostgreSQL it is sent without waiting
    /// for its answer, in one write with the statements after it (`postgres.rs`); its error,
    /// if any, is returned by the next call that waits, at the latest [`Db::flush`]. So use it
    /// only where an error is passed up (`?`), never where it is caught and handled.
    pub(crate) fn execute_pipelined(self, sql: &str, args: &[Value<'_>]) -> Result<(), DbError> {
        match self {
            Db::Sqlite(_) => self.execute(sql, args).map(drop),
            Db::Postgres(conn) => conn.send(sql, args),
        }
    }

    /// Waits for every statement [`Db::execute_pipelined`] sent; the first one's error.
    pub(crate) fn flush(self) -> Result<(), DbError> {
        match self {
            Db::Sqlite(_) => Ok(()),
            Db::Postgres(conn) => conn.flush(),
        }
    }

    /// Why the connection is gone, when it is: PostgreSQL's connection closed (the server
    /// went away, or ended it). SQLite's never is.
    pub(crate) fn lost(self) -> Option<String> {
        match self {
            Db::Sqlite(_) => None,
            Db::Postgres(conn) if conn.is_closed() => Some(
                conn.ended()
                    .unwrap_or_else(|| "the server closed the connection".to_owned()),
            ),
            Db::Postgres(_) => None,
        }
    }

    /// Runs one `INSERT` into a table whose key is `id` (SQLite's rowid); returns the new row's
    /// id, `None` when it inserted nothing (`ON CONFLICT ... DO NOTHING`). `sql` has no
    /// `RETURNING`: SQLite runs one through a temporary table of its own, a third of a
    /// transcript insert's instructions (BENCHMARKS.md), so there the id is
    /// `last_insert_rowid()`; PostgreSQL is given `RETURNING id`. Not for `DO UPDATE`, whose
    /// update sets no new id.
    pub(crate) fn insert_id(self, sql: &str, args: &[Value<'_>]) -> Result<Option<i64>, DbError> {
        match self {
            Db::Sqlite(sqlite) => {
                let inserted = self.execute(sql, args)?;
                Ok((inserted > 0).then(|| sqlite.conn().last_insert_rowid()))
            }
            Db::Postgres(_) => self
                .query_row(&format!("{sql} RETURNING id"), args, |row| row.get(0))
                .optional(),
        }
    }

    /// Runs statements without parameters, as one text (migrations, transaction control).
    pub(crate) fn execute_batch(self, sql: &str) -> Result<(), DbError> {
        match self {
            Db::Sqlite(sqlite) => Ok(sqlite.conn().execute_batch(sql)?),
            Db::Postgres(conn) => conn.execute_batch(sql),
        }
    }

    /// Makes the rest of this transaction exclusive for `key` (a chain, an account's pairing
    /// codes) among every instance sharing the database: for a job that reads, decides, then
    /// writes on what it read. SQLite needs nothing, its one writer runs jobs one at a time.
    /// PostgreSQL's instances each have a writer, running side by side: there it takes a
    /// transaction-scoped advisory lock on the key's hash, released at commit or rollback (a
    /// collision of two keys' hashes only makes their jobs wait for each other).
    pub(crate) fn exclusive(self, key: &str) -> Result<(), DbError> {
        match self {
            Db::Sqlite(_) => Ok(()),
            Db::Postgres(conn) => conn
                .execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(?1, 0))",
                    args![key],
                )
                .map(drop),
        }
    }

    /// Whether a transaction is still open. SQLite ends one by itself on some errors (disk
    /// full, I/O); PostgreSQL keeps it open (failed) until it is rolled back, so there it is
    /// only lost with the connection.
    pub(crate) fn in_transaction(self) -> bool {
        match self {
            Db::Sqlite(sqlite) => !sqlite.conn().is_autocommit(),
            Db::Postgres(conn) => !conn.is_closed(),
        }
    }

    /// The first row of a query, read by `read`; [`DbError::NoRows`] when there is none (see
    /// [`OptionalRow::optional`]).
    pub(crate) fn query_row<T>(
        self,
        sql: &str,
        args: &[Value<'_>],
        read: impl FnOnce(&Row<'_>) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        let mut read = Some(read);
        let mut found = None;
        self.query_each(sql, args, 1, |row| {
            if let Some(read) = read.take() {
                found = Some(read(row)?);
            }
            Ok(())
        })?;
        found.ok_or(DbError::NoRows)
    }

    /// Every row of a query, each read by `read`, in the query's order.
    pub(crate) fn query_map<T>(
        self,
        sql: &str,
        args: &[Value<'_>],
        read: impl FnMut(&Row<'_>) -> Result<T, DbError>,
    ) -> Result<Vec<T>, DbError> {
        self.query_take(sql, args, usize::MAX, read)
    }

    /// The first `limit` rows of a query, each read by `read`. The rest are never stepped
    /// through on SQLite: a bound `LIMIT ?` makes SQLite re-plan its statement on every call,
    /// which cost more than the query (BENCHMARKS.md).
    pub(crate) fn query_take<T>(
        self,
        sql: &str,
        args: &[Value<'_>],
        limit: usize,
        mut read: impl FnMut(&Row<'_>) -> Result<T, DbError>,
    ) -> Result<Vec<T>, DbError> {
        let mut rows = Vec::new();
        self.query_each(sql, args, limit, |row| {
            rows.push(read(row)?);
            Ok(())
        })?;
        Ok(rows)
    }

    fn query_each(
        self,
        sql: &str,
        args: &[Value<'_>],
        limit: usize,
        mut each: impl FnMut(&Row<'_>) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        if limit == 0 {
            return Ok(());
        }
        match self {
            Db::Sqlite(sqlite) => sqlite.with_statement(sql, &mut |statement| {
                let mut rows = statement.query(rusqlite::params_from_iter(args))?;
                let mut seen = 0;
                while let Some(row) = rows.next()? {
                    each(&Row::Sqlite(row))?;
                    seen += 1;
                    if seen == limit {
                        break;
                    }
                }
                Ok(())
            }),
            Db::Postgres(conn) => {
                conn.query_each(sql, args, limit, |row| each(&Row::Postgres(row)))
            }
        }
    }
}
