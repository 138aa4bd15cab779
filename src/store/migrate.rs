//! Schema migrations: `PRAGMA user_version` on SQLite (the matrix-sdk-sqlite way), a one-row
//! `schema_version` table on PostgreSQL.
//!
//! Each step is a `.sql` file per engine (`migrations/` and `migrations/postgres/`, the same
//! number and name), run in its own transaction together with the version bump, so a failed
//! step leaves the database at the previous version and the next start tries again. To change
//! the schema, add a file for each engine and one entry to [`STEPS`]; never edit a step that has
//! shipped. On PostgreSQL, instances starting together migrate one at a time (an advisory lock).

use super::StoreError;
use super::sql::{Db, DbError, Engine, args};

/// The schema version this build creates and understands.
pub const SCHEMA_VERSION: u32 = STEPS.len() as u32;

/// Each version's SQL, SQLite's then PostgreSQL's; version N is `STEPS[N - 1]`.
const STEPS: [(&str, &str); 33] = [
    (
        include_str!("migrations/001_initial.sql"),
        include_str!("migrations/postgres/001_initial.sql"),
    ),
    (
        include_str!("migrations/002_deliveries.sql"),
        include_str!("migrations/postgres/002_deliveries.sql"),
    ),
    (
        include_str!("migrations/003_escalations.sql"),
        include_str!("migrations/postgres/003_escalations.sql"),
    ),
    (
        include_str!("migrations/004_chains.sql"),
        include_str!("migrations/postgres/004_chains.sql"),
    ),
    (
        include_str!("migrations/005_pairing.sql"),
        include_str!("migrations/postgres/005_pairing.sql"),
    ),
    (
        include_str!("migrations/006_schedule.sql"),
        include_str!("migrations/postgres/006_schedule.sql"),
    ),
    (
        include_str!("migrations/007_inbox.sql"),
        include_str!("migrations/postgres/007_inbox.sql"),
    ),
    (
        include_str!("migrations/008_artifacts.sql"),
        include_str!("migrations/postgres/008_artifacts.sql"),
    ),
    (
        include_str!("migrations/009_typing.sql"),
        include_str!("migrations/postgres/009_typing.sql"),
    ),
    (
        include_str!("migrations/010_reply_files.sql"),
        include_str!("migrations/postgres/010_reply_files.sql"),
    ),
    (
        include_str!("migrations/011_transcript_run.sql"),
        include_str!("migrations/postgres/011_transcript_run.sql"),
    ),
    (
        include_str!("migrations/012_leases.sql"),
        include_str!("migrations/postgres/012_leases.sql"),
    ),
    (
        include_str!("migrations/013_session_locks.sql"),
        include_str!("migrations/postgres/013_session_locks.sql"),
    ),
    (
        include_str!("migrations/014_inbox_owner.sql"),
        include_str!("migrations/postgres/014_inbox_owner.sql"),
    ),
    (
        include_str!("migrations/015_delivery_text.sql"),
        include_str!("migrations/postgres/015_delivery_text.sql"),
    ),
    (
        include_str!("migrations/016_typing_owner.sql"),
        include_str!("migrations/postgres/016_typing_owner.sql"),
    ),
    (
        include_str!("migrations/017_transcript_keyed_only.sql"),
        include_str!("migrations/postgres/017_transcript_keyed_only.sql"),
    ),
    (
        include_str!("migrations/018_expiry_by_walk.sql"),
        include_str!("migrations/postgres/018_expiry_by_walk.sql"),
    ),
    (
        include_str!("migrations/019_inbox_unindexed.sql"),
        include_str!("migrations/postgres/019_inbox_unindexed.sql"),
    ),
    (
        include_str!("migrations/020_deliveries_text_unindexed.sql"),
        include_str!("migrations/postgres/020_deliveries_text_unindexed.sql"),
    ),
    (
        include_str!("migrations/021_transcript_run_in_session_index.sql"),
        include_str!("migrations/postgres/021_transcript_run_in_session_index.sql"),
    ),
    (
        include_str!("migrations/022_inbox_rows_binary.sql"),
        include_str!("migrations/postgres/022_inbox_rows_binary.sql"),
    ),
    (
        include_str!("migrations/025_usage.sql"),
        include_str!("migrations/postgres/025_usage.sql"),
    ),
    (
        include_str!("migrations/026_chain_runner.sql"),
        include_str!("migrations/postgres/026_chain_runner.sql"),
    ),
    (
        include_str!("migrations/027_chain_trigger.sql"),
        include_str!("migrations/postgres/027_chain_trigger.sql"),
    ),
    (
        include_str!("migrations/028_decisions.sql"),
        include_str!("migrations/postgres/028_decisions.sql"),
    ),
    (
        include_str!("migrations/029_delivery_trace.sql"),
        include_str!("migrations/postgres/029_delivery_trace.sql"),
    ),
    (
        include_str!("migrations/030_room_messages.sql"),
        include_str!("migrations/postgres/030_room_messages.sql"),
    ),
    (
        include_str!("migrations/031_local_rooms.sql"),
        include_str!("migrations/postgres/031_local_rooms.sql"),
    ),
    (
        include_str!("migrations/032_delivery_waiter.sql"),
        include_str!("migrations/postgres/032_delivery_waiter.sql"),
    ),
    (
        include_str!("migrations/033_room_export_pages.sql"),
        include_str!("migrations/postgres/033_room_export_pages.sql"),
    ),
    (
        include_str!("migrations/034_a2a_task_pages.sql"),
        include_str!("migrations/postgres/034_a2a_task_pages.sql"),
    ),
    (
        include_str!("migrations/035_decisions_pruned_by_id.sql"),
        include_str!("migrations/postgres/035_decisions_pruned_by_id.sql"),
    ),
];

/// The advisory lock key instances take around migrating a PostgreSQL database ("baton" in
/// ASCII), so two starting at once do not both run a step.
const MIGRATION_LOCK: i64 = 0x0062_6174_6f6e;

/// What a migration did: the schema version found, and the one it left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// The version the database had (0: new).
    pub from: u32,
    /// The version it has now ([`SCHEMA_VERSION`]).
    pub to: u32,
}

/// Brings the database up to [`SCHEMA_VERSION`].
pub(crate) fn run_migrations(db: Db<'_>) -> Result<Migrated, StoreError> {
    let failed = |source| StoreError::Migrate {
        version: SCHEMA_VERSION,
        source,
    };
    if db.engine() == Engine::Sqlite {
        return migrate(db);
    }
    db.execute_batch(&format!("SELECT pg_advisory_lock({MIGRATION_LOCK})"))
        .map_err(failed)?;
    let migrated = migrate(db);
    db.execute_batch(&format!("SELECT pg_advisory_unlock({MIGRATION_LOCK})"))
        .map_err(failed)?;
    migrated
}

fn migrate(db: Db<'_>) -> Result<Migrated, StoreError> {
    let from = user_version(db).map_err(|source| StoreError::Migrate {
        version: SCHEMA_VERSION,
        source,
    })?;
    if from > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            found: from,
            supported: SCHEMA_VERSION,
        });
    }
    for (version, (sqlite, postgres)) in (1..).zip(STEPS) {
        if from < version {
            let sql = match db.engine() {
                Engine::Sqlite => sqlite,
                Engine::Postgres => postgres,
            };
            step(db, version, sql)?;
        }
    }
    Ok(Migrated {
        from,
        to: SCHEMA_VERSION,
    })
}

/// The version recorded in the database (0 for a new one).
pub(crate) fn user_version(db: Db<'_>) -> Result<u32, DbError> {
    match db.engine() {
        Engine::Sqlite => db.query_row("PRAGMA user_version", &[], |row| row.get(0)),
        Engine::Postgres => {
            db.execute_batch(
                "CREATE TABLE IF NOT EXISTS schema_version (
                    id      BIGINT PRIMARY KEY CHECK (id = 1),
                    version BIGINT NOT NULL
                 )",
            )?;
            let version: Option<u32> = db
                .query_map("SELECT version FROM schema_version", &[], |row| row.get(0))?
                .pop();
            Ok(version.unwrap_or(0))
        }
    }
}

/// Records `version` as the database's schema version.
fn record_version(db: Db<'_>, version: u32) -> Result<(), DbError> {
    match db.engine() {
        // A pragma takes no parameters.
        Engine::Sqlite => db.execute_batch(&format!("PRAGMA user_version = {version}")),
        Engine::Postgres => db
            .execute(
                "INSERT INTO schema_version (id, version) VALUES (1, ?1)
                 ON CONFLICT (id) DO UPDATE SET version = excluded.version",
                args![version],
            )
            .map(drop),
    }
}

/// Runs one migration and records its version, atomically.
fn step(db: Db<'_>, version: u32, sql: &str) -> Result<(), StoreError> {
    let apply = || -> Result<(), DbError> {
        db.execute_batch(sql)?;
        record_version(db, version)
    };
    let in_transaction = || -> Result<(), DbError> {
        db.execute_batch("BEGIN")?;
        match apply() {
            Ok(()) => db.execute_batch("COMMIT"),
            Err(e) => {
                let _ = db.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    };
    in_transaction().map_err(|source| StoreError::Migrate { version, source })?;
    tracing::info!(version, "database schema migrated");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    /// Runs `test` on a bare connection (no migrations yet) to a fresh database of each engine.
    async fn on_each_engine(test: fn(Db<'_>, &str)) {
        for db in testing::engines().await {
            tokio::task::spawn_blocking(move || {
                db.connect().with_db(|conn| test(conn, db.engine()))
            })
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        }
    }

    fn count_tables(db: Db<'_>, name: &str) -> i64 {
        let sql = match db.engine() {
            Engine::Sqlite => "SELECT count(*) FROM sqlite_schema WHERE name = ?1",
            Engine::Postgres => {
                "SELECT count(*) FROM information_schema.tables
                 WHERE table_schema = 'public' AND table_name = ?1"
            }
        };
        db.query_row(sql, args![name], |row| row.get(0)).unwrap()
    }

    #[tokio::test]
    async fn migrates_a_new_database_once() {
        on_each_engine(|db, engine| {
            let first = run_migrations(db).unwrap();
            assert_eq!(
                first,
                Migrated {
                    from: 0,
                    to: SCHEMA_VERSION
                },
                "{engine}"
            );
            assert_eq!(user_version(db).unwrap(), SCHEMA_VERSION, "{engine}");
            // Running again is a no-op (it would fail on CREATE TABLE otherwise).
            let again = run_migrations(db).unwrap();
            assert_eq!(again.from, SCHEMA_VERSION, "{engine}");
            assert_eq!(count_tables(db, "transcript"), 1, "{engine}");
            assert_eq!(
                count_tables(db, "reply_files"),
                1,
                "{engine}: the last step ran"
            );
        })
        .await;
    }

    /// Version 22 files events in a binary form; a row filed as JSON by a gateway stopped
    /// before the upgrade must still be run after it.
    #[tokio::test]
    async fn an_event_filed_as_json_before_the_binary_rows_is_read_after_the_upgrade() {
        on_each_engine(|db, engine| {
            user_version(db).unwrap();
            for (version, (sqlite, postgres)) in (1..22).zip(STEPS) {
                let sql = match db.engine() {
                    Engine::Sqlite => sqlite,
                    Engine::Postgres => postgres,
                };
                step(db, version, sql).unwrap();
            }
            let mut event = baton_contract::InboundEvent::text_message(
                baton_contract::Platform::Slack,
                "snark".into(),
                "C1".into(),
                baton_contract::ChatKind::Group,
                baton_contract::Sender {
                    id: "U1".into(),
                    name: "Ada".into(),
                    is_bot: false,
                    is_self: false,
                },
                "1700000000.000100".into(),
                "@snark are you there?",
            );
            event.timestamp_ms = 1_700_000_000_000;
            let json = serde_json::to_string(&event).unwrap();
            db.execute(
                "INSERT INTO inbox (account, event, accepted_ms, owner) VALUES ('slack:snark', ?1, 1, '')",
                args![&json],
            )
            .unwrap();

            run_migrations(db).unwrap();
            let stored = db
                .query_row("SELECT event FROM inbox", &[], |row| {
                    row.get::<crate::store::inbox_row::Stored>(0)
                })
                .unwrap();
            let read = crate::store::inbox_row::decode(&stored.0).unwrap();
            assert_eq!(
                serde_json::to_string(&read).unwrap(),
                json,
                "{engine}: the event as it was filed"
            );
        })
        .await;
    }

    #[tokio::test]
    async fn refuses_a_newer_schema() {
        on_each_engine(|db, engine| {
            user_version(db).unwrap();
            record_version(db, SCHEMA_VERSION + 1).unwrap();
            let err = run_migrations(db).unwrap_err();
            assert!(matches!(err, StoreError::TooNew { .. }), "{engine}: {err}");
        })
        .await;
    }

    #[tokio::test]
    async fn a_failed_step_leaves_the_version_unchanged() {
        on_each_engine(|db, engine| {
            user_version(db).unwrap();
            let err = step(db, 1, "CREATE TABLE a (x BIGINT); NOT SQL").unwrap_err();
            assert!(
                matches!(err, StoreError::Migrate { version: 1, .. }),
                "{engine}: {err}"
            );
            assert_eq!(user_version(db).unwrap(), 0, "{engine}");
            assert_eq!(
                count_tables(db, "a"),
                0,
                "{engine}: the half-applied step was rolled back"
            );
        })
        .await;
    }
}
