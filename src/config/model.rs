//! The config file's shape. Every default here is also written in `config/baton.example.toml`.

use std::path::PathBuf;

use baton_contract::Platform;
use serde::Deserialize;

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
    /// `[chains]`: ordered turn-taking.
    pub chains: ChainsConfig,
    /// `[feedback]`: typing and streaming while a bot works.
    pub feedback: super::FeedbackConfig,
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
    /// Directory of the config file; relative paths in it are resolved from here.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// `[gateway]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct GatewayConfig {
    /// HTTP listen address.
    pub listen: String,
    /// SQLite file; `:memory:` for throwaway runs.
    pub database: String,
    /// Env var holding a `postgres://` URL: when set, the store is that PostgreSQL database
    /// instead of the SQLite file (in progress: see README "PostgreSQL (in progress)").
    pub database_url_env: Option<String>,
    /// Env var holding the bearer token for every route but the webhooks and health checks;
    /// unset means this machine only.
    pub api_token_env: Option<String>,
    /// A reply equal to this (trimmed) is a silent turn.
    pub silent_token: String,
    /// What the user sees when a backend fails; empty means say nothing.
    pub error_reply: String,
    /// A turn running longer than this is cut off and recorded as failed.
    pub turn_timeout_seconds: u64,
    /// On shutdown, how long in-flight turns may finish before the process exits.
    pub drain_seconds: u64,
    /// The clock cron schedules and quiet hours are read in: `local`, `UTC` or an offset such
    /// as `+08:00`.
    pub timezone: String,
    /// Seconds a new connection has to deliver its first request's headers.
    pub header_timeout_seconds: u64,
    /// Seconds a kept-alive connection may wait for (the headers of) its next request.
    pub idle_timeout_seconds: u64,
    /// Seconds a request body may take to arrive in full, counted from its headers.
    pub body_timeout_seconds: u64,
    /// Connections served at once; the ones over it get only `/healthz` and `/readyz`.
    pub max_connections: usize,
    /// MCP sessions open at once; an `initialize` over it is refused.
    pub mcp_max_sessions: usize,
    /// Bytes an MCP `initialize` request may have: the client info a session keeps.
    pub mcp_max_init_bytes: usize,
    /// Seconds an MCP session may go unused before it expires and its memory is freed.
    pub mcp_session_idle_seconds: u64,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8642".into(),
            database: "baton.db".into(),
            database_url_env: None,
            api_token_env: None,
            silent_token: "NO_REPLY".into(),
            error_reply: "Sorry, I could not answer that just now (my model backend failed). \
                          Please try again in a moment."
                .into(),
            turn_timeout_seconds: 300,
            drain_seconds: 10,
            timezone: "local".into(),
            header_timeout_seconds: 10,
            idle_timeout_seconds: 60,
            body_timeout_seconds: 30,
            max_connections: 512,
            mcp_max_sessions: 64,
            mcp_max_init_bytes: 16 * 1024,
            mcp_session_idle_seconds: 300,
        }
    }
}

/// `[lanes]`: how many turns run at once per lane.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LanesConfig {
    /// Turns caused by user messages.
    pub main: usize,
    /// Bot-to-bot deliveries.
    pub nested: usize,
    /// Sub-agent runs.
    pub subagent: usize,
    /// Heartbeats and cron entries.
    pub cron: usize,
    /// Turns that may wait on one lane; a chat message over it gets a "busy" notice.
    pub max_queued: usize,
    /// Turns that may wait in one session (bot and chat); over it, the same.
    pub max_queued_per_session: usize,
}

impl Default for LanesConfig {
    fn default() -> Self {
        Self {
            main: 4,
            nested: 4,
            subagent: 8,
            cron: 1,
            max_queued: 256,
            max_queued_per_session: 32,
        }
    }
}

/// `[limits]`: guard budgets.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LimitsConfig {
    /// Messages one sender may send that wake a bot, per minute.
    pub inbound_per_sender_per_minute: u32,
    /// Messages from bot A that may wake bot B in one chat, per minute.
    pub bot_pair_events_per_minute: u32,
    /// After a pair exhausts its budget, how long it stays cooled down.
    pub bot_pair_cooldown_seconds: u64,
    /// Bot-to-bot replies in a chat before a human must speak.
    pub max_bot_reply_chain: u32,
    /// `sessions_send` A->B per minute.
    pub send_per_pair_per_minute: u32,
    /// `sessions_send` by one sender per minute.
    pub send_per_sender_per_minute: u32,
    /// Distinct targets one sender may reach within the fan-out window.
    pub fan_out_targets: u32,
    /// The fan-out window.
    pub fan_out_window_seconds: u64,
    /// Hops A->B->C allowed.
    pub max_depth: u32,
    /// Extra alternating A<->B exchanges after a send (0..=5).
    pub max_ping_pong_turns: u32,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            inbound_per_sender_per_minute: 20,
            bot_pair_events_per_minute: 10,
            bot_pair_cooldown_seconds: 60,
            max_bot_reply_chain: 3,
            send_per_pair_per_minute: 10,
            send_per_sender_per_minute: 30,
            fan_out_targets: 5,
            fan_out_window_seconds: 5,
            max_depth: 3,
            max_ping_pong_turns: 0,
        }
    }
}

/// `[local]`: bounds on the local channel's rooms, which live in memory (the transcript keeps
/// every word; a room's log is only what `GET /api/local/rooms/...` shows).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LocalConfig {
    /// Group rooms the hub holds; a post that would open one more is refused. Direct
    /// conversations keep this many logs too, the least recently active dropped first.
    pub max_rooms: usize,
    /// Messages a room's log keeps; older ones roll off.
    pub room_log_messages: usize,
    /// Largest message a person may post into a room, in bytes.
    pub max_message_bytes: usize,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            max_rooms: 50,
            room_log_messages: 100,
            max_message_bytes: 16 * 1024,
        }
    }
}

/// `[agent_to_agent]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct AgentToAgentConfig {
    /// Bot-to-bot messaging on or off.
    pub enabled: bool,
    /// Bot ids or globs allowed to message each other.
    pub allow: Vec<String>,
}

impl Default for AgentToAgentConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            allow: vec!["*".into()],
        }
    }
}

/// `[chains]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct ChainsConfig {
    /// The bot that coordinates chains; unset: baton coordinates round-robin.
    pub coordinator: Option<String>,
    /// Round-robin rounds when baton coordinates.
    pub rounds: u32,
    /// A stalled turn goes back to the coordinator after this long.
    pub turn_timeout_seconds: u64,
    /// Hard cap on rounds.
    pub max_rounds: u32,
}

impl Default for ChainsConfig {
    fn default() -> Self {
        Self {
            coordinator: None,
            rounds: 1,
            turn_timeout_seconds: 300,
            max_rounds: 10,
        }
    }
}

/// Which backend runs a bot's turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// OpenAI-compatible chat completions.
    Openai,
    /// POST the turn to a URL.
    Http,
    /// Run a program per turn.
    Command,
    /// Deterministic echo for demos and tests.
    Echo,
}

impl BackendKind {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Openai => "openai",
            BackendKind::Http => "http",
            BackendKind::Command => "command",
            BackendKind::Echo => "echo",
        }
    }
}

/// `[[bots]]`: one agent identity.
#[derive(Debug, Clone, Deserialize)]
pub struct BotConfig {
    /// Slug id, unique.
    pub id: String,
    /// Display name.
    #[serde(default)]
    pub name: String,
    /// One line about what it does (shown to other bots by `bots_list`).
    #[serde(default)]
    pub description: String,
    /// Which backend runs it.
    pub backend: BackendKind,
    /// Model name (openai backend).
    #[serde(default)]
    pub model: Option<String>,
    /// Inline system prompt.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// System prompt read from a file (relative to the config file).
    #[serde(default)]
    pub system_prompt_file: Option<PathBuf>,
    /// Tool names or globs this bot may call.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Per-bot OpenAI-compatible base URL.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Per-bot env var with the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// `http` backend: where to POST turns.
    #[serde(default)]
    pub url: Option<String>,
    /// `command` backend: program and arguments.
    #[serde(default)]
    pub command: Vec<String>,
    /// A periodic check-in turn.
    #[serde(default)]
    pub heartbeat: Option<HeartbeatConfig>,
    /// `[[bots.cron]]`: turns at fixed times.
    #[serde(default)]
    pub cron: Vec<CronConfig>,
    /// `feedback = { ... }`: this bot's typing and streaming, over `[feedback]`.
    #[serde(default)]
    pub feedback: super::FeedbackOverride,
    /// `openai` backend: the model reads images, so images posted in a chat are given to it as
    /// image parts (otherwise by reference).
    #[serde(default)]
    pub vision: bool,
}

/// `heartbeat = { ... }` of a bot: a turn every `every`, which usually ends in silence.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct HeartbeatConfig {
    /// How often: `2s`, `5m`, `1h`, `1h30m`.
    pub every: String,
    /// `none` (a private session, never posted), or a chat: `<platform>:<chat>`, or a plain
    /// chat id on the platform of the bot's first account.
    pub target: String,
    /// A checklist the heartbeat reads each time (relative to the config file); a file with
    /// nothing but headings and empty checkboxes skips the heartbeat.
    pub prompt_file: Option<PathBuf>,
    /// `HH:MM-HH:MM` in `gateway.timezone`: no heartbeat in this window (may span midnight).
    pub quiet_hours: Option<String>,
}

impl Default for HeartbeatConfig {
    fn default() -> Self {
        Self {
            every: "30m".into(),
            target: "none".into(),
            prompt_file: None,
            quiet_hours: None,
        }
    }
}

/// `[[bots.cron]]`: a turn at the times a 5-field cron expression names.
#[derive(Debug, Clone, Deserialize)]
pub struct CronConfig {
    /// `minute hour day-of-month month day-of-week`, in `gateway.timezone`.
    pub schedule: String,
    /// Where the reply goes: `<platform>:<chat>`, a plain chat id (the bot's first account's
    /// platform), or `none`.
    pub chat: String,
    /// What the bot is asked to do.
    pub prompt: String,
}

impl BotConfig {
    /// The display name, falling back to the id.
    pub fn display_name(&self) -> &str {
        if self.name.is_empty() {
            &self.id
        } else {
            &self.name
        }
    }
}

/// `[backends]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct BackendsConfig {
    /// `[backends.openai]`.
    pub openai: OpenAiBackendConfig,
}

/// `[backends.openai]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct OpenAiBackendConfig {
    /// Base URL of any OpenAI-compatible server; `$OPENAI_BASE_URL` when unset.
    pub base_url: Option<String>,
    /// Env var holding the API key.
    pub api_key_env: Option<String>,
}

/// `[[accounts]]`: a bot's login on one platform. Which keys apply depends on the platform.
#[derive(Debug, Clone, Deserialize)]
pub struct AccountConfig {
    /// The bot this account speaks for.
    pub bot: String,
    /// The platform.
    pub platform: Platform,
    /// Name in webhook paths and session keys; default: the bot's id.
    #[serde(default)]
    pub id: Option<String>,
    /// slack: `socket` | `events`; feishu/lark: `websocket` | `webhook`.
    #[serde(default)]
    pub mode: Option<String>,
    /// slack: app-level token (Socket Mode).
    #[serde(default)]
    pub app_token_env: Option<String>,
    /// slack, discord: bot token.
    #[serde(default)]
    pub bot_token_env: Option<String>,
    /// slack: signing secret (Events API).
    #[serde(default)]
    pub signing_secret_env: Option<String>,
    /// slack: the app id events must carry (`api_app_id`); default: learned at start.
    #[serde(default)]
    pub app_id: Option<String>,
    /// discord: application id.
    #[serde(default)]
    pub application_id: Option<String>,
    /// discord: public key for the HTTP interactions endpoint.
    #[serde(default)]
    pub public_key: Option<String>,
    /// discord: guild ids to register `/baton` in; empty: register globally.
    #[serde(default)]
    pub command_guilds: Vec<String>,
    /// feishu/lark: app secret.
    #[serde(default)]
    pub app_secret_env: Option<String>,
    /// feishu/lark: verification token (webhook).
    #[serde(default)]
    pub verification_token_env: Option<String>,
    /// feishu/lark: encrypt key (webhook).
    #[serde(default)]
    pub encrypt_key_env: Option<String>,
    /// Base URL of the platform API (proxies, Lark vs Feishu, tests).
    #[serde(default)]
    pub api_url: Option<String>,
}

impl AccountConfig {
    /// The account's id: its `id`, or its bot's id.
    pub fn account_id(&self) -> &str {
        self.id.as_deref().unwrap_or(&self.bot)
    }
}

/// Who may wake bots in group chats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupPolicy {
    /// Any group.
    Open,
    /// Only groups with a `[[chats]]` entry.
    Allowlist,
    /// No group.
    Disabled,
}

impl GroupPolicy {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupPolicy::Open => "open",
            GroupPolicy::Allowlist => "allowlist",
            GroupPolicy::Disabled => "disabled",
        }
    }
}

/// Who may talk to bots in direct messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DmPolicy {
    /// Unknown senders get a one-time pairing code; an admin approves it.
    Pairing,
    /// Only senders in `dm_allow`.
    Allowlist,
    /// Anyone.
    Open,
    /// No DMs.
    Disabled,
}

impl DmPolicy {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DmPolicy::Pairing => "pairing",
            DmPolicy::Allowlist => "allowlist",
            DmPolicy::Open => "open",
            DmPolicy::Disabled => "disabled",
        }
    }
}

/// When a bot takes a turn in a group: defined beside the chat settings that store a chat's
/// override of it, so the value is parsed once, here or when the store loads.
pub use crate::store::Activation;

/// `[[chats]]`: policy for one chat (or every chat matching a glob on `id`).
/// Unset keys fall back to `[chats_default]`. (Unknown keys are collected by the loader, like
/// everywhere else, rather than refused by serde one at a time.)
#[derive(Debug, Clone, Deserialize)]
pub struct ChatConfig {
    /// Platform of the chat.
    pub platform: Platform,
    /// Chat id, or a glob (`C01*`).
    pub id: String,
    /// Activation here.
    #[serde(default)]
    pub activation: Option<Activation>,
    /// Other bots (ids or globs) whose messages may wake bots here.
    #[serde(default)]
    pub allow_bots: Option<Vec<String>>,
    /// Un-activated messages kept as context.
    #[serde(default)]
    pub history_limit: Option<usize>,
    /// A message mentioning only other bots does not wake an `always` bot.
    #[serde(default)]
    pub ignore_other_mentions: Option<bool>,
    /// `@_all` / `@everyone` wakes bots here.
    #[serde(default)]
    pub respond_to_at_all: Option<bool>,
}

/// `[chats_default]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct ChatsDefault {
    /// Group policy (fail closed).
    pub group_policy: GroupPolicy,
    /// DM policy.
    pub dm_policy: DmPolicy,
    /// Platform user ids allowed to DM under `dm_policy = "allowlist"` (and always let in).
    pub dm_allow: Vec<String>,
    /// Activation in chats without an entry.
    pub activation: Activation,
    /// Bots whose messages may wake bots.
    pub allow_bots: Vec<String>,
    /// Un-activated messages kept as context.
    pub history_limit: usize,
    /// A message mentioning only other bots does not wake an `always` bot.
    pub ignore_other_mentions: bool,
    /// `@_all` / `@everyone` wakes bots.
    pub respond_to_at_all: bool,
}

impl Default for ChatsDefault {
    fn default() -> Self {
        Self {
            group_policy: GroupPolicy::Allowlist,
            dm_policy: DmPolicy::Pairing,
            dm_allow: Vec::new(),
            activation: Activation::Mention,
            allow_bots: Vec::new(),
            history_limit: 50,
            ignore_other_mentions: true,
            respond_to_at_all: false,
        }
    }
}

/// `[admins]`: platform user ids allowed to run admin commands, per platform.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct AdminsConfig {
    /// Slack user ids.
    pub slack: Vec<String>,
    /// Discord user ids.
    pub discord: Vec<String>,
    /// Feishu open_ids.
    pub feishu: Vec<String>,
    /// Lark open_ids.
    pub lark: Vec<String>,
    /// Local channel user names.
    pub local: Vec<String>,
}

impl AdminsConfig {
    /// The admin ids for one platform.
    pub fn for_platform(&self, platform: Platform) -> &[String] {
        match platform {
            Platform::Slack => &self.slack,
            Platform::Discord => &self.discord,
            Platform::Feishu => &self.feishu,
            Platform::Lark => &self.lark,
            Platform::Local => &self.local,
        }
    }
}

/// `[store]`: the SQLite file's upkeep.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct StoreConfig {
    /// The write-ahead log is kept under this many MiB (emptied once it passes half of it).
    pub wal_limit_mb: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self { wal_limit_mb: 64 }
    }
}

/// `[cluster]`: several instances sharing one PostgreSQL database (on SQLite the one instance
/// holds every account, through the same leases).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct ClusterConfig {
    /// This instance's name in the lease table; default: the host name and the process id.
    pub instance_id: Option<String>,
    /// An account whose holder stops renewing its lease is taken by another instance after
    /// this many seconds.
    pub lease_seconds: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            instance_id: None,
            lease_seconds: 15,
        }
    }
}

/// `[retention]`: per table, `"keep"` or an age such as `"90d"`; `baton run` deletes older
/// rows at start and every hour (never what a live flow needs).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct RetentionConfig {
    /// Transcript entries.
    pub transcripts: String,
    /// Admin command audit rows.
    pub audit: String,
    /// Finished bot-to-bot deliveries.
    pub deliveries: String,
    /// Closed chains and their messages.
    pub chains: String,
    /// Pairing requests never approved.
    pub pairing: String,
    /// A chat's history buffer and cursors go once the chat has been quiet this long.
    pub history_idle: String,
    /// Artifacts, by when they were made.
    pub artifacts: String,
    /// Settled escalations (answered, approved, denied, failed), by when they settled.
    pub escalations: String,
    /// Sessions idle this long, with their transcripts (never one something waits on).
    pub sessions: String,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            transcripts: "keep".into(),
            audit: "keep".into(),
            deliveries: "keep".into(),
            chains: "keep".into(),
            pairing: "keep".into(),
            history_idle: "7d".into(),
            artifacts: "keep".into(),
            escalations: "keep".into(),
            sessions: "keep".into(),
        }
    }
}

impl RetentionConfig {
    /// Every key with its value, for validation and for building the prune plan.
    pub fn keys(&self) -> [(&'static str, &str); 9] {
        [
            ("transcripts", &self.transcripts),
            ("audit", &self.audit),
            ("deliveries", &self.deliveries),
            ("chains", &self.chains),
            ("pairing", &self.pairing),
            ("history_idle", &self.history_idle),
            ("artifacts", &self.artifacts),
            ("escalations", &self.escalations),
            ("sessions", &self.sessions),
        ]
    }
}

/// `[artifacts]`: the blobs bots hand each other (`artifact_put`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct ArtifactsConfig {
    /// The largest artifact accepted, in bytes; a bigger one is refused with the reason.
    pub max_bytes: u64,
}

impl Default for ArtifactsConfig {
    fn default() -> Self {
        Self {
            max_bytes: 25 * 1024 * 1024,
        }
    }
}
