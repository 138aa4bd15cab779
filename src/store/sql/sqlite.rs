//! A SQLite connection whose statements stay prepared for as long as it is borrowed: the
//! writer's, for its whole life.
//!
//! rusqlite's own statement cache hands a statement out and takes it back on every use: it
//! trims the SQL, allocates a key for it, hashes it twice with SipHash and relinks its LRU
//! list, about 1,200 instructions a statement, a tenth of the writer thread's work under
//! chatter (BENCHMARKS.md, issue 23). A [`Sqlite`] takes each statement out of that cache
//! once, at its first use, and keeps it until the [`Sqlite`] is dropped, when every statement
//! goes back; a use in between is one hash of the SQL text and a take from a slot.

use std::cell::RefCell;
use std::collections::HashMap;

use rusqlite::{CachedStatement, Connection, Statement};
use rustc_hash::FxBuildHasher;

use super::{Db, DbError};

/// At most this many statements are held; past them a statement is taken from rusqlite's
/// cache and given back at each use, as before. The store's SQL texts are a fixed set (the
/// few built with `format!` are built from constants), well under this.
const HELD: usize = 128;

/// A borrowed SQLite connection and the statements it holds prepared.
pub(crate) struct Sqlite<'c> {
    conn: &'c Connection,
    held: RefCell<Held<'c>>,
}

/// The statements held, each in a slot found by its SQL text. A slot is empty while its
/// statement runs, so a query run again inside its own row callback prepares another.
#[derive(Default)]
struct Held<'c> {
    slots: HashMap<Box<str>, usize, FxBuildHasher>,
    statements: Vec<Option<CachedStatement<'c>>>,
}

impl<'c> Sqlite<'c> {
    /// `conn`, holding nothing yet.
    fn new(conn: &'c Connection) -> Self {
        Sqlite {
            conn,
            held: RefCell::new(Held::default()),
        }
    }

    /// Runs `work` on a [`Db`] over `conn` whose statements stay prepared until it returns.
    pub(crate) fn with<T>(conn: &Connection, work: impl FnOnce(Db<'_>) -> T) -> T {
        let sqlite = Sqlite::new(conn);
        work(Db::Sqlite(&sqlite))
    }
}

/// What a [`Db`] uses of a [`Sqlite`]. A trait object only so that a `Db` can borrow a
/// `Sqlite<'c>` for less than `'c`: a `&'c Sqlite<'c>` could never be let go before the
/// `Sqlite`'s statements are dropped, which the compiler rightly refuses.
pub(crate) trait Prepared {
    /// The connection.
    fn conn(&self) -> &Connection;

    /// Runs `run` on the statement prepared for `sql`.
    fn with_statement(
        &self,
        sql: &str,
        run: &mut dyn FnMut(&mut Statement<'_>) -> Result<(), DbError>,
    ) -> Result<(), DbError>;
}

impl Prepared for Sqlite<'_> {
    fn conn(&self) -> &Connection {
        self.conn
    }

    fn with_statement(
        &self,
        sql: &str,
        run: &mut dyn FnMut(&mut Statement<'_>) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let (slot, taken) = {
            let mut held = self.held.borrow_mut();
            match held.slots.get(sql).copied() {
                Some(slot) => (Some(slot), held.statements[slot].take()),
                None => (None, None),
            }
        };
        let mut statement = match taken {
            Some(statement) => statement,
            None => self.conn.prepare_cached(sql)?,
        };
        let ran = run(&mut statement);
        let mut held = self.held.borrow_mut();
        let slot = slot.or_else(|| held.slots.get(sql).copied());
        match slot {
            Some(slot) => {
                let empty = &mut held.statements[slot];
                if empty.is_none() {
                    *empty = Some(statement);
                }
            }
            None if held.statements.len() < HELD => {
                let slot = held.statements.len();
                held.statements.push(Some(statement));
                held.slots.insert(sql.into(), slot);
            }
            None => {}
        }
        ran
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql::args;

    fn counter() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (n INTEGER)").unwrap();
        conn
    }

    /// Held statements are prepared once: rusqlite counts a statement's runs (`Run`), which a
    /// statement prepared again would start over.
    #[test]
    fn a_statement_is_prepared_once_and_given_back_at_the_end() {
        let conn = counter();
        let insert = "INSERT INTO t (n) VALUES (?1)";
        let runs = |conn: &Connection| {
            let statement = conn.prepare_cached(insert).unwrap();
            statement.get_status(rusqlite::StatementStatus::Run)
        };
        Sqlite::with(&conn, |db| {
            for n in 0..5_i64 {
                db.execute(insert, args![n]).unwrap();
            }
            assert_eq!(
                runs(&conn),
                0,
                "held: rusqlite's cache had to prepare another"
            );
        });
        assert_eq!(
            runs(&conn),
            5,
            "given back: the one statement that ran all five"
        );
    }

    /// A query run again inside its own row callback gets a statement of its own, and both
    /// give the right rows.
    #[test]
    fn a_statement_used_inside_its_own_use_gets_another() {
        let conn = counter();
        conn.execute_batch("INSERT INTO t (n) VALUES (1), (2)")
            .unwrap();
        let select = "SELECT n FROM t ORDER BY n";
        let pairs = Sqlite::with(&conn, |db| {
            db.query_map(select, &[], |outer| {
                let n: i64 = outer.get(0)?;
                let inner: Vec<i64> = db.query_map(select, &[], |row| row.get(0))?;
                Ok((n, inner))
            })
        })
        .unwrap();
        assert_eq!(pairs, [(1, vec![1, 2]), (2, vec![1, 2])]);
    }
}
