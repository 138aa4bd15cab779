//! `baton chat BOT`: a terminal conversation with one bot through the local channel. It starts
//! the pipeline in-process (no HTTP listener), so it works with or without a running gateway.

use std::path::Path;

use anyhow::Context as _;
use baton_contract::Platform;
use clap::Args;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::bot_id::BotId;
use crate::dispatcher::Handled;
use crate::gateway::{Gateway, ScheduleClock, StartOptions};

/// Who talks to whom.
#[derive(Debug, Args)]
pub(super) struct ChatArgs {
    /// The bot to talk to.
    bot: BotId,
    /// Your name in the transcript (`[admins] local` names may run /baton commands).
    #[arg(long, env = "USER", default_value = "local-user")]
    user: String,
    /// Use this SQLite file instead of `gateway.database`.
    #[arg(long)]
    database: Option<String>,
}

pub(super) async fn chat(config: &Path, args: ChatArgs) -> anyhow::Result<()> {
    let config = super::load(config)?;
    // A terminal conversation is a gateway too: it would re-run a running one's inbox.
    let _lock = super::run::lock_database(&config, args.database.as_deref())?;
    let options = StartOptions {
        database: args.database.clone(),
        // A terminal conversation; heartbeats belong to the running gateway.
        clock: ScheduleClock::Manual,
        ..StartOptions::default()
    };
    let gateway = Gateway::start(config, options).await?;
    let result = converse(&gateway, &args).await;
    gateway.shutdown().await;
    result
}

async fn converse(gateway: &Gateway, args: &ChatArgs) -> anyhow::Result<()> {
    crate::local::check_sender(&args.user).with_context(|| "--user (or $USER)")?;
    let account = gateway
        .dispatcher()
        .engine()
        .roster()
        .account_of_bot(Platform::Local, &args.bot)
        .map(|a| a.id.clone())
        .with_context(|| format!("no bot `{}`; `baton check` lists the roster", args.bot))?;
    let mut out = tokio::io::stdout();
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    out.write_all(
        format!(
            "talking to {} as {} (Ctrl-D to quit)\n> ",
            args.bot, args.user
        )
        .as_bytes(),
    )
    .await?;
    out.flush().await?;
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            out.write_all(b"> ").await?;
            out.flush().await?;
            continue;
        }
        let event = gateway.hub().direct(&account, &args.user, &line).await?;
        let answer = match gateway.dispatcher().handle(event).await {
            Handled::Replied(text) | Handled::Admin(text) => format!("{}: {text}", args.bot),
            Handled::Silent => format!("({} stays silent)", args.bot),
            Handled::Answered(id) => format!("(your answer to {id} was passed on)"),
            Handled::Failed(err) => format!("(the turn failed: {err})"),
            other => format!("(not answered: {other:?})"),
        };
        out.write_all(format!("{answer}\n> ").as_bytes()).await?;
        out.flush().await?;
    }
    out.write_all(b"\n").await?;
    Ok(())
}
