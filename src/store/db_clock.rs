//! The database's clock in SQL, for statements that several instances must agree on (leases,
//! whether an instance is still alive): each instance's own clock may disagree with the others',
//! the database server's is one for all.
//!
//! `with_clock!("... " NOW " ...")` writes a statement once and yields it in each engine's
//! words, `[sqlite, postgres]`; [`pick`] takes the one for a connection.

use super::sql::{Db, Engine};

/// The database's current time in ms since the epoch, for each engine: PostgreSQL's
/// `clock_timestamp()` (the statement's time, not its transaction's), SQLite's
/// `unixepoch('subsec')`.
macro_rules! now_ms {
    (sqlite) => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
    (postgres) => {
        "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
    };
}

/// A statement using the database's clock (`NOW`), in each engine's words: `[sqlite, postgres]`.
macro_rules! with_clock {
    (@part $engine:ident; NOW) => { now_ms!($engine) };
    (@part $engine:ident; $text:literal) => { $text };
    (@ $engine:ident; $($part:tt)*) => {
        concat!($(with_clock!(@part $engine; $part)),*)
    };
    ($($part:tt)*) => {
        [with_clock!(@ sqlite; $($part)*), with_clock!(@ postgres; $($part)*)]
    };
}

/// The statement of `text` for `db`'s engine.
pub(super) fn pick(db: Db<'_>, text: [&'static str; 2]) -> &'static str {
    match db.engine() {
        Engine::Sqlite => text[0],
        Engine::Postgres => text[1],
    }
}
