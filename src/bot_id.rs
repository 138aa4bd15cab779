//! [`BotId`]: a bot's configured name (`[[bots]] id`), the one name baton knows a bot by.
//!
//! It is baton's concept, not a platform's: platforms name a bot's *account* (a user id, an
//! account id in the contract crate), while this names the agent behind every account, in
//! session keys, tools, chains, schedules and the store. It sits at the top of `src/` rather
//! than in the roster because the config, session keys and the store stand below the roster and
//! name bots too.
//!
//! A name is parsed once where text arrives (the config's stage 2, a model's tool call, an API
//! query, a store row) and carried typed from there; it becomes text again only at the store,
//! in JSON and in events.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A bot's configured name: lowercase letters, digits, `-` and `_`, starting with a letter or
/// a digit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BotId(String);

impl BotId {
    /// The name as configured.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name` may be a bot's name.
    pub fn is_valid(name: &str) -> bool {
        let mut bytes = name.bytes();
        bytes
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    }
}

/// Bots' names as people read a list of them: `caid, sec`.
pub fn names(bots: &[BotId]) -> String {
    let names: Vec<&str> = bots.iter().map(BotId::as_str).collect();
    names.join(", ")
}

/// Text given as a bot's name that cannot be one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a bot name: a bot name holds lowercase letters, digits, `-` and `_`, \
     starting with a letter or a digit (the `[[bots]]` ids in the config)"
)]
pub struct NotABotId(pub String);

impl FromStr for BotId {
    type Err = NotABotId;

    fn from_str(name: &str) -> Result<BotId, NotABotId> {
        if BotId::is_valid(name) {
            Ok(BotId(name.to_owned()))
        } else {
            Err(NotABotId(name.to_owned()))
        }
    }
}

impl fmt::Display for BotId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl PartialEq<str> for BotId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for BotId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Shown as the name in JSON (API rows, tool results, events).
impl Serialize for BotId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// Read from JSON as text and refused like any other text that is not a bot's name.
impl<'de> Deserialize<'de> for BotId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slug_is_a_bot_name_and_anything_else_is_refused_with_the_rule() {
        for good in ["snark", "caid-2", "a_b", "9lives"] {
            assert_eq!(good.parse::<BotId>().unwrap().as_str(), good);
        }
        for bad in ["", "Snark", "-x", "a b", "bot:x", "é"] {
            let err = bad.parse::<BotId>().unwrap_err();
            assert_eq!(err, NotABotId(bad.to_owned()));
            assert!(err.to_string().contains("lowercase letters, digits"));
        }
    }

    #[test]
    fn json_shows_the_name_and_refuses_a_wrong_one() {
        let id: BotId = serde_json::from_str("\"snark\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"snark\"");
        assert!(serde_json::from_str::<BotId>("\"Not A Bot\"").is_err());
    }
}
