//! `baton artifacts [--session KEY | --run ID]`: the artifacts in the store, oldest first, with
//! who made each and from what. Read-only, next to a running gateway.

use super::out::say;
use std::path::Path;

use clap::Args;

use super::views::{StoreArgs, one_line, open};
use crate::store::ArtifactQuery;
use crate::timing::now_ms;

/// Which artifacts to show.
#[derive(Debug, Args)]
pub(super) struct ArtifactsArgs {
    /// Only those made in this session (a session key).
    #[arg(long, conflicts_with = "run")]
    session: Option<String>,
    /// Only those made by this run (a `sessions_send` run id, a turn's run).
    #[arg(long)]
    run: Option<String>,
    /// At most this many, the newest.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    #[command(flatten)]
    store: StoreArgs,
}

pub(super) async fn artifacts(config: &Path, args: ArtifactsArgs) -> anyhow::Result<()> {
    let store = open(config, &args.store).await?;
    let query = match (args.session, args.run) {
        (Some(session), _) => ArtifactQuery::Session(session.parse()?),
        (None, Some(run)) => ArtifactQuery::Run(run),
        (None, None) => ArtifactQuery::All,
    };
    say!(
        "{:<28} {:<24} {:<20} {:>10} {:<10} {:>7}  RUN (FROM)",
        "ARTIFACT",
        "NAME",
        "TYPE",
        "BYTES",
        "BOT",
        "AGE"
    )?;
    for a in store.artifacts(query, args.limit).await? {
        let age = (now_ms() - a.created_ms).max(0) / 1000;
        let from = if a.inputs.is_empty() {
            String::new()
        } else {
            format!(" (from {})", a.inputs.join(", "))
        };
        say!(
            "{:<28} {:<24} {:<20} {:>10} {:<10} {:>6}s  {}{from}",
            a.id,
            one_line(&a.name, 24),
            one_line(&a.media_type, 20),
            a.bytes,
            a.bot,
            age,
            a.run_id.as_deref().unwrap_or("-"),
        )?;
    }
    store.close().await?;
    Ok(())
}
