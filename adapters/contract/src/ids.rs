//! Newtype identifiers, so a chat id is never passed where a user id belongs.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The platforms baton speaks. `Lark` is Feishu's international twin on another host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// Slack, through Socket Mode or the Events API.
    Slack,
    /// Discord, through the gateway websocket and REST.
    Discord,
    /// Feishu (China host).
    Feishu,
    /// Lark (international host); same protocol as Feishu.
    Lark,
    /// Telegram, through the Bot API (long polling or a webhook).
    Telegram,
    /// The built-in local channel: terminal chat, HTTP rooms, `/v1/chat/completions`.
    Local,
}

impl Platform {
    /// Every platform, in the order they are listed to users.
    pub const ALL: [Platform; 6] = [
        Platform::Slack,
        Platform::Discord,
        Platform::Feishu,
        Platform::Lark,
        Platform::Telegram,
        Platform::Local,
    ];

    /// The lowercase name used in config files, session keys and webhook paths.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Slack => "slack",
            Platform::Discord => "discord",
            Platform::Feishu => "feishu",
            Platform::Lark => "lark",
            Platform::Telegram => "telegram",
            Platform::Local => "local",
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A platform name that baton does not know.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown platform `{0}`: use one of slack, discord, feishu, lark, telegram, local")]
pub struct UnknownPlatform(pub String);

impl FromStr for Platform {
    type Err = UnknownPlatform;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Platform::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownPlatform(s.to_owned()))
    }
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub String);

        impl $name {
            /// The id as the platform spells it.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(&self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self(s)
            }
        }
    };
}

string_id!(
    /// The config name of one account (a bot's login on one platform); unique per platform.
    AccountId
);
string_id!(
    /// A channel, group, DM or room, as the platform names it.
    ChatId
);
string_id!(
    /// A thread inside a chat (Slack `thread_ts`, Discord thread channel, Feishu `root_id`).
    ThreadId
);
string_id!(
    /// A person or bot, as the platform names it (Slack `U…`, Discord snowflake, Feishu `open_id`).
    UserId
);
string_id!(
    /// One message, as the platform names it.
    MessageId
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_round_trips_through_its_name() {
        for p in Platform::ALL {
            assert_eq!(p.as_str().parse::<Platform>().unwrap(), p);
        }
        let err = "irc".parse::<Platform>().unwrap_err();
        assert!(err.to_string().contains("use one of"));
    }
}
