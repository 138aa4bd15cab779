//! The `baton` command line: `run`, `check`, `chat`, `transcript`, `sessions`, `chains`,
//! `deliveries`, `artifacts`, `pairing`, `prune`, `migrate`, `cluster`, `setup`, `doctor`. Each subcommand lives in its own file; this one parses
//! arguments, sets up logging and maps outcomes to exit codes (0 ok, 1 a problem the user must
//! fix).

mod artifacts;
mod chains;
mod chat;
mod check;
mod cluster;
mod doctor;
mod export;
mod migrate;
mod out;
mod prune;
mod run;
mod schema;
mod setup;
mod suggest;
mod usage;
mod views;
mod why;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::config::{Config, ConfigError};

/// baton: many AI bots in your group chats, well-behaved.
#[derive(Debug, Parser)]
#[command(name = "baton", version, about)]
pub struct Cli {
    /// The config file.
    #[arg(
        long,
        global = true,
        env = "BATON_CONFIG",
        default_value = "baton.toml"
    )]
    config: PathBuf,
    /// Log format on stderr (`RUST_LOG` filters).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    /// Human-readable.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Start the gateway: connect every account, serve HTTP, run until SIGINT/SIGTERM.
    Run(run::RunArgs),
    /// Validate the config and the environment it names; print the roster and chat policies.
    Check,
    /// Talk to one bot in the terminal, through the local channel and the full pipeline.
    Chat(chat::ChatArgs),
    /// Print a session's transcript.
    Transcript(views::TranscriptArgs),
    /// List the sessions the store holds.
    Sessions(views::StoreArgs),
    /// List chains, or show one chain (`baton chains ID`) with its messages.
    Chains(chains::ChainsArgs),
    /// List bot-to-bot deliveries (`sessions_send`): state, guard refusals, replies.
    Deliveries(views::DeliveriesArgs),
    /// List artifacts (`--session KEY` or `--run ID`): name, type, size, who made them from what.
    Artifacts(artifacts::ArtifactsArgs),
    /// DM pairing: list pending codes, approve one.
    Pairing(views::PairingArgs),
    /// Delete old rows (export first with `baton transcript --all --format jsonl`).
    Prune(prune::PruneArgs),
    /// What the model calls spent: the last 24 h by bot, or `--since`, `--bot`, `--chat`,
    /// `--group-by bot|chat|trigger|model`.
    Usage(usage::UsageArgs),
    /// Why a message was or was not answered: each bot's decision on it (`--message ID` or
    /// `--event ID`), its turn, posts and deliveries.
    Why(why::WhyArgs),
    /// A whole room in time order (`--chat PLATFORM:CHAT`, `--since`, `--until`, `--format
    /// jsonl|markdown`): every message with its author, turns, deliveries, chains, artifacts.
    Export(export::ExportArgs),
    /// Bring the configured database's schema up to date; says from which version to which.
    Migrate(migrate::MigrateArgs),
    /// Several instances on one database: `baton cluster status` lists each, its last lease
    /// renewal and the accounts it holds.
    Cluster(cluster::ClusterArgs),
    /// Print what a platform needs for one bot's account: a Slack app manifest, a Discord
    /// install URL, Feishu/Lark's scopes.
    Setup(setup::SetupArgs),
    /// Check every account and backend live: logins, scopes, models. Exits 1 on a `fail`.
    Doctor(doctor::DoctorArgs),
    /// Print a published JSON Schema: `baton schema turn`, the turn an agent bot gets.
    Schema(schema::SchemaArgs),
}

/// Parse the command line and run it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The terminal chat shares its screen with the conversation: only warnings by default.
    let default_level = if matches!(cli.command, Command::Chat(_)) {
        "warn"
    } else {
        "info"
    };
    init_logging(cli.log_format, default_level);
    let runtime = match crate::gateway::runtime() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(&cli.config, args).await,
            Command::Check => check::check(&cli.config),
            Command::Chat(args) => chat::chat(&cli.config, args).await,
            Command::Transcript(args) => views::transcript(&cli.config, args).await,
            Command::Sessions(args) => views::sessions(&cli.config, args).await,
            Command::Chains(args) => chains::chains(&cli.config, args).await,
            Command::Deliveries(args) => views::deliveries(&cli.config, args).await,
            Command::Artifacts(args) => artifacts::artifacts(&cli.config, args).await,
            Command::Pairing(args) => views::pairing(&cli.config, args).await,
            Command::Prune(args) => prune::prune(&cli.config, args).await,
            Command::Usage(args) => usage::usage(&cli.config, args).await,
            Command::Why(args) => why::why(&cli.config, args).await,
            Command::Export(args) => export::export(&cli.config, args).await,
            Command::Migrate(args) => migrate::migrate(&cli.config, args).await,
            Command::Cluster(args) => cluster::cluster(&cli.config, args).await,
            Command::Setup(args) => setup::setup(&cli.config, args),
            Command::Doctor(args) => doctor::doctor(&cli.config, args).await,
            Command::Schema(args) => schema::schema(&args),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.is::<out::StdoutClosed>() => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", said_once(&err));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, each said once: many errors spell out their cause in their own
/// message (with the advice after it), so a cause already in the text is not added again.
fn said_once(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let cause = cause.to_string();
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

/// Load the config, turning every problem into one error listing them all.
fn load(path: &Path) -> anyhow::Result<Config> {
    Config::load(path).map_err(|err| match err {
        ConfigError::Invalid { .. } => {
            anyhow::anyhow!(
                "{err}\n(run `baton check --config {}` after fixing)",
                path.display()
            )
        }
        ConfigError::Read { .. } => anyhow::anyhow!(err),
    })
}

fn init_logging(format: LogFormat, default_level: &str) {
    use std::io::IsTerminal as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder
            .json()
            .map_event_format(crate::trace::WithTraceId)
            .init(),
    }
}
