//! `[[chats]]` and `[chats_default]`: chat ids and bot lists are globs, and each
//! (platform, id) has at most one entry, so which policy applies is never ambiguous.

use std::collections::HashMap;

use baton_contract::Platform;

use super::super::{BackendKind, ChatConfig, Config};
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

    /// `model`, `system_prompt_file` and `bots = { <bot> = { ... } }`: each file readable, each
    /// bot known, and a model given only to a bot whose backend has models.
    fn personas(&mut self, config: &Config, i: usize, chat: &ChatConfig) {
        let key = |name: &str| format!("chats[{i}].{name}");
        if chat.model.as_deref().is_some_and(|m| m.trim().is_empty()) {
            self.report(key("model"), "is empty; name a model or remove the key");
        }
        if let Some(file) = &chat.system_prompt_file {
            self.prompt_file(key("system_prompt_file"), config, file);
        }
        for (bot, own) in &chat.bots {
            let key = |name: &str| format!("chats[{i}].bots.{bot}.{name}");
            let known = self.bot_ref(config, format!("chats[{i}].bots.{bot}"), bot, |ids| {
                format!("name a bot of [[bots]] here: {ids}")
            });
            if let Some(file) = &own.system_prompt_file {
                self.prompt_file(key("system_prompt_file"), config, file);
            }
            let Some(model) = &own.model else { continue };
            let backend = config.bots.iter().find(|b| &b.id == bot).map(|b| b.backend);
            if model.trim().is_empty() {
                self.report(key("model"), "is empty; name a model or remove the key");
            } else if known && backend != Some(BackendKind::Openai) {
                self.report(
                    key("model"),
                    format!(
                        "`{bot}` does not use the openai backend, which is the one with models; \
                         remove the key"
                    ),
                );
            }
        }
    }
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
    fn chats_report_each_problem_by_key() {
        assert_broken_reports(
            &["chats[0].allow_bots[0]", "chats[1].id", "chats[2].id"],
            // A glob is a fine id; only the second entry for it is a duplicate.
            &["chats[0].id"],
        );
    }
}
