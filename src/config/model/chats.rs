//! `[[chats]]`, `[chats_default]` and `[admins]`: who may wake bots where, and who runs admin
//! commands.

use baton_contract::Platform;
use serde::Deserialize;

use super::BackendKind;

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

/// Which of the bots a message mentions it is for (SPEC 6.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MentionMode {
    /// The bots mentioned before its first word; every mentioned bot when it opens with a
    /// word. `@snark ask @caid: ...` is for snark.
    #[default]
    Leading,
    /// Every bot it mentions.
    All,
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
    /// The model every bot uses here, over its own `model`.
    #[serde(default)]
    pub model: Option<String>,
    /// The system prompt every bot uses here, over its own (a file, relative to the config).
    #[serde(default)]
    pub system_prompt_file: Option<std::path::PathBuf>,
    /// The backend every bot runs here, over its own: a kind, with the bot's own settings for
    /// that kind (its `url`, `command`, `model`...).
    #[serde(default)]
    pub backend: Option<BackendKind>,
    /// Per bot (by id): its model, system prompt and backend here, over the chat's and its own.
    #[serde(default)]
    pub bots: std::collections::BTreeMap<String, ChatBotConfig>,
}

impl ChatConfig {
    /// The backend this entry gives `bot`: its own entry's, else the chat's (unset: the bot's
    /// own).
    pub fn backend_of(&self, bot: &str) -> Option<BackendKind> {
        self.bots
            .get(bot)
            .and_then(|own| own.backend)
            .or(self.backend)
    }
}

/// `[[chats]] bots = { caid = { model = "..." } }`: one bot's model, persona and backend in one
/// chat.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ChatBotConfig {
    /// The model this bot uses here.
    #[serde(default)]
    pub model: Option<String>,
    /// The system prompt this bot uses here (a file, relative to the config).
    #[serde(default)]
    pub system_prompt_file: Option<std::path::PathBuf>,
    /// The backend this bot runs here, with its own settings for that kind.
    #[serde(default)]
    pub backend: Option<BackendKind>,
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
    /// Which mentioned bots a message wakes: `leading` or `all`.
    pub mentions: MentionMode,
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
            mentions: MentionMode::Leading,
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
    /// Telegram user ids (numbers).
    pub telegram: Vec<String>,
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
            Platform::Telegram => &self.telegram,
            Platform::Local => &self.local,
        }
    }
}
