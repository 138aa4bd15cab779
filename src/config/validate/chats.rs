//! `[[chats]]` and `[chats_default]`: chat ids and bot lists are globs, and each
//! (platform, id) has at most one entry, so which policy applies is never ambiguous.

use std::collections::HashMap;

use baton_contract::Platform;

use super::super::{BackendKind, ChatConfig, Config};
use super::bots::missing_setting;
use super::{Checker, earlier};

impl Checker<'_> {
    pub(super) fn chats(&mut self, config: &Config) {
        let mut seen: HashMap<(Platform, &str), usize> = HashMap::new();
        for (i, chat) in config.chats.iter().enumerate() {
            self.glob(format!("chats[{i}].id"), &chat.id);
            if let Some(first) = earlier(&mut seen, (chat.platform, &chat.id), i) {
                self.report(
                    format!("chats[{i}].id"),
                    format!(
                        "{} chat `{}` already has an entry, chats[{first}]; merge the two",
                        chat.platform, chat.id
                    ),
                );
            }
            if let Some(allow_bots) = &chat.allow_bots {
                self.globs(&format!("chats[{i}].allow_bots"), allow_bots);
            }
            self.personas(config, i, chat);
        }
        self.globs("chats_default.allow_bots", &config.chats_default.allow_bots);
    }

    /// `model`, `system_prompt_file`, `backend` and `bots = { <bot> = { ... } }`: each file
    /// readable, each bot known, a backend only for bots with its settings, and a model given
    /// only to a bot whose backend here has models.
    fn personas(&mut self, config: &Config, i: usize, chat: &ChatConfig) {
        let key = |name: &str| format!("chats[{i}].{name}");
        if chat.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            self.report(key("model"), "is empty; name a model or remove the key");
        }
        if let Some(file) = &chat.system_prompt_file {
            self.prompt_file(key("system_prompt_file"), config, file);
        }
        if let Some(kind) = chat.backend {
            // Every bot that can be in the chat and keeps the chat's backend here.
            let bots = config.bots.iter().filter(|bot| {
                config
                    .accounts
                    .iter()
                    .any(|a| a.bot == bot.id && a.platform == chat.platform)
                    && chat.bots.get(&bot.id).and_then(|own| own.backend).is_none()
            });
            for bot in bots {
                let model = chat_model(chat, &bot.id);
                if let Some(missing) = missing_setting(bot, kind, model) {
                    let id = &bot.id;
                    self.report(
                        key("backend"),
                        format!(
                            "`{id}` has no `{}`, and the {} backend needs {}; add it to \
                             `{id}`'s [[bots]] entry, or give `{id}` its own here with \
                             bots = {{ {id} = {{ backend = \"{}\" }} }}",
                            missing.key,
                            kind.as_str(),
                            missing.what,
                            bot.backend.as_str()
                        ),
                    );
                }
            }
        }
        for (bot, own) in &chat.bots {
            let key = |name: &str| format!("chats[{i}].bots.{bot}.{name}");
            let known = self.bot_ref(config, format!("chats[{i}].bots.{bot}"), bot, |ids| {
                format!("name a bot of [[bots]] here: {ids}")
            });
            if let Some(file) = &own.system_prompt_file {
                self.prompt_file(key("system_prompt_file"), config, file);
            }
            let Some(entry) = config.bots.iter().find(|b| &b.id == bot) else {
                continue;
            };
            let backend = chat.backend_of(bot).unwrap_or(entry.backend);
            if let Some(kind) = own.backend
                && let Some(missing) = missing_setting(entry, kind, chat_model(chat, bot))
            {
                self.report(
                    key("backend"),
                    format!(
                        "`{bot}` has no `{}`, and the {} backend needs {}; add it to `{bot}`'s \
                         [[bots]] entry, or remove the key",
                        missing.key,
                        kind.as_str(),
                        missing.what
                    ),
                );
            }
            let Some(model) = &own.model else { continue };
            if model.trim().is_empty() {
                self.report(key("model"), "is empty; name a model or remove the key");
            } else if known && backend != BackendKind::Openai {
                self.report(
                    key("model"),
                    format!(
                        "`{bot}` does not use the openai backend here, which is the one with \
                         models; remove the key, or set backend = \"openai\" beside it"
                    ),
                );
            }
        }
    }
}

/// The model a `[[chats]]` entry gives `bot` (its own entry's, else the chat's).
fn chat_model<'a>(chat: &'a ChatConfig, bot: &str) -> Option<&'a str> {
    chat.bots
        .get(bot)
        .and_then(|own| own.model.as_deref())
        .or(chat.model.as_deref())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::fixture::{assert_broken_reports, keys};
    use crate::config::Config;

    #[test]
    fn chat_personas_name_known_bots_readable_files_and_models_only_for_openai() {
        let toml = r#"
[[bots]]
id = "snark"
backend = "openai"
model = "m"

[[bots]]
id = "parrot"
backend = "echo"

[[chats]]
platform = "telegram"
id = "-1001"
model = "big"
system_prompt_file = "no/such/prompt.md"
bots = { ghost = { model = "x" }, parrot = { model = "y" }, snark = { model = "bigger" } }
"#;
        let problems = Config::from_toml(toml, Path::new("."), &|_| None).unwrap_err();
        assert_eq!(
            keys(&problems),
            [
                "chats[0].system_prompt_file",
                "chats[0].bots.ghost",
                "chats[0].bots.parrot.model",
            ],
            "{problems:#?}"
        );
    }

    #[test]
    fn a_chat_backend_needs_the_bots_settings_for_it_and_a_known_kind() {
        let toml = r#"
[[bots]]
id = "snark"
backend = "openai"
model = "m"
url = "http://127.0.0.1:9/turn"

[[bots]]
id = "parrot"
backend = "echo"

[[accounts]]
bot = "parrot"
platform = "local"

[[accounts]]
bot = "snark"
platform = "local"

[[chats]]
platform = "local"
id = "room"
backend = "http"

[[chats]]
platform = "local"
id = "other"
bots = { parrot = { backend = "command" } }
"#;
        let problems = Config::from_toml(toml, Path::new("."), &|_| None).unwrap_err();
        assert_eq!(
            keys(&problems),
            ["chats[0].backend", "chats[1].bots.parrot.backend"],
            "{problems:#?}"
        );
        assert!(
            problems[0].message.contains("`parrot` has no `url`"),
            "{problems:#?}"
        );
        let unknown = toml.replace("backend = \"http\"", "backend = \"telepathy\"");
        let problems = Config::from_toml(&unknown, Path::new("."), &|_| None).unwrap_err();
        let kind = problems.iter().find(|p| p.key == "chats[0].backend");
        assert!(
            kind.is_some_and(|p| p.message.contains("`openai`, `http`, `command`, `echo`")),
            "{problems:#?}"
        );
        // No chat gives snark the http backend now, so its `url` is unused.
        assert!(
            problems.iter().any(|p| p.key == "bots[0].url"),
            "{problems:#?}"
        );
    }

    #[test]
    fn chats_report_each_problem_by_key() {
        assert_broken_reports(
            &["chats[0].allow_bots[0]", "chats[1].id", "chats[2].id"],
            // A glob is a fine id; only the second entry for it is a duplicate.
            &["chats[0].id"],
        );
    }
}
