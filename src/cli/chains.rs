//! `baton chains [ID]`: the chains in the store, or one chain with everything said and handed
//! over in it, and the artifacts each turn took in and made. Read-only, next to a running gateway
//! (SQLite's WAL lets it read while it writes).

use super::out::say;
use std::path::Path;

use clap::Args;

use super::views::{StoreArgs, one_line, open};
use crate::bot_id::names;
use crate::store::{ChainEntryKind, ChainQuery};
use crate::timing::now_ms;

/// Which chains to show.
#[derive(Debug, Args)]
pub(super) struct ChainsArgs {
    /// Show this chain and its messages.
    id: Option<String>,
    /// At most this many chains, newest first.
    #[arg(long, default_value_t = 50)]
    limit: usize,
    #[command(flatten)]
    store: StoreArgs,
}

pub(super) async fn chains(config: &Path, args: ChainsArgs) -> anyhow::Result<()> {
    let store = open(config, &args.store).await?;
    let Some(id) = args.id else {
        say!(
            "{:<10} {:<10} {:<10} {:<10} {:>4} {:>7}  NAME (PARTICIPANTS)",
            "CHAIN",
            "STATE",
            "COORD",
            "HOLDER",
            "TURN",
            "AGE"
        )?;
        let query = ChainQuery {
            open_in: None,
            limit: Some(args.limit),
        };
        for c in store.chains(query).await? {
            let age = (now_ms() - c.created_ms).max(0) / 1000;
            say!(
                "{:<10} {:<10} {:<10} {:<10} {:>4} {:>6}s  {} ({})",
                c.id,
                c.state.as_str(),
                c.coordinator_name(),
                c.holder_name(),
                c.turn,
                age,
                one_line(&c.name, 40),
                names(&c.participants)
            )?;
        }
        store.close().await?;
        return Ok(());
    };
    let Some(chain) = store.chain(&id).await? else {
        anyhow::bail!("no chain `{id}`; `baton chains` lists them");
    };
    say!("chain {} \"{}\"", chain.id, chain.name)?;
    say!(
        "state {}, turn {}, round {}; {} holds the turn",
        chain.state,
        chain.turn,
        chain.round,
        chain.holder_name()
    )?;
    say!(
        "coordinator {}; participants {}; started by {} in {}:{}{}",
        chain.coordinator_name(),
        names(&chain.participants),
        chain.started_by,
        chain.origin.platform,
        chain.origin.chat,
        chain
            .origin
            .thread
            .as_deref()
            .map(|t| format!(" (thread {t})"))
            .unwrap_or_default()
    )?;
    if let Some(reason) = &chain.closed_reason {
        say!("ended: {reason}")?;
    }
    say!("")?;
    for e in store.chain_entries(&chain.id).await? {
        let who = match (e.kind, &e.recipient) {
            (ChainEntryKind::Handoff, Some(to)) => format!("{} → {to}", e.sender),
            _ => e.sender.clone(),
        };
        say!(
            "turn {:>3} {:<8} {who}: {}",
            e.turn,
            e.kind.as_str(),
            e.content
        )?;
    }
    let steps = store.chain_steps(&chain.id).await?;
    if !steps.is_empty() {
        say!("")?;
        say!("artifacts by turn:")?;
    }
    for step in steps {
        for a in &step.artifacts_in {
            say!(
                "turn {:>3} {} took {} `{}` ({}, {} bytes, made by {})",
                step.turn,
                step.bot,
                a.id,
                a.name,
                a.media_type,
                a.bytes,
                a.bot
            )?;
        }
        for a in &step.artifacts_out {
            let from = if a.inputs.is_empty() {
                String::new()
            } else {
                format!(" from {}", a.inputs.join(", "))
            };
            say!(
                "turn {:>3} {} made {} `{}` ({}, {} bytes){from}",
                step.turn,
                a.bot,
                a.id,
                a.name,
                a.media_type,
                a.bytes
            )?;
        }
    }
    store.close().await?;
    Ok(())
}
