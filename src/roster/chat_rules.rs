//! Per-chat policy: the `[[chats]]` entry matching a chat, over `[chats_default]`.
//!
//! Resolved once at start-up into glob matchers ([`ChatRules`]), then looked up per event. A
//! durable admin override (`/baton activation ...`) is applied on top by the dispatcher.
//!
//! An entry may also give the bots in its chat another model, system prompt or backend
//! ([`Persona`]): the prompt files are read here, at start, so a turn never touches the disk for
//! them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use baton_contract::Platform;
use globset::{Glob, GlobMatcher, GlobSet, GlobSetBuilder};

use crate::config::{Activation, BackendKind, ChatConfig, Config, MentionMode};

/// The effective policy of one chat.
#[derive(Debug, Clone)]
pub struct ChatPolicy {
    /// A `[[chats]]` entry matched (what `group_policy = "allowlist"` asks for).
    pub listed: bool,
    /// `mention` or `always`.
    pub activation: Activation,
    /// Bots whose messages may wake bots here.
    pub allow_bots: Arc<GlobSet>,
    /// Un-activated messages kept as context.
    pub history_limit: usize,
    /// A message mentioning only other bots does not wake an `always` bot.
    pub ignore_other_mentions: bool,
    /// `@everyone`-style mentions wake bots.
    pub respond_to_at_all: bool,
    /// Which mentioned bots a message wakes (`[chats_default] mentions`).
    pub mentions: MentionMode,
    /// The models and system prompts the chat's entry gives its bots.
    pub personas: Arc<Personas>,
}

/// A model, a system prompt and a backend that replace a bot's own in one chat (each may be
/// unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Persona {
    /// The model, over the bot's `model`.
    pub model: Option<String>,
    /// The system prompt's text, over the bot's.
    pub system_prompt: Option<Arc<str>>,
    /// The backend kind, over the bot's `backend` (run with the bot's settings for it).
    pub backend: Option<BackendKind>,
}

impl Persona {
    /// `self`, with what `over` sets laid over it.
    fn under(&self, over: &Persona) -> Persona {
        Persona {
            model: over.model.clone().or_else(|| self.model.clone()),
            system_prompt: over
                .system_prompt
                .clone()
                .or_else(|| self.system_prompt.clone()),
            backend: over.backend.or(self.backend),
        }
    }
}

/// The personas of one `[[chats]]` entry: the chat's, and each bot's of `bots = { ... }`.
#[derive(Debug, Default)]
pub struct Personas {
    chat: Persona,
    bots: HashMap<String, Persona>,
}

impl Personas {
    /// What bot `bot` is here: its own entry over the chat's (nothing set: the bot as it is).
    pub fn of(&self, bot: &str) -> Persona {
        match self.bots.get(bot) {
            Some(own) => self.chat.under(own),
            None => self.chat.clone(),
        }
    }
}

/// Why the chat rules could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ChatRulesError {
    /// A `[[chats]]` glob did not compile.
    #[error("bad glob in [[chats]]: {0}")]
    Glob(#[from] globset::Error),
    /// A `[[chats]]` system prompt file is unreadable.
    #[error("[[chats]] id `{chat}`: cannot read system_prompt_file {}: {source}; fix the path (relative to the config file)", .path.display())]
    PromptFile {
        /// The entry's chat id.
        chat: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

struct Entry {
    platform: Platform,
    id: GlobMatcher,
    config: ChatConfig,
    allow_bots: Option<Arc<GlobSet>>,
    personas: Arc<Personas>,
}

/// Every `[[chats]]` entry, compiled.
pub struct ChatRules {
    entries: Vec<Entry>,
    default: ChatPolicy,
}

impl ChatRules {
    /// Compile the chat entries. Validation has already checked every glob.
    pub fn new(config: &Config) -> Result<ChatRules, ChatRulesError> {
        let defaults = &config.chats_default;
        let default = ChatPolicy {
            listed: false,
            activation: defaults.activation,
            allow_bots: Arc::new(glob_set(&defaults.allow_bots)?),
            history_limit: defaults.history_limit,
            ignore_other_mentions: defaults.ignore_other_mentions,
            respond_to_at_all: defaults.respond_to_at_all,
            mentions: defaults.mentions,
            personas: Arc::default(),
        };
        let entries = config
            .chats
            .iter()
            .map(|chat| {
                Ok(Entry {
                    platform: chat.platform,
                    id: Glob::new(&chat.id)?.compile_matcher(),
                    allow_bots: chat
                        .allow_bots
                        .as_deref()
                        .map(glob_set)
                        .transpose()?
                        .map(Arc::new),
                    personas: Arc::new(personas(config, chat)?),
                    config: chat.clone(),
                })
            })
            .collect::<Result<_, ChatRulesError>>()?;
        Ok(ChatRules { entries, default })
    }

    /// The policy for `chat` on `platform`: an exact `[[chats]]` id first, then the first glob
    /// that matches, then `[chats_default]`.
    pub fn resolve(&self, platform: Platform, chat: &str) -> ChatPolicy {
        let on_platform = || self.entries.iter().filter(|e| e.platform == platform);
        let entry = on_platform()
            .find(|e| e.config.id == chat)
            .or_else(|| on_platform().find(|e| e.id.is_match(chat)));
        let Some(entry) = entry else {
            return self.default.clone();
        };
        let d = &self.default;
        ChatPolicy {
            listed: true,
            activation: entry.config.activation.unwrap_or(d.activation),
            allow_bots: entry
                .allow_bots
                .clone()
                .unwrap_or_else(|| Arc::clone(&d.allow_bots)),
            history_limit: entry.config.history_limit.unwrap_or(d.history_limit),
            ignore_other_mentions: entry
                .config
                .ignore_other_mentions
                .unwrap_or(d.ignore_other_mentions),
            respond_to_at_all: entry
                .config
                .respond_to_at_all
                .unwrap_or(d.respond_to_at_all),
            mentions: d.mentions,
            personas: Arc::clone(&entry.personas),
        }
    }
}

/// The personas of entry `chat`, with their prompt files read.
fn personas(config: &Config, chat: &ChatConfig) -> Result<Personas, ChatRulesError> {
    let persona = |model: &Option<String>, file: &Option<PathBuf>, backend: Option<BackendKind>| {
        let system_prompt = match file {
            Some(file) => {
                let path = config.base_dir.join(file);
                let text = std::fs::read_to_string(&path).map_err(|source| {
                    ChatRulesError::PromptFile {
                        chat: chat.id.clone(),
                        path,
                        source,
                    }
                })?;
                Some(Arc::from(text))
            }
            None => None,
        };
        Ok::<_, ChatRulesError>(Persona {
            model: model.clone(),
            system_prompt,
            backend,
        })
    };
    let bots = chat
        .bots
        .iter()
        .map(|(bot, own)| {
            let own = persona(&own.model, &own.system_prompt_file, own.backend)?;
            Ok((bot.clone(), own))
        })
        .collect::<Result<_, ChatRulesError>>()?;
    Ok(Personas {
        chat: persona(&chat.model, &chat.system_prompt_file, chat.backend)?,
        bots,
    })
}

/// Compile a list of ids or globs into one set.
pub(crate) fn glob_set(patterns: &[String]) -> Result<GlobSet, globset::Error> {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        builder.add(Glob::new(pattern)?);
    }
    builder.build()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn rules(toml: &str) -> ChatRules {
        let config = Config::from_toml(toml, Path::new("."), &|_| None).unwrap();
        ChatRules::new(&config).unwrap()
    }

    #[test]
    fn exact_entry_beats_glob_and_unset_keys_fall_back() {
        let r = rules(
            r#"
            [chats_default]
            history_limit = 7
            [[chats]]
            platform = "slack"
            id = "C*"
            activation = "always"
            [[chats]]
            platform = "slack"
            id = "C42"
            allow_bots = ["caid"]
            "#,
        );
        let exact = r.resolve(Platform::Slack, "C42");
        assert!(exact.listed);
        assert_eq!(exact.activation, Activation::Mention);
        assert!(exact.allow_bots.is_match("caid"));
        assert_eq!(exact.history_limit, 7);
        let glob = r.resolve(Platform::Slack, "C9");
        assert_eq!(glob.activation, Activation::Always);
        assert!(!glob.allow_bots.is_match("caid"));
        assert!(
            !r.resolve(Platform::Discord, "C42").listed,
            "platforms are separate"
        );
    }
}
