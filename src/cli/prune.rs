//! `baton prune --before DATE [--table T,...]`: delete old rows now, by hand, with the same
//! rules as `[retention]` (`store/prune.rs` says what each keeps). Export first with
//! `baton transcript --all --format jsonl`. It writes through SQLite's own locking, so it runs
//! beside a running gateway without taking the gateway's lock.

use std::path::Path;

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use clap::{Args, ValueEnum};

use super::views::{StoreArgs, open};
use crate::config::parse_age;
use crate::store::{MIN_AGE_MS, PruneTable};
use crate::timing::now_ms;

/// What to prune.
#[derive(Debug, Args)]
pub(super) struct PruneArgs {
    /// Delete rows older than this: a date (`2026-01-31`, midnight UTC), a time
    /// (`2026-01-31T12:00:00Z`), or an age (`90d`, `12h`, `2w`).
    #[arg(long)]
    before: String,
    /// Only these tables (repeat the flag or separate with commas); all of them by default.
    #[arg(long = "table", value_enum, value_delimiter = ',')]
    tables: Vec<Table>,
    #[command(flatten)]
    store: StoreArgs,
}

/// A table `baton prune` can prune.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Table {
    /// Transcript entries.
    Transcripts,
    /// Admin command audit rows.
    Audit,
    /// Settled bot-to-bot deliveries.
    Deliveries,
    /// Closed chains and their messages.
    Chains,
    /// Pairing requests never approved.
    Pairing,
    /// History buffers and cursors of chats quiet since before the date.
    History,
    /// Artifacts made before the date (and their bytes, once no artifact names them).
    Artifacts,
    /// Settled escalations (never a pending one).
    Escalations,
    /// Sessions idle since before the date, with their transcripts.
    Sessions,
    /// What model calls spent (usage rows), by when the call was made.
    Usage,
}

impl From<Table> for PruneTable {
    fn from(table: Table) -> Self {
        match table {
            Table::Transcripts => PruneTable::Transcripts,
            Table::Audit => PruneTable::Audit,
            Table::Deliveries => PruneTable::Deliveries,
            Table::Chains => PruneTable::Chains,
            Table::Pairing => PruneTable::Pairing,
            Table::History => PruneTable::History,
            Table::Artifacts => PruneTable::Artifacts,
            Table::Escalations => PruneTable::Escalations,
            Table::Sessions => PruneTable::Sessions,
            Table::Usage => PruneTable::Usage,
        }
    }
}

pub(super) async fn prune(config: &Path, args: PruneArgs) -> anyhow::Result<()> {
    let now = now_ms();
    let asked = parse_before(&args.before, now)?;
    let before = asked.min(now - MIN_AGE_MS);
    if before < asked {
        println!(
            "rows younger than a day are never pruned: pruning before {} instead",
            show(before)
        );
    }
    let tables: Vec<PruneTable> = if args.tables.is_empty() {
        PruneTable::ALL.to_vec()
    } else {
        args.tables.iter().map(|&t| t.into()).collect()
    };
    let store = open(config, &args.store).await?;
    for table in tables {
        let rows = store.prune(table, before, now).await?;
        println!("{}: {rows} row(s) deleted", table.as_str());
    }
    store.close().await?;
    Ok(())
}

/// `--before` as milliseconds since the epoch.
fn parse_before(text: &str, now_ms: i64) -> anyhow::Result<i64> {
    let text = text.trim();
    if let Ok(date) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(date
            .and_time(chrono::NaiveTime::MIN)
            .and_utc()
            .timestamp_millis());
    }
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Ok(time.timestamp_millis());
    }
    match parse_age(text) {
        Ok(Some(age)) => {
            Ok(now_ms.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX)))
        }
        _ => anyhow::bail!(
            "--before `{text}` is not a date, a time or an age; write e.g. 2026-01-31 \
             (midnight UTC), 2026-01-31T12:00:00Z, or 90d (units h, d, w)"
        ),
    }
}

fn show(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.to_rfc3339_opts(SecondsFormat::Secs, true),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_times_and_ages() {
        let now = 1_800_000_000_000;
        assert_eq!(parse_before("2026-01-31", now).unwrap(), 1_769_817_600_000);
        assert_eq!(
            parse_before("2026-01-31T12:00:00Z", now).unwrap(),
            1_769_817_600_000 + 12 * 3_600_000
        );
        assert_eq!(parse_before("2d", now).unwrap(), now - 2 * 86_400_000);
        for bad in ["yesterday", "2026-13-01", "keep", ""] {
            let err = parse_before(bad, now).unwrap_err().to_string();
            assert!(err.contains("2026-01-31"), "{bad}: {err}");
        }
    }
}
