//! [`DbError`]: a query failed, on either engine.

use std::fmt;

/// A query, or reading its result, failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// SQLite said no.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),

    /// PostgreSQL said no (or the connection to it broke).
    #[error("{}", PgMessage(.0))]
    Postgres(#[from] postgres::Error),

    /// A query expected to return a row returned none.
    #[error("the query returned no rows")]
    NoRows,

    /// A cell did not convert to the type it is read into.
    #[error("{why}")]
    Column {
        /// The column's position.
        idx: usize,
        /// Which column (by name, and the row where known), and why it does not convert.
        why: String,
    },
}

impl DbError {
    /// Whether PostgreSQL gave up on the transaction because it collided with another one:
    /// `40P01` (deadlock detected: it was chosen to break a cycle of lock waits) or `40001`
    /// (serialization failure). Nothing was wrong with the work; run again, it succeeds.
    pub(crate) fn is_contention(&self) -> bool {
        use postgres::error::SqlState;
        match self {
            DbError::Postgres(e) => e.code().is_some_and(|code| {
                *code == SqlState::T_R_DEADLOCK_DETECTED
                    || *code == SqlState::T_R_SERIALIZATION_FAILURE
            }),
            _ => false,
        }
    }
}

/// A PostgreSQL error with the server's own words: `postgres::Error` displays only its kind
/// ("db error") and keeps the message in its source.
struct PgMessage<'a>(&'a postgres::Error);

impl fmt::Display for PgMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_db_error() {
            Some(db) => {
                write!(f, "PostgreSQL {}: {}", db.severity(), db.message())?;
                if let Some(detail) = db.detail() {
                    write!(f, " ({detail})")?;
                }
                Ok(())
            }
            None => match std::error::Error::source(self.0) {
                Some(source) => write!(f, "PostgreSQL: {}: {source}", self.0),
                None => write!(f, "PostgreSQL: {}", self.0),
            },
        }
    }
}

/// Lets a store module still written against rusqlite read columns through the shared helpers
/// ([`super::Row`]) inside its `rusqlite::Result` closures.
impl From<DbError> for rusqlite::Error {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Sqlite(e) => e,
            DbError::NoRows => rusqlite::Error::QueryReturnedNoRows,
            DbError::Column { idx, why } => rusqlite::Error::FromSqlConversionFailure(
                idx,
                rusqlite::types::Type::Text,
                why.into(),
            ),
            other => rusqlite::Error::ToSqlConversionFailure(other.to_string().into()),
        }
    }
}

/// `optional()` on a single-row query, as rusqlite's `OptionalExtension`.
pub(crate) trait OptionalRow<T> {
    /// `None` for "no rows", the row otherwise.
    fn optional(self) -> Result<Option<T>, DbError>;
}

impl<T> OptionalRow<T> for Result<T, DbError> {
    fn optional(self) -> Result<Option<T>, DbError> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(DbError::NoRows) => Ok(None),
            Err(DbError::Sqlite(rusqlite::Error::QueryReturnedNoRows)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
