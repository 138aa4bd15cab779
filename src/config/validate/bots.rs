//! `[[bots]]` and `[backends]`: unique slug ids, a readable prompt, valid tool globs, and the
//! keys of each bot's backend (present where the backend needs them, absent elsewhere).

use std::collections::HashMap;

use super::super::{BackendKind, BotConfig, Config};
use super::{Checker, earlier, slugify};
use crate::bot_id::BotId;

/// What an openai `api_key_env` variable holds, for messages.
const API_KEY: &str = "the model server's API key (or remove the key if the server needs none)";

impl Checker<'_> {
    pub(super) fn bots(&mut self, config: &Config) {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, bot) in config.bots.iter().enumerate() {
            let key = |name: &str| format!("bots[{i}].{name}");
            if bot.id.is_empty() {
                self.report(
                    key("id"),
                    "is empty; give the bot a slug id such as \"snark\"",
                );
            } else if !BotId::is_valid(&bot.id) {
                self.report(
                    key("id"),
                    format!(
                        "`{}` is not a slug; use lowercase letters, digits, `-` and `_`, \
                         starting with a letter or digit (e.g. \"{}\")",
                        bot.id,
                        slugify(&bot.id)
                    ),
                );
            }
            if let Some(first) = earlier(&mut seen, &bot.id, i) {
                self.report(
                    key("id"),
                    format!(
                        "`{}` is already the id of bots[{first}]; bot ids must be unique",
                        bot.id
                    ),
                );
            }
            self.backend_keys(i, bot, &config.backend_kinds(bot));
            if bot.system_prompt.is_some() && bot.system_prompt_file.is_some() {
                self.report(
                    key("system_prompt_file"),
                    "is set together with `system_prompt`; keep one of them",
                );
            }
            if let Some(file) = &bot.system_prompt_file {
                self.prompt_file(key("system_prompt_file"), config, file);
            }
            self.globs(&key("tools"), &bot.tools);
            for (name, value, max) in [
                ("temperature", bot.temperature, 2.0),
                ("top_p", bot.top_p, 1.0),
            ] {
                if value.is_some_and(|v| !(0.0..=max).contains(&v)) {
                    self.report(key(name), format!("must be between 0 and {max}"));
                }
            }
            if bot.max_tokens == Some(0) {
                self.report(
                    key("max_tokens"),
                    "must be at least 1 (or left out: the server's default)",
                );
            }
            if let Some(seconds) = bot.turn_timeout_seconds {
                self.turn_timeout(&key("turn_timeout_seconds"), seconds);
            }
            if let Some(dir) = &bot.workdir {
                let path = config.base_dir.join(dir);
                if !path.is_dir() {
                    self.report(
                        key("workdir"),
                        format!(
                            "`{}` is not a directory; create it, or point `workdir` at the \
                             agent's checkout (relative paths are resolved from the config \
                             file's directory)",
                            path.display()
                        ),
                    );
                }
            }
        }
    }

    /// A system prompt file (a bot's, or a chat's for its bots) is a readable file.
    pub(super) fn prompt_file(&mut self, key: String, config: &Config, file: &std::path::Path) {
        let path = config.base_dir.join(file);
        let readable = std::fs::File::open(&path)
            .and_then(|f| f.metadata())
            .is_ok_and(|m| m.is_file());
        if !readable {
            self.report(
                key,
                format!(
                    "cannot read `{}`; relative paths are resolved from the config \
                     file's directory",
                    path.display()
                ),
            );
        }
    }

    /// Keys that belong to one backend: present where its own backend needs them, well formed
    /// for every backend it runs (`kinds`: its own and those `[[chats]]` entries give it),
    /// absent elsewhere.
    fn backend_keys(&mut self, i: usize, bot: &BotConfig, kinds: &[BackendKind]) {
        let key = |name: &str| format!("bots[{i}].{name}");
        if let Some(missing) = missing_setting(bot, bot.backend, None) {
            let backend = bot.backend.as_str();
            self.report(
                key(missing.key),
                format!("is missing; the {backend} backend needs {}", missing.what),
            );
        }
        if kinds.contains(&BackendKind::Openai) {
            if let Some(url) = &bot.base_url {
                self.url(key("base_url"), url);
            }
            if let Some(name) = &bot.api_key_env {
                self.env_var(&key("api_key_env"), name, API_KEY);
            }
        }
        if (kinds.contains(&BackendKind::Http) || kinds.contains(&BackendKind::A2a))
            && let Some(url) = &bot.url
        {
            self.url(key("url"), url);
        }
        if kinds.contains(&BackendKind::A2a)
            && let Some(name) = &bot.token_env
        {
            self.env_var(&key("token_env"), name, "the agent's bearer token");
        }
        if kinds.contains(&BackendKind::Command) {
            for (n, name) in bot.env.iter().enumerate() {
                self.env_name(
                    &key(&format!("env[{n}]")),
                    name,
                    "a variable the agent needs",
                );
            }
        }
        // Each backend's own keys, with whether the bot sets them: refused on any other.
        for (name, owner, set) in [
            ("base_url", BackendKind::Openai, bot.base_url.is_some()),
            (
                "api_key_env",
                BackendKind::Openai,
                bot.api_key_env.is_some(),
            ),
            (
                "url",
                // Taken by the http and the a2a backend alike.
                if kinds.contains(&BackendKind::A2a) {
                    BackendKind::A2a
                } else {
                    BackendKind::Http
                },
                bot.url.is_some(),
            ),
            ("token_env", BackendKind::A2a, bot.token_env.is_some()),
            ("command", BackendKind::Command, !bot.command.is_empty()),
            ("workdir", BackendKind::Command, bot.workdir.is_some()),
            ("env", BackendKind::Command, !bot.env.is_empty()),
            ("vision", BackendKind::Openai, bot.vision),
            (
                "temperature",
                BackendKind::Openai,
                bot.temperature.is_some(),
            ),
            ("max_tokens", BackendKind::Openai, bot.max_tokens.is_some()),
            ("top_p", BackendKind::Openai, bot.top_p.is_some()),
            (
                "reasoning_effort",
                BackendKind::Openai,
                bot.reasoning_effort.is_some(),
            ),
            ("extra_body", BackendKind::Openai, bot.extra_body.is_some()),
        ] {
            if set && !kinds.contains(&owner) {
                let owner = owner.as_str();
                self.report(
                    key(name),
                    format!(
                        "`{name}` is only used by the {owner} backend; remove it, or set \
                         backend = \"{owner}\" (on the bot, or in a [[chats]] entry)"
                    ),
                );
            }
        }
    }

    pub(super) fn backends(&mut self, config: &Config) {
        let openai = &config.backends.openai;
        if let Some(url) = &openai.base_url {
            self.url("backends.openai.base_url".into(), url);
        }
        if let Some(name) = &openai.api_key_env {
            self.env_var("backends.openai.api_key_env", name, API_KEY);
        }
    }
}

/// A setting a backend needs that a bot lacks: its key, and what it holds.
pub(super) struct Missing {
    /// The `[[bots]]` key.
    pub key: &'static str,
    /// What the backend needs it for, for the message.
    pub what: &'static str,
}

/// What `bot` lacks to run `kind` (`model`: one a `[[chats]]` entry gives it there), if
/// anything.
pub(super) fn missing_setting(
    bot: &BotConfig,
    kind: BackendKind,
    model: Option<&str>,
) -> Option<Missing> {
    let blank = |value: Option<&str>| value.is_none_or(|v| v.trim().is_empty());
    match kind {
        BackendKind::Openai if blank(model) && blank(bot.model.as_deref()) => Some(Missing {
            key: "model",
            what: "a model name (e.g. model = \"gpt-4o-mini\")",
        }),
        BackendKind::Http if bot.url.is_none() => Some(Missing {
            key: "url",
            what: "the URL turns are POSTed to",
        }),
        BackendKind::A2a if bot.url.is_none() => Some(Missing {
            key: "url",
            what: "the agent's A2A JSON-RPC endpoint",
        }),
        BackendKind::Command if blank(bot.command.first().map(String::as_str)) => Some(Missing {
            key: "command",
            what: "the program and its arguments, e.g. command = [\"my-agent\", \"--json\"]",
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::assert_broken_reports;

    #[test]
    fn bots_report_each_problem_by_key() {
        assert_broken_reports(
            &[
                "bots[0].model",
                "bots[0].system_prompt_file",
                "bots[0].tools[1]",
                "bots[0].api_key_env",
                "bots[1].id",
                "bots[1].url",
                "bots[1].base_url",
                "bots[2].id",
                "bots[2].command",
                "bots[2].vision",
            ],
            &["bots[0].tools[0]"],
        );
    }
}
