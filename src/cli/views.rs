//! Read-only views of the store: `baton transcript`, `baton sessions`, `baton deliveries`,
//! `baton pairing` (whose `approve` writes, and is audited). `baton chains` is in `chains.rs`.
//! They open the database named by the config (or `--database`) next to a running gateway:
//! SQLite's WAL lets them read while it writes, and on PostgreSQL any machine that reaches the
//! database reads what every instance wrote.

use super::out::say;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Subcommand, ValueEnum};

use super::suggest::nearest;
use crate::gateway::Database;
use crate::session::SessionKey;
use crate::store::{DeliveryQuery, Entry, NewAudit, Store, StoreOptions, TranscriptQuery};
use crate::timing::now_ms;

/// Which database to read.
#[derive(Debug, Args)]
pub(super) struct StoreArgs {
    /// Read this SQLite file instead of the configured database (`gateway.database`, or the
    /// PostgreSQL database of `gateway.database_url_env`).
    #[arg(long, global = true)]
    database: Option<String>,
}

/// Output format of `baton transcript`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// `time speaker [kind]: text`.
    Text,
    /// One JSON object per entry.
    Jsonl,
}

/// Entries read at a time by `baton transcript --all`.
const EXPORT_PAGE: usize = 1000;

/// Which transcript.
#[derive(Debug, Args)]
pub(super) struct TranscriptArgs {
    /// The session key (`bot:<bot>:<platform>:<account>:<chat>[:thread:<id>]`).
    #[arg(long, conflicts_with_all = ["bot", "chat", "all"])]
    session: Option<String>,
    /// Every session's entries, in the order they were written (an export, with
    /// `--format jsonl`).
    #[arg(long, conflicts_with_all = ["bot", "chat"])]
    all: bool,
    /// The bot (with --chat).
    #[arg(long, requires = "chat")]
    bot: Option<String>,
    /// The chat id (with --bot).
    #[arg(long, requires = "bot")]
    chat: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Keep printing new entries as they are written.
    #[arg(long)]
    follow: bool,
    #[command(flatten)]
    store: StoreArgs,
}

/// `baton pairing list|approve CODE`.
#[derive(Debug, Args)]
pub(super) struct PairingArgs {
    #[command(subcommand)]
    action: PairingAction,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Debug, Subcommand)]
enum PairingAction {
    /// Pending and approved pairings.
    List,
    /// Let the sender holding CODE talk to the bots in DMs.
    Approve {
        /// The code the sender was given.
        code: String,
    },
}

/// The store named by `--database`, or by the config: its PostgreSQL database when
/// `gateway.database_url_env` is set, else its SQLite file. A SQLite file must exist: these
/// commands only read (or approve a code that can only be in an existing store), and opening a
/// missing file would create an empty database and print an empty answer.
pub(super) async fn open(config: &Path, args: &StoreArgs) -> anyhow::Result<Store> {
    let (database, named_by) = match &args.database {
        Some(db) => (Database::Sqlite(db.clone()), "--database".to_owned()),
        None => (
            Database::configured(&super::load(config)?, &|name| std::env::var(name).ok())?,
            format!("`gateway.database` in {}", config.display()),
        ),
    };
    if let Database::Sqlite(path) = &database
        && path != ":memory:"
        && !Path::new(path).exists()
    {
        let shown = std::path::absolute(path).unwrap_or_else(|_| path.clone().into());
        anyhow::bail!(
            "no database at {} (named by {named_by}); run this where `baton run` writes it, \
             or pass --database PATH",
            shown.display()
        );
    }
    let shown = database.display();
    database
        .open(StoreOptions::default())
        .await
        .with_context(|| format!("opening {shown}"))
}

/// The session `key` names if the store has it, else an error offering the nearest keys.
async fn known_session(store: &Store, key: &str) -> anyhow::Result<SessionKey> {
    let sessions = store.sessions().await?;
    if let Some(known) = sessions.iter().find(|s| s.key.render() == key) {
        return Ok(known.key.clone());
    }
    let keys: Vec<String> = sessions.iter().map(|s| s.key.render()).collect();
    let near = nearest(key, keys.iter().map(String::as_str));
    if near.is_empty() {
        anyhow::bail!("no session `{key}` in the store; `baton sessions` lists them");
    }
    anyhow::bail!(
        "no session `{key}` in the store; did you mean:\n  {}",
        near.join("\n  ")
    )
}

pub(super) async fn transcript(config: &Path, args: TranscriptArgs) -> anyhow::Result<()> {
    let store = open(config, &args.store).await?;
    let session = match (&args.session, &args.bot, &args.chat, args.all) {
        (_, _, _, true) => None,
        (Some(key), _, _, _) => Some(known_session(&store, key).await?),
        (None, Some(bot), Some(chat), _) => Some(find_session(&store, bot, chat).await?),
        _ => anyhow::bail!(
            "name the session: --session KEY, or --bot ID --chat ID (or --all for every session)"
        ),
    };
    let mut after = None;
    loop {
        let (entries, more) = match &session {
            Some(session) => {
                let query = TranscriptQuery {
                    after_id: after,
                    ..TranscriptQuery::session(session.clone())
                };
                (store.transcript(query).await?, false)
            }
            None => {
                let page = store
                    .transcript_page(after.unwrap_or(0), EXPORT_PAGE)
                    .await?;
                let more = page.len() == EXPORT_PAGE;
                (page, more)
            }
        };
        for entry in entries {
            say!("{}", render(&entry, args.format)?)?;
            after = Some(entry.id);
        }
        if more {
            continue;
        }
        if !args.follow {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn find_session(store: &Store, bot: &str, chat: &str) -> anyhow::Result<SessionKey> {
    let sessions = store.sessions().await?;
    let found: Vec<_> = sessions
        .iter()
        .filter(|s| s.bot == bot && s.chat == chat)
        .collect();
    match found.as_slice() {
        [one] => Ok(one.key.clone()),
        [] => {
            anyhow::bail!("no session of bot `{bot}` in chat `{chat}`; `baton sessions` lists them")
        }
        many => {
            let keys: Vec<_> = many.iter().map(|s| s.key.render()).collect();
            anyhow::bail!(
                "several sessions match; pick one with --session:\n  {}",
                keys.join("\n  ")
            )
        }
    }
}

fn render(entry: &Entry, format: Format) -> serde_json::Result<String> {
    match format {
        Format::Jsonl => serde_json::to_string(entry),
        Format::Text => Ok(entry.line()),
    }
}

pub(super) async fn sessions(config: &Path, args: StoreArgs) -> anyhow::Result<()> {
    let store = open(config, &args).await?;
    say!("{:<56} {:>8}  last activity", "SESSION", "ENTRIES")?;
    for s in store.sessions().await? {
        let ago = (now_ms() - s.updated_ms).max(0) / 1000;
        say!("{:<56} {:>8}  {ago} s ago", s.key.render(), s.entries)?;
    }
    Ok(())
}

/// Which deliveries to list.
#[derive(Debug, Args)]
pub(super) struct DeliveriesArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Only those sent from or to this session.
    #[arg(long)]
    session: Option<String>,
    /// Only queued or running ones.
    #[arg(long)]
    open: bool,
    /// At most this many, newest first.
    #[arg(long, default_value_t = 50)]
    limit: usize,
}

pub(super) async fn deliveries(config: &Path, args: DeliveriesArgs) -> anyhow::Result<()> {
    let store = open(config, &args.store).await?;
    let session = match &args.session {
        Some(key) => Some(known_session(&store, key).await?),
        None => None,
    };
    let query = DeliveryQuery {
        session,
        open_only: args.open,
        limit: args.limit,
    };
    say!(
        "{:<36} {:<10} {:<10} {:<10} {:>5} {:>7}  OUTCOME",
        "RUN",
        "FROM",
        "TO",
        "STATE",
        "DEPTH",
        "AGE"
    )?;
    for d in store.deliveries(query).await? {
        let age = (now_ms() - d.created_ms).max(0) / 1000;
        let outcome = d.reason.as_deref().or(d.reply.as_deref()).unwrap_or("");
        say!(
            "{:<36} {:<10} {:<10} {:<10} {:>5} {:>6}s  {}",
            d.run_id,
            d.sender,
            d.target,
            d.state,
            d.depth,
            age,
            one_line(outcome, 60)
        )?;
    }
    store.close().await?;
    Ok(())
}

/// `text` on one line, cut to `max` characters.
pub(super) fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

pub(super) async fn pairing(config: &Path, args: PairingArgs) -> anyhow::Result<()> {
    let store = open(config, &args.store).await?;
    match args.action {
        PairingAction::List => {
            let now = now_ms();
            say!(
                "{:<10} {:<12} {:<24} {:<8} STATE",
                "PLATFORM",
                "ACCOUNT",
                "USER",
                "CODE"
            )?;
            for p in store.pairings().await? {
                let account = p.account.as_deref().unwrap_or("-");
                say!(
                    "{:<10} {:<12} {:<24} {:<8} {}",
                    p.platform,
                    account,
                    p.user,
                    p.code,
                    p.state(now)
                )?;
            }
        }
        PairingAction::Approve { code } => {
            let approved = store.approve_pairing(&code, now_ms()).await?;
            let answer = crate::admin::pairing_answer(&code, approved);
            let outcome = match &answer {
                Ok(_) => "ok".to_owned(),
                Err(text) => format!("error: {text}"),
            };
            // Approvals are audited wherever they are made; from the command line the "chat"
            // is the terminal and the user is whoever ran it.
            let record = NewAudit {
                ts_ms: now_ms(),
                platform: "cli".to_owned(),
                chat: "-".to_owned(),
                user: std::env::var("USER").unwrap_or_else(|_| "cli".to_owned()),
                command: format!("baton pairing approve {}", code.trim()),
                outcome,
            };
            store.audit(record).await?;
            store.close().await?;
            return match answer {
                Ok(text) => {
                    say!("{text}")?;
                    Ok(())
                }
                Err(text) => Err(anyhow::anyhow!(text)),
            };
        }
    }
    store.close().await?;
    Ok(())
}
