//! `baton cluster status`: the instances sharing the configured database, when each last
//! renewed its leases, and the accounts each holds now. Read from the database itself, so it
//! works from any machine that can reach it, with no instance's HTTP port needed.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use clap::{Args, Subcommand};

use crate::gateway::Database;
use crate::store::{ClusterStatus, StoreOptions};

/// `baton cluster ...`.
#[derive(Debug, Args)]
pub(super) struct ClusterArgs {
    #[command(subcommand)]
    action: ClusterAction,
    /// Read this SQLite file instead of the configured database.
    #[arg(long, global = true)]
    database: Option<String>,
}

#[derive(Debug, Subcommand)]
enum ClusterAction {
    /// Instances, their last renewal and the accounts each holds.
    Status,
}

/// Runs `baton cluster`.
pub(super) async fn cluster(config: &Path, args: ClusterArgs) -> anyhow::Result<()> {
    let ClusterAction::Status = args.action;
    let database = match args.database {
        Some(path) => Database::Sqlite(path),
        None => Database::configured(&super::load(config)?, &|name| std::env::var(name).ok())?,
    };
    let shown = database.display();
    let store = database
        .open(StoreOptions::default())
        .await
        .with_context(|| format!("opening {shown}"))?;
    let status = store.cluster_status().await?;
    store.close().await?;
    print!("{}", table(&status));
    Ok(())
}

/// The status as a table, ages by the database's clock.
fn table(status: &ClusterStatus) -> String {
    if status.instances.is_empty() {
        return "no instance is running on this database\n".to_owned();
    }
    let mut out = format!(
        "{:<32} {:<10} {:>12} {:>14}  ACCOUNTS\n",
        "INSTANCE", "VERSION", "STARTED", "LAST RENEWAL"
    );
    for instance in &status.instances {
        let held: Vec<String> = instance
            .accounts
            .iter()
            .map(|lease| format!("{}/{}", lease.platform, lease.account))
            .collect();
        let held = if held.is_empty() {
            "-".to_owned()
        } else {
            held.join(", ")
        };
        let _ = writeln!(
            out,
            "{:<32} {:<10} {:>12} {:>14}  {held}",
            instance.id,
            instance.version,
            ago(status.now_ms - instance.started_ms),
            ago(status.now_ms - instance.renewed_ms),
        );
    }
    out
}

/// `ms` as "3 s ago", "4 min ago", "2 h ago".
fn ago(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..120 => format!("{s} s ago"),
        120..7200 => format!("{} min ago", s / 60),
        _ => format!("{} h ago", s / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{HeldLease, InstanceStatus};

    #[test]
    fn the_table_shows_each_instance_its_renewal_and_its_accounts() {
        let instance = |id: &str, renewed_ms, accounts: &[&str]| InstanceStatus {
            id: id.into(),
            started_ms: 0,
            renewed_ms,
            version: "0.1.0".into(),
            accounts: accounts
                .iter()
                .map(|a| HeldLease {
                    platform: "slack".into(),
                    account: (*a).into(),
                    expires_ms: 0,
                })
                .collect(),
        };
        let status = ClusterStatus {
            now_ms: 9_000_000,
            instances: vec![
                instance("baton-a", 8_997_000, &["snark", "caid"]),
                instance("baton-b", 8_999_000, &[]),
            ],
        };
        let table = table(&status);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3, "{table}");
        assert!(lines[0].starts_with("INSTANCE"), "{table}");
        assert!(lines[1].starts_with("baton-a"), "{table}");
        assert!(lines[1].contains("2 h ago"), "started: {table}");
        assert!(lines[1].contains("3 s ago"), "renewed: {table}");
        assert!(lines[1].ends_with("slack/snark, slack/caid"), "{table}");
        assert!(lines[2].ends_with(" -"), "{table}");
        let empty = ClusterStatus {
            now_ms: 0,
            instances: vec![],
        };
        assert!(super::table(&empty).contains("no instance"));
    }
}
