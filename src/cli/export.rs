//! `baton export --chat PLATFORM:CHAT [--since T] [--until T] [--format jsonl|markdown]`: the
//! whole multi-bot room in time order, read from the configured store a page at a time and
//! written to stdout line by line (logs go to stderr): the same lines as
//! `GET /api/chats/{platform}/{chat}/export` (`src/export.rs`).

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use clap::{Args, ValueEnum};
use futures::StreamExt;

use super::views::{StoreArgs, open};
use crate::export::{self, ExportParams};
use crate::timing::now_ms;

/// Which room, when, and how.
#[derive(Debug, Args)]
pub(super) struct ExportArgs {
    /// The room, as `PLATFORM:CHAT` (`slack:C0123`); its threads are included.
    #[arg(long)]
    chat: String,
    /// From when: ms since the epoch, an RFC 3339 time, or an age (`24h`, `7d`).
    #[arg(long)]
    since: Option<String>,
    /// Up to when, written the same way.
    #[arg(long)]
    until: Option<String>,
    /// `jsonl` (a JSON object per line) or `markdown`.
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    format: Format,
    #[command(flatten)]
    store: StoreArgs,
}

/// How the room is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// One JSON object per line.
    Jsonl,
    /// A Markdown list.
    Markdown,
}

pub(super) async fn export(config: &Path, args: ExportArgs) -> anyhow::Result<()> {
    let (platform, chat) = args.chat.split_once(':').with_context(|| {
        format!(
            "--chat `{}`: write PLATFORM:CHAT, e.g. slack:C0123",
            args.chat
        )
    })?;
    let params = ExportParams {
        since: args.since,
        until: args.until,
        format: Some(
            match args.format {
                Format::Jsonl => "jsonl",
                Format::Markdown => "markdown",
            }
            .to_owned(),
        ),
    };
    let wanted = params.resolve(platform, chat, now_ms())?;
    let store = open(config, &args.store).await?;
    let mut lines = std::pin::pin!(export::lines(store.clone(), wanted));
    let mut out = std::io::BufWriter::new(std::io::stdout());
    while let Some(line) = lines.next().await {
        out.write_all(line?.as_bytes())?;
    }
    out.flush()?;
    store.close().await?;
    Ok(())
}
