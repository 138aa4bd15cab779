//! `baton migrate`: brings the configured database's schema up to this build's and says from
//! which version to which. `baton run` migrates on start too; this lets an operator do it first
//! (before starting several instances on one PostgreSQL database, or to check a backup opens).

use std::path::Path;

use anyhow::Context as _;
use clap::Args;

use crate::gateway::Database;
use crate::store::{Migrated, StoreOptions};

/// Which database to migrate.
#[derive(Debug, Args)]
pub(super) struct MigrateArgs {
    /// Migrate this SQLite file instead of the configured database.
    #[arg(long)]
    database: Option<String>,
}

/// Runs `baton migrate`.
pub(super) async fn migrate(config: &Path, args: MigrateArgs) -> anyhow::Result<()> {
    let database = match args.database {
        Some(path) => Database::Sqlite(path),
        None => Database::configured(&super::load(config)?, &|name| std::env::var(name).ok())?,
    };
    let shown = database.display();
    let store = database
        .open(StoreOptions::default())
        .await
        .with_context(|| format!("migrating {shown}"))?;
    let migrated = store.migrated();
    store.close().await?;
    println!("{}", outcome(&shown, migrated));
    Ok(())
}

/// What `baton migrate` says it did to the database shown as `shown`.
fn outcome(shown: &str, migrated: Migrated) -> String {
    if migrated.from == migrated.to {
        format!("{shown}: schema already at version {}", migrated.to)
    } else {
        format!(
            "{shown}: schema migrated from version {} to {}",
            migrated.from, migrated.to
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_new_database_is_migrated_from_zero_then_found_current() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db").to_str().unwrap().to_owned();
        let mut said = Vec::new();
        for _ in 0..2 {
            let store = Database::Sqlite(path.clone())
                .open(StoreOptions::default())
                .await
                .unwrap();
            said.push(outcome("m.db", store.migrated()));
            store.close().await.unwrap();
        }
        let latest = crate::store::SCHEMA_VERSION;
        assert_eq!(
            said,
            [
                format!("m.db: schema migrated from version 0 to {latest}"),
                format!("m.db: schema already at version {latest}"),
            ]
        );
    }
}
