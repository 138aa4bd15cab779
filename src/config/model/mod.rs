//! The config file's shape, one file per group of tables. Every default here is also written
//! in `config/baton.example.toml`.

mod a2a;
mod accounts;
mod bot_to_bot;
mod bots;
mod budgets;
mod chats;
mod gateway;
mod limits;
mod retention;

use std::path::PathBuf;

use serde::Deserialize;

pub use a2a::*;
pub use accounts::*;
pub use bot_to_bot::*;
pub use bots::*;
pub use budgets::*;
pub use chats::*;
pub use gateway::*;
pub use limits::*;
pub use retention::*;

/// The whole config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Config {
    /// `[gateway]`: listener, database, silent token.
    pub gateway: GatewayConfig,
    /// `[lanes]`: concurrency per lane.
    pub lanes: LanesConfig,
    /// `[limits]`: guard budgets.
    pub limits: LimitsConfig,
    /// `[local]`: how much the built-in local channel keeps in memory.
    pub local: LocalConfig,
    /// `[agent_to_agent]`: who may `sessions_send` to whom.
    pub agent_to_agent: AgentToAgentConfig,
    /// `[a2a]`: bots published as Agent2Agent agents.
    pub a2a: A2aConfig,
    /// `[chains]`: ordered turn-taking.
    pub chains: ChainsConfig,
    /// `[feedback]`: typing and streaming while a bot works.
    pub feedback: crate::config::FeedbackConfig,
    /// `[[bots]]`: the roster.
    pub bots: Vec<BotConfig>,
    /// `[backends.*]`: shared backend settings.
    pub backends: BackendsConfig,
    /// `[[accounts]]`: each bot's logins.
    pub accounts: Vec<AccountConfig>,
    /// `[[chats]]`: per-chat policy.
    pub chats: Vec<ChatConfig>,
    /// `[chats_default]`: policy for chats without a `[[chats]]` entry.
    pub chats_default: ChatsDefault,
    /// `[admins]`: platform user ids allowed to run admin commands.
    pub admins: AdminsConfig,
    /// `[store]`: the database file's upkeep.
    pub store: StoreConfig,
    /// `[retention]`: how long old rows are kept.
    pub retention: RetentionConfig,
    /// `[artifacts]`: the blobs bots hand each other.
    pub artifacts: ArtifactsConfig,
    /// `[cluster]`: several instances on one database.
    pub cluster: ClusterConfig,
    /// `[telemetry]`: the trace collector.
    pub telemetry: TelemetryConfig,
    /// `[prices."<model>"]`: USD per million tokens, per model.
    pub prices: PricesConfig,
    /// `[[budgets]]`: spending limits per bot, chat, trigger or gateway.
    pub budgets: Vec<BudgetConfig>,
    /// Directory of the config file; relative paths in it are resolved from here.
    #[serde(skip)]
    pub base_dir: PathBuf,
}
