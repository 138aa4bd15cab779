//! `baton why --message ID | --event ID [--format text|json]`: what each bot's pipeline decided
//! on one inbound message, and why, read from the configured store: the same report as
//! `GET /api/why` (`src/why.rs`).

use std::path::Path;

use clap::{Args, ValueEnum};

use super::views::{StoreArgs, open};
use crate::why::{self, WhyParams};

/// Which message.
#[derive(Debug, Args)]
#[group(required = true, multiple = false, args = ["message", "event"])]
pub(super) struct WhyArgs {
    /// The platform's message id (as the platform gives it: Slack's `ts`, Discord's snowflake).
    #[arg(long)]
    message: Option<String>,
    /// The platform's event id (Slack's `Ev...`), where it has one.
    #[arg(long)]
    event: Option<String>,
    /// `text` (a line per decision) or `json` (as `GET /api/why`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    #[command(flatten)]
    store: StoreArgs,
}

/// How the report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// A line per decision, with what its turn did under it.
    Text,
    /// The JSON `GET /api/why` answers.
    Json,
}

pub(super) async fn why(config: &Path, args: WhyArgs) -> anyhow::Result<()> {
    let store = open(config, &args.store).await?;
    let params = WhyParams {
        message: args.message,
        event: args.event,
    };
    let found = why::why(&store, params.query()?).await?;
    match args.format {
        Format::Text => print!("{}", why::to_text(&found)),
        Format::Json => println!("{}", why::to_json(&found)),
    }
    Ok(())
}
