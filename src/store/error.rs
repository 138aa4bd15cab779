//! [`StoreError`]: every way the store can fail, each with a message that says what to do.
//!
//! One variant per failure kind, as matrix-sdk-sqlite's `OpenStoreError` does: opening the file,
//! migrating its schema, a query failing, a batch failing to commit, the writer having stopped.
//! Callers match on the kind (a closed writer during shutdown is expected, a failed migration is
//! not); users read the message.

use super::sql::DbError;

/// A store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be opened or configured (WAL, pragmas).
    #[error(
        "cannot open the database at {path}: {source}; check the directory exists and is \
         writable, or pass --database (\":memory:\" for a throwaway run)"
    )]
    Open {
        /// The path (or memory URI) that was being opened.
        path: String,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },

    /// The database path names a directory, where SQLite's own error reads like a permissions
    /// problem.
    #[error(
        "the database path {path} is a directory; name a file in it (e.g. {path}/baton.db) with \
         --database or `gateway.database`"
    )]
    IsDirectory {
        /// The path given.
        path: String,
    },

    /// A schema migration failed; the database was left at the previous version.
    #[error(
        "cannot upgrade the database schema to version {version}: {source}; the file was left \
         unchanged at the previous version: restore a backup or pass --database to start a new one"
    )]
    Migrate {
        /// The schema version whose migration failed.
        version: u32,
        /// What the database said.
        #[source]
        source: DbError,
    },

    /// The database was written by a newer baton whose schema this build does not know.
    #[error(
        "the database has schema version {found}, but this baton only knows versions up to \
         {supported}; upgrade baton, or pass --database to use another file"
    )]
    TooNew {
        /// The version found in the file.
        found: u32,
        /// The newest version this build can migrate to.
        supported: u32,
    },

    /// A query failed (constraint, corrupt row, I/O).
    #[error("database error: {0}; if it persists, check the disk and the database file")]
    Sqlite(#[from] rusqlite::Error),

    /// A query failed on PostgreSQL, or a row did not read back as the store expects.
    #[error("database error: {0}; if it persists, check the database server and its log")]
    Query(DbError),

    /// The PostgreSQL server could not be reached, or refused the login.
    #[error(
        "cannot connect to PostgreSQL at {target}: {reason}; check that the server runs and \
         that the URL in the variable named by `gateway.database_url_env` has the right user, \
         password, host and database"
    )]
    Connect {
        /// Where it was connecting to (never with the password).
        target: String,
        /// What the driver said (the password scrubbed from it).
        reason: String,
    },

    /// The batch holding this write could not be committed, so the write did not happen.
    #[error(
        "could not commit to the database: {0}; the write was not saved: check free disk space \
         and that the database file is writable"
    )]
    Commit(String),

    /// The connection to PostgreSQL is lost, so the write was not made; the store connects
    /// again by itself, with a growing pause between attempts.
    #[error(
        "not saved: the connection to PostgreSQL is lost ({reason}); baton connects again by \
         itself (attempts back off up to 5 s): check that the server runs and its log"
    )]
    Disconnected {
        /// Why it was lost, or why the latest attempt to connect again failed.
        reason: String,
    },

    /// The writer thread has stopped (the store was closed, or the gateway is shutting down).
    #[error("the store is closed: no more writes are accepted (the gateway is shutting down)")]
    Closed,

    /// Store code panicked. The store keeps working; the operation did not happen.
    #[error("internal store error: {0}; this is a bug in baton, please report it")]
    Internal(String),
}

impl From<DbError> for StoreError {
    fn from(e: DbError) -> Self {
        match e {
            DbError::Sqlite(e) => StoreError::Sqlite(e),
            other => StoreError::Query(other),
        }
    }
}
