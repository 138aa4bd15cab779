//! `baton usage [--bot B] [--chat C] [--since 24h] [--group-by bot|chat|trigger|model]
//! [--format text|json]`: what the model calls spent, read from the store (the last 24 h by bot
//! when not told otherwise), the same report as `GET /api/usage`.

use std::path::Path;

use clap::{Args, ValueEnum};

use super::views::{StoreArgs, open};
use crate::budget::report::{self, UsageParams};
use crate::timing::now_ms;

/// What to report.
#[derive(Debug, Args)]
pub(super) struct UsageArgs {
    /// Only this bot's calls.
    #[arg(long)]
    bot: Option<String>,
    /// Only calls charged to this chat (its id as the platform gives it).
    #[arg(long)]
    chat: Option<String>,
    /// Since when: an age (`24h`, `7d`, `30m`) or ms since the epoch.
    #[arg(long, default_value = "24h")]
    since: String,
    /// Sum per `bot`, `chat`, `trigger` or `model`.
    #[arg(long = "group-by", default_value = "bot")]
    group_by: String,
    /// `text` (a table) or `json` (as `GET /api/usage`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    #[command(flatten)]
    store: StoreArgs,
}

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// A table.
    Text,
    /// The JSON `GET /api/usage` answers.
    Json,
}

pub(super) async fn usage(config: &Path, args: UsageArgs) -> anyhow::Result<()> {
    let store = open(config, &args.store).await?;
    let params = UsageParams {
        bot: args.bot,
        chat: args.chat,
        since: Some(args.since),
        group_by: Some(args.group_by),
    };
    let (group, rows) = report::usage(&store, &params, now_ms()).await??;
    match args.format {
        Format::Text => print!("{}", report::to_table(group, &rows)),
        Format::Json => println!("{}", report::to_json(group, &rows)),
    }
    Ok(())
}
