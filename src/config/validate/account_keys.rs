//! Which `[[accounts]]` keys belong to which platform and mode: one table, [`KEYS`], read by
//! the checks in `accounts.rs`.
//!
//! Each entry says, per platform and mode, whether the key is required, optional or unused,
//! and reads the key's value out of an [`AccountConfig`] typed by what it must look like. A
//! key no mode of the platform uses belongs to another platform: an error. A key only
//! *another mode* of the platform uses is accepted and ignored, so an account can carry both
//! modes' keys and switch with one line (the Slack example in `config/baton.example.toml` does).

use baton_contract::Platform;

use super::super::AccountConfig;

/// An account mode, per platform. The first listed is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Socket,
    Events,
    Websocket,
    Webhook,
    Polling,
}

impl Mode {
    /// The modes of a platform, default first; empty when the platform has no modes.
    pub(super) fn of(platform: Platform) -> &'static [Mode] {
        match platform {
            Platform::Slack => &[Mode::Socket, Mode::Events],
            Platform::Feishu | Platform::Lark => &[Mode::Websocket, Mode::Webhook],
            Platform::Telegram => &[Mode::Polling, Mode::Webhook],
            Platform::Discord | Platform::Local => &[],
        }
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Mode::Socket => "socket",
            Mode::Events => "events",
            Mode::Websocket => "websocket",
            Mode::Webhook => "webhook",
            Mode::Polling => "polling",
        }
    }
}

/// Whether an account of some platform and mode needs a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Need {
    Required,
    Optional,
    Unused,
}

/// A key's value in an account, by what it must look like.
#[derive(Debug, Clone, Copy)]
pub(super) enum Value<'a> {
    /// The name of an environment variable holding a secret.
    Env(&'a str),
    /// An http(s) base URL.
    Url(&'a str),
    /// A Discord application id (a snowflake).
    ApplicationId(&'a str),
    /// A Discord public key (64 hex digits).
    PublicKey(&'a str),
    /// Any non-empty text.
    Text(&'a str),
    /// Discord guild ids (snowflakes).
    GuildIds(&'a [String]),
}

/// One platform key of `[[accounts]]`: where it is needed, what it holds, how to read it.
pub(super) struct KeySpec {
    pub(super) name: &'static str,
    /// What the value is, for messages ("the Slack bot token (xoxb-...)").
    pub(super) holds: &'static str,
    need: fn(Platform, Option<Mode>) -> Need,
    /// The key's value in an account; `None` when it is not set.
    value: fn(&AccountConfig) -> Option<Value<'_>>,
}

impl KeySpec {
    pub(super) fn need(&self, platform: Platform, mode: Option<Mode>) -> Need {
        (self.need)(platform, mode)
    }

    pub(super) fn value<'a>(&self, account: &'a AccountConfig) -> Option<Value<'a>> {
        (self.value)(account)
    }

    /// Whether some mode of `platform` uses the key.
    pub(super) fn platform_uses(&self, platform: Platform) -> bool {
        let modes = Mode::of(platform);
        if modes.is_empty() {
            self.need(platform, None) != Need::Unused
        } else {
            modes
                .iter()
                .any(|m| self.need(platform, Some(*m)) != Need::Unused)
        }
    }
}

const fn when(yes: bool, need: Need) -> Need {
    if yes { need } else { Need::Unused }
}

fn feishu(platform: Platform) -> bool {
    matches!(platform, Platform::Feishu | Platform::Lark)
}

fn env(value: &Option<String>) -> Option<Value<'_>> {
    value.as_deref().map(Value::Env)
}

/// The account keys, in file order; `mode`, `bot` and `id` are checked separately.
pub(super) const KEYS: &[KeySpec] = &[
    KeySpec {
        name: "app_token_env",
        holds: "the Slack app-level token (xapp-...), needed by Socket Mode",
        need: |p, m| {
            when(
                p == Platform::Slack && m == Some(Mode::Socket),
                Need::Required,
            )
        },
        value: |a| env(&a.app_token_env),
    },
    KeySpec {
        name: "bot_token_env",
        holds: "the bot token (Slack: xoxb-...; Discord: from the Bot page; Telegram: from @BotFather)",
        need: |p, _| {
            when(
                matches!(p, Platform::Slack | Platform::Discord | Platform::Telegram),
                Need::Required,
            )
        },
        value: |a| env(&a.bot_token_env),
    },
    KeySpec {
        name: "signing_secret_env",
        holds: "the Slack signing secret, which verifies Events API requests",
        need: |p, m| {
            when(
                p == Platform::Slack && m == Some(Mode::Events),
                Need::Required,
            )
        },
        value: |a| env(&a.signing_secret_env),
    },
    KeySpec {
        name: "app_id",
        holds: "the app id (Feishu/Lark: cli_...; Slack: A0...)",
        need: |p, _| match p {
            Platform::Slack => Need::Optional,
            Platform::Feishu | Platform::Lark => Need::Required,
            _ => Need::Unused,
        },
        value: |a| a.app_id.as_deref().map(Value::Text),
    },
    KeySpec {
        name: "application_id",
        holds: "the Discord application id",
        need: |p, _| when(p == Platform::Discord, Need::Required),
        value: |a| a.application_id.as_deref().map(Value::ApplicationId),
    },
    KeySpec {
        name: "public_key",
        holds: "the Discord application's public key",
        need: |p, _| when(p == Platform::Discord, Need::Optional),
        value: |a| a.public_key.as_deref().map(Value::PublicKey),
    },
    KeySpec {
        name: "command_guilds",
        holds: "Discord guild ids to register /baton in",
        need: |p, _| when(p == Platform::Discord, Need::Optional),
        value: |a| (!a.command_guilds.is_empty()).then_some(Value::GuildIds(&a.command_guilds)),
    },
    KeySpec {
        name: "app_secret_env",
        holds: "the Feishu/Lark app secret",
        need: |p, _| when(feishu(p), Need::Required),
        value: |a| env(&a.app_secret_env),
    },
    KeySpec {
        name: "verification_token_env",
        holds: "the Feishu/Lark event verification token",
        need: |p, m| when(feishu(p) && m == Some(Mode::Webhook), Need::Required),
        value: |a| env(&a.verification_token_env),
    },
    KeySpec {
        name: "encrypt_key_env",
        holds: "the Feishu/Lark event encrypt key",
        need: |p, m| when(feishu(p) && m == Some(Mode::Webhook), Need::Optional),
        value: |a| env(&a.encrypt_key_env),
    },
    KeySpec {
        name: "secret_token_env",
        holds: "the Telegram webhook secret, which Telegram sends back in X-Telegram-Bot-Api-Secret-Token",
        need: |p, m| {
            when(
                p == Platform::Telegram && m == Some(Mode::Webhook),
                Need::Required,
            )
        },
        value: |a| env(&a.secret_token_env),
    },
    KeySpec {
        name: "api_url",
        holds: "the platform API's base URL",
        need: |p, _| when(p != Platform::Local, Need::Optional),
        value: |a| a.api_url.as_deref().map(Value::Url),
    },
];

/// Why a key of another platform is refused, naming the platforms it belongs to.
pub(super) fn not_for_platform(name: &str, platform: Platform) -> String {
    let users: Vec<&str> = Platform::ALL
        .iter()
        .filter(|p| KEYS.iter().any(|k| k.name == name && k.platform_uses(**p)))
        .map(|p| p.as_str())
        .collect();
    if users.is_empty() {
        format!("does not apply to {platform} accounts; remove it")
    } else {
        format!(
            "does not apply to {platform} accounts (it is a {} key); remove it",
            users.join("/")
        )
    }
}
