//! `[[accounts]]`: a bot's login on one platform.

use baton_contract::Platform;
use serde::Deserialize;

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
    /// slack: `socket` | `events`; feishu/lark: `websocket` | `webhook`; telegram: `polling` |
    /// `webhook`.
    #[serde(default)]
    pub mode: Option<String>,
    /// slack: app-level token (Socket Mode).
    #[serde(default)]
    pub app_token_env: Option<String>,
    /// slack, discord, telegram: bot token.
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
    /// telegram: the webhook's secret (`X-Telegram-Bot-Api-Secret-Token`), webhook mode.
    #[serde(default)]
    pub secret_token_env: Option<String>,
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
