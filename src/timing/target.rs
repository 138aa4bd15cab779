//! Where a scheduled turn happens: a chat, or nowhere anyone reads (`none`).
//!
//! A chat is written `<platform>:<chat>` (`slack:C0123`, `local:ops`) or as a plain chat id,
//! which means a chat on the platform of the bot's first `[[accounts]]` entry (`local` for a
//! bot without accounts). The platform prefix is only taken as one when it names a platform,
//! so chat ids with colons in them still work as plain ids.

use std::fmt;

use baton_contract::Platform;

/// A scheduled turn's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// A private session (`bot:<bot>:local:<account>:schedule:<job>`): the turn is recorded,
    /// never posted.
    Private,
    /// A chat: the turn runs in the bot's session there, sees its history buffer, and its reply
    /// is posted there.
    Chat {
        /// The platform.
        platform: Platform,
        /// The chat id on it.
        chat: String,
    },
}

impl Place {
    /// Parse a target. `default_platform` is the platform of the bot's first account.
    pub fn parse(text: &str, default_platform: Platform) -> Result<Place, String> {
        let text = text.trim();
        if text == "none" {
            return Ok(Place::Private);
        }
        let (platform, chat) = match text.split_once(':') {
            Some((prefix, chat)) => match prefix.parse::<Platform>() {
                Ok(platform) => (platform, chat),
                Err(_) => (default_platform, text),
            },
            None => (default_platform, text),
        };
        if chat.is_empty() {
            return Err(format!(
                "`{text}` names no chat; write \"none\", a chat id, or \"<platform>:<chat id>\" \
                 such as \"slack:C0123456\""
            ));
        }
        Ok(Place::Chat {
            platform,
            chat: chat.to_owned(),
        })
    }
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Private => f.write_str("none"),
            Place::Chat { platform, chat } => write!(f, "{platform}:{chat}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(platform: Platform, chat: &str) -> Place {
        Place::Chat {
            platform,
            chat: chat.into(),
        }
    }

    #[test]
    fn none_prefixed_and_plain() {
        assert_eq!(Place::parse("none", Platform::Slack), Ok(Place::Private));
        assert_eq!(
            Place::parse("discord:123", Platform::Slack),
            Ok(chat(Platform::Discord, "123"))
        );
        assert_eq!(
            Place::parse("C0123", Platform::Slack),
            Ok(chat(Platform::Slack, "C0123"))
        );
        // A prefix that is no platform belongs to the chat id.
        assert_eq!(
            Place::parse("team:ops", Platform::Local),
            Ok(chat(Platform::Local, "team:ops"))
        );
        assert_eq!(chat(Platform::Local, "ops").to_string(), "local:ops");
        assert!(Place::parse("slack:", Platform::Local).is_err());
        assert!(Place::parse(" ", Platform::Local).is_err());
    }
}
