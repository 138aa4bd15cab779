//! Schema migrations, by `PRAGMA user_version` (the matrix-sdk-sqlite way).
//!
//! Each step is a `.sql` file in `migrations/`, run in its own transaction together with the
//! version bump, so a failed step leaves the file at the previous version and the next start
//! tries again. To change the schema, add a file and one `if version < N` block; never edit a
//! step that has shipped.

use rusqlite::Connection;

use super::StoreError;

/// The schema version this build creates and understands.
pub(crate) const SCHEMA_VERSION: u32 = 10;

/// Brings the database up to [`SCHEMA_VERSION`].
pub(crate) fn run_migrations(conn: &mut Connection) -> Result<(), StoreError> {
    let version = user_version(conn).map_err(|source| StoreError::Migrate {
        version: SCHEMA_VERSION,
        source,
    })?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }

    if version < 1 {
        step(conn, 1, include_str!("migrations/001_initial.sql"))?;
    }
    if version < 2 {
        step(conn, 2, include_str!("migrations/002_deliveries.sql"))?;
    }
    if version < 3 {
        step(conn, 3, include_str!("migrations/003_escalations.sql"))?;
    }
    if version < 4 {
        step(conn, 4, include_str!("migrations/004_chains.sql"))?;
    }
    if version < 5 {
        step(conn, 5, include_str!("migrations/005_pairing.sql"))?;
    }
    if version < 6 {
        step(conn, 6, include_str!("migrations/006_schedule.sql"))?;
    }
    if version < 7 {
        step(conn, 7, include_str!("migrations/007_inbox.sql"))?;
    }
    if version < 8 {
        step(conn, 8, include_str!("migrations/008_artifacts.sql"))?;
    }
    if version < 9 {
        step(conn, 9, include_str!("migrations/009_typing.sql"))?;
    }
    if version < 10 {
        step(conn, 10, include_str!("migrations/010_reply_files.sql"))?;
    }

    Ok(())
}

/// The version recorded in the file (0 for a new file).
pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// Runs one migration and records its version, atomically.
fn step(conn: &mut Connection, version: u32, sql: &str) -> Result<(), StoreError> {
    let apply = |conn: &mut Connection| -> rusqlite::Result<()> {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()
    };
    apply(conn).map_err(|source| StoreError::Migrate { version, source })?;
    tracing::info!(version, "database schema migrated");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrates_a_new_database_once() {
        let mut conn = Connection::open_in_memory().unwrap();
        run_migrations(&mut conn).unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
        // Running again is a no-op (it would fail on CREATE TABLE otherwise).
        run_migrations(&mut conn).unwrap();
        let tables: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'transcript'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(tables, 1);
    }

    #[test]
    fn refuses_a_newer_schema() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let err = run_migrations(&mut conn).unwrap_err();
        assert!(matches!(err, StoreError::TooNew { .. }), "{err}");
    }

    #[test]
    fn a_failed_step_leaves_the_version_unchanged() {
        let mut conn = Connection::open_in_memory().unwrap();
        let err = step(&mut conn, 1, "CREATE TABLE a (x); NOT SQL").unwrap_err();
        assert!(
            matches!(err, StoreError::Migrate { version: 1, .. }),
            "{err}"
        );
        assert_eq!(user_version(&conn).unwrap(), 0);
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))
            .unwrap();
        assert_eq!(tables, 0, "the half-applied step was rolled back");
    }
}
