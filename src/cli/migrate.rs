//! `baton migrate`: brings the configured database's schema up to this build's and says from
//! which version to which. `baton run` migrates on start too; this lets an operator do it first
//! (before starting several instances on one PostgreSQL database, or to check a backup opens).

use std::path::Path;

use anyhow::Context as _;
use clap::Args;

use crate::gateway::Database;
use crate::store::StoreOptions;

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
    if migrated.from == migrated.to {
        println!("{shown}: schema already at version {}", migrated.to);
    } else {
        println!(
            "{shown}: schema migrated from version {} to {}",
            migrated.from, migrated.to
        );
    }
    Ok(())
}
