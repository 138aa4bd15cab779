//! `[[bots]]` and `[backends]`: the agents, what runs their turns, and their scheduled turns.

use std::path::PathBuf;

use serde::Deserialize;

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
    /// A remote A2A agent (SPEC 14): each turn is a streamed `SendMessage` to it.
    A2a,
}

impl BackendKind {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Openai => "openai",
            BackendKind::Http => "http",
            BackendKind::Command => "command",
            BackendKind::Echo => "echo",
            BackendKind::A2a => "a2a",
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
    /// `openai` backend: sampling temperature (0 to 2).
    #[serde(default)]
    pub temperature: Option<f64>,
    /// `openai` backend: the most tokens one answer may have.
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// `openai` backend: nucleus sampling (0 to 1).
    #[serde(default)]
    pub top_p: Option<f64>,
    /// `openai` backend: how hard a reasoning model thinks (`low`, `medium`, `high`...).
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// `openai` backend: more keys for each request body, passed through.
    #[serde(default)]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// `http` backend: where to POST turns; `a2a` backend: the agent's JSON-RPC endpoint.
    #[serde(default)]
    pub url: Option<String>,
    /// `a2a` backend: the environment variable holding the agent's bearer token.
    #[serde(default)]
    pub token_env: Option<String>,
    /// `command` backend: program and arguments.
    #[serde(default)]
    pub command: Vec<String>,
    /// `command` backend: the agent's working directory (relative to the config file); unset:
    /// baton's own.
    #[serde(default)]
    pub workdir: Option<PathBuf>,
    /// `command` backend: the environment variables passed through to the agent. Nothing else
    /// of baton's environment is, besides `PATH` and `HOME`.
    #[serde(default)]
    pub env: Vec<String>,
    /// The longest one of its turns may run, in seconds (up to a day); unset:
    /// `[gateway] turn_timeout_seconds`.
    #[serde(default)]
    pub turn_timeout_seconds: Option<u64>,
    /// A periodic check-in turn.
    #[serde(default)]
    pub heartbeat: Option<HeartbeatConfig>,
    /// `[[bots.cron]]`: turns at fixed times.
    #[serde(default)]
    pub cron: Vec<CronConfig>,
    /// `feedback = { ... }`: this bot's typing and streaming, over `[feedback]`.
    #[serde(default)]
    pub feedback: crate::config::FeedbackOverride,
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
