//! What `baton setup telegram` and `baton doctor` need from the adapter: the identity check
//! (`getMe` with the account's token, typed), the steps in @BotFather, and the command menu
//! baton registers.

use baton_contract::Secret;

use crate::api::{Api, ApiError, Me};

/// The bot commands baton registers with `setMyCommands` (command, description).
pub const COMMANDS: &[(&str, &str)] = &[("baton", "baton admin commands: /baton help")];

/// What to do in @BotFather (and in the group) for a bot to work with baton, one step a line.
pub const BOTFATHER_STEPS: &[&str] = &[
    "In Telegram, open @BotFather and send /newbot; pick a name and a username ending in `bot`.",
    "Copy the token it gives you into the environment variable named by the account's \
     `bot_token_env` (never into the config file).",
    "Send /setprivacy, pick the bot, choose Disable: with Group Privacy on, the bot only sees \
     commands, mentions and replies to it, so `activation = \"always\"`, the history buffer and \
     other bots' posts never reach it.",
    "Turn bot-to-bot communication on for the bot (@BotFather, Bot Settings): without it, \
     Telegram delivers no other bot's messages (baton still hands its own bots' posts over).",
    "Add the bot to the group. A bot added before privacy was disabled must be removed and \
     added again for the change to apply.",
    "For webhooks: set `mode = \"webhook\"`, `secret_token_env`, and `[gateway] public_url`; \
     baton registers <public_url>/hooks/telegram/<account> itself at start.",
];

/// A bot whose token works, as `getMe` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The bot's user id.
    pub id: i64,
    /// Its `@username`, without the `@`.
    pub username: String,
    /// Its display name.
    pub name: String,
    /// Group Privacy is off (it sees every group message). `false` deserves a warning.
    pub reads_all_group_messages: bool,
}

impl From<Me> for Identity {
    fn from(me: Me) -> Self {
        Identity {
            id: me.id,
            username: me.username,
            name: me.first_name,
            reads_all_group_messages: me.can_read_all_group_messages,
        }
    }
}

/// Why the identity check failed, said so an operator can act on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The token is wrong or revoked.
    #[error("Telegram refused the token (401); copy it again from @BotFather (/token)")]
    BadToken,
    /// Telegram (or the `api_url`) could not be reached or answered something else.
    #[error("could not check the token: {0}")]
    Unreachable(String),
}

/// Ask `getMe` at `api_url` with `token`: who the bot is, or why not.
pub async fn check_identity(api_url: &str, token: Secret) -> Result<Identity, IdentityError> {
    match Api::new(api_url, token).get_me().await {
        Ok(me) => Ok(me.into()),
        Err(ApiError::Unauthorized) => Err(IdentityError::BadToken),
        Err(other) => Err(IdentityError::Unreachable(other.to_string())),
    }
}
