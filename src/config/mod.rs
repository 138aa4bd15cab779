//! The configuration file: TOML in, typed values out.
//!
//! Loading happens in two stages, as ripgrep does with its arguments. [`Config::load`] parses the
//! file into the plain structs below (every default spelled out in `config/baton.example.toml`)
//! and collects *every* unknown key instead of stopping at the first. [`validate`] then checks
//! what serde cannot (references between sections, globs, environment variables) and returns the
//! full list of [`Problem`]s. Only a config without problems is turned into a running gateway.
//!
//! Secrets are never in the file: keys ending in `_env` name environment variables, read by
//! [`resolve_secret`] into [`Secret`]s that cannot be printed.

mod feedback;
mod locate;
mod model;
mod validate;

use std::fmt;
use std::path::{Path, PathBuf};

pub use crate::timing::{parse_age, parse_span};
pub use baton_contract::Secret;
pub use feedback::{FeedbackConfig, FeedbackOverride, StreamMode};
pub use model::*;
pub use validate::{unused_prices, validate};

use locate::{line_at, locate};
use serde_path_to_error::Segment;

/// One thing wrong with a config, naming the key (and line, when it can be found).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Dotted path of the offending key, e.g. `accounts[2].bot`.
    pub key: String,
    /// 1-based line in the file, when known.
    pub line: Option<usize>,
    /// What is wrong and what to do about it. Never contains a secret value.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}: {}", self.key, self.message),
            None => write!(f, "{}: {}", self.key, self.message),
        }
    }
}

/// Why a config could not be used: the list of every problem found.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}; pass --config PATH or set BATON_CONFIG", .path.display())]
    Read {
        /// The file we tried.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The file was read but has problems.
    #[error("{} problem(s) in {}:\n{}", .problems.len(), .path.display(), list(.problems))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Every problem found.
        problems: Vec<Problem>,
    },
}

fn list(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  - {p}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Config {
    /// Read, parse and validate a config file, reporting every problem at once.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Config::from_toml(&text, base, &|name| std::env::var(name).ok()).map_err(|problems| {
            ConfigError::Invalid {
                path: path.to_owned(),
                problems,
            }
        })
    }

    /// Every backend kind `bot` runs somewhere: its own first, then each other one a
    /// `[[chats]]` entry gives it.
    pub fn backend_kinds(&self, bot: &BotConfig) -> Vec<BackendKind> {
        let mut kinds = vec![bot.backend];
        for kind in self
            .chats
            .iter()
            .filter_map(|chat| chat.backend_of(&bot.id))
        {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        kinds
    }

    /// Parse and validate config text. `base` resolves relative file paths (prompt files);
    /// `env` looks up environment variables, so tests need not touch the process environment.
    pub fn from_toml(
        text: &str,
        base: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut tree: toml::Value = match toml::from_str(text) {
            Ok(tree) => tree,
            Err(err) => {
                // Not TOML at all: there is no key to name, only where it went wrong.
                problems.push(Problem {
                    key: "(file)".into(),
                    line: err.span().map(|s| line_at(text, s.start)),
                    message: err.message().trim().to_owned(),
                });
                return Err(problems);
            }
        };
        let Typed {
            config: parsed,
            unknown,
            stood_in,
        } = typed(&mut tree, &mut problems);
        for path in unknown {
            let key = dotted(&path);
            problems.push(Problem {
                line: locate(text, &key),
                message: "unknown key; check its spelling against config/baton.example.toml".into(),
                key,
            });
        }
        for problem in &mut problems {
            problem.line = problem.line.or_else(|| locate(text, &problem.key));
        }
        let Some(mut config) = parsed else {
            problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
            return Err(problems);
        };
        config.base_dir = base.to_owned();
        // An entry with a stand-in for a wrong required value is checked no further: what the
        // checks would say is about the stand-in.
        let about_a_stand_in = |key: &str| {
            stood_in.iter().any(|entry| {
                key.strip_prefix(entry.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
            })
        };
        let checked = validate(&config, env)
            .into_iter()
            .filter(|problem| !about_a_stand_in(&problem.key));
        problems.extend(checked.map(|mut problem| {
            problem.line = problem.line.or_else(|| locate(text, &problem.key));
            problem
        }));
        // In file order, so a reader can fix them top to bottom.
        problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(problems)
        }
    }
}

/// At most this many wrongly typed values are reported before giving up on the rest.
const MAX_TYPE_ERRORS: usize = 20;

/// What [`typed`] read: the config (when it could be read at all), the unknown keys' paths,
/// and the entries (`bots[0]`) whose required value was wrong or missing and stood in for.
struct Typed {
    config: Option<Config>,
    unknown: Vec<String>,
    stood_in: Vec<String>,
}

/// Deserialize `tree` into a [`Config`], with the unknown keys' paths. A wrongly typed value is
/// a problem at its key path (`bots[0].backend`); it is then taken out and the rest is read
/// again, so the other values (and then the semantic checks) are still looked at. A required
/// value cannot be taken out (nothing stands in for it by default), so one that is wrong or
/// missing is replaced by a harmless stand-in ([`stand_in`]) and its entry is remembered: the
/// semantic checks of that entry would only be about the stand-in.
fn typed(tree: &mut toml::Value, problems: &mut Vec<Problem>) -> Typed {
    let mut unknown = std::collections::BTreeSet::new();
    let mut stood_in = Vec::new();
    let mut fixed = 0;
    while fixed <= MAX_TYPE_ERRORS {
        let mut ignored = Vec::new();
        let mut record = |path: serde_ignored::Path<'_>| ignored.push(path.to_string());
        let de = serde_ignored::Deserializer::new(tree.clone(), &mut record);
        let result: Result<Config, _> = serde_path_to_error::deserialize(de);
        unknown.extend(ignored);
        let err = match result {
            Ok(config) => {
                return Typed {
                    config: Some(config),
                    unknown: unknown.into_iter().collect(),
                    stood_in,
                };
            }
            Err(err) => err,
        };
        let message = err.inner().message().trim().to_owned();
        let key = err.path().to_string();
        let segments: Vec<&Segment> = err.path().iter().collect();
        problems.push(Problem {
            key: if key == "." { "(file)".into() } else { key },
            line: None,
            message: message.clone(),
        });
        // The entry a stand-in went into (`bots[0]`), or `None` when nothing could be mended.
        let repaired = match (missing_field(&message), segments.split_last()) {
            // A required key left out: the error is at its entry.
            (Some(field), _) => stand_in(field)
                .filter(|value| put(tree, &segments, field, value.clone()))
                .map(|_| key_of(&segments)),
            // A required key with a wrong value.
            (None, Some((Segment::Map { key: field }, parents))) if stand_in(field).is_some() => {
                let value = stand_in(field).expect("checked just above");
                put(tree, parents, field, value).then(|| key_of(parents))
            }
            (None, _) => take_out(tree, err.path()).then(String::new),
        };
        match repaired {
            Some(entry) if !entry.is_empty() => stood_in.push(entry),
            Some(_) => {}
            None => break,
        }
        fixed += 1;
    }
    Typed {
        config: None,
        unknown: unknown.into_iter().collect(),
        stood_in,
    }
}

/// The field a `missing field `x`` message names.
fn missing_field(message: &str) -> Option<&str> {
    message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
}

/// A value for a required key that is valid and asks for nothing else: the checks can run on,
/// and the problem already reported at the key says what to fix. `None`: not a required key.
fn stand_in(field: &str) -> Option<toml::Value> {
    let value = match field {
        // The one backend and the one platform that need no other keys.
        "backend" => "echo",
        "platform" => "local",
        "id" | "bot" | "schedule" | "chat" | "prompt" => "",
        _ => return None,
    };
    Some(toml::Value::String(value.to_owned()))
}

/// The table or array at `segments` in `tree`.
fn node_at<'t>(tree: &'t mut toml::Value, segments: &[&Segment]) -> Option<&'t mut toml::Value> {
    let mut node = tree;
    for segment in segments {
        node = match (segment, node) {
            (Segment::Map { key }, toml::Value::Table(table)) => table.get_mut(key)?,
            (Segment::Seq { index }, toml::Value::Array(items)) => items.get_mut(*index)?,
            _ => return None,
        };
    }
    Some(node)
}

/// Set `field` of the table at `segments` to `value`; false when there is no such table.
fn put(tree: &mut toml::Value, segments: &[&Segment], field: &str, value: toml::Value) -> bool {
    match node_at(tree, segments) {
        Some(toml::Value::Table(table)) => {
            table.insert(field.to_owned(), value);
            true
        }
        _ => false,
    }
}

/// `segments` as a config key (`bots[0]`).
fn key_of(segments: &[&Segment]) -> String {
    let mut key = String::new();
    for segment in segments {
        match segment {
            Segment::Map { key: name } => {
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(name);
            }
            Segment::Seq { index } => key.push_str(&format!("[{index}]")),
            _ => {}
        }
    }
    key
}

/// Remove the value at `path` from `tree`; false when there is none to remove.
fn take_out(tree: &mut toml::Value, path: &serde_path_to_error::Path) -> bool {
    let segments: Vec<&Segment> = path.iter().collect();
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    match (last, node_at(tree, parents)) {
        (Segment::Map { key }, Some(toml::Value::Table(table))) => table.remove(key).is_some(),
        _ => false,
    }
}

/// Read the secret named by an `_env` key. `None` when the key is unset or the variable empty.
pub fn resolve_secret(
    env_name: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Secret> {
    let value = env(env_name?)?;
    (!value.is_empty()).then(|| Secret::new(value))
}

/// A `serde_ignored` path (`bots.1.foo`, `chats.0.?.x`) as a config key (`bots[1].foo`).
fn dotted(path: &str) -> String {
    let mut key = String::with_capacity(path.len() + 2);
    for segment in path.split('.').filter(|s| *s != "?") {
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            key.push('[');
            key.push_str(segment);
            key.push(']');
        } else {
            if !key.is_empty() {
                key.push('.');
            }
            key.push_str(segment);
        }
    }
    key
}

/// The platform a plain chat id in `bot`'s schedule means: that of its first `[[accounts]]`
/// entry, or `local` for a bot without accounts.
pub fn default_platform(config: &Config, bot: &str) -> baton_contract::Platform {
    config
        .accounts
        .iter()
        .find(|a| a.bot == bot)
        .map_or(baton_contract::Platform::Local, |a| a.platform)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "TOKEN").then(|| "s3cr3t".to_owned())
    }

    #[test]
    fn reports_every_unknown_key_with_its_line() {
        let text = "[gateway]\nlisten = \"127.0.0.1:1\"\nlisen = 1\n\n[lanes]\nmian = 2\n";
        let problems = Config::from_toml(text, Path::new("."), &env).unwrap_err();
        let keys: Vec<_> = problems.iter().map(|p| (p.key.as_str(), p.line)).collect();
        assert!(keys.contains(&("gateway.lisen", Some(3))), "{problems:?}");
        assert!(keys.contains(&("lanes.mian", Some(6))), "{problems:?}");
    }

    #[test]
    fn unknown_keys_in_array_tables_name_the_entry_and_its_line() {
        let text = "[[bots]]\nid = \"a\"\nbackend = \"echo\"\n\n[[bots]]\nid = \"b\"\nbackend = \"echo\"\nmodle = \"x\"\n\n[[chats]]\nplatform = \"local\"\nid = \"*\"\nactivaton = \"always\"\nallow_bot = []\n";
        let problems = Config::from_toml(text, Path::new("."), &env).unwrap_err();
        let keys: Vec<_> = problems.iter().map(|p| (p.key.as_str(), p.line)).collect();
        assert!(keys.contains(&("bots[1].modle", Some(8))), "{problems:?}");
        assert!(
            keys.contains(&("chats[0].activaton", Some(13))),
            "{problems:?}"
        );
        assert!(
            keys.contains(&("chats[0].allow_bot", Some(14))),
            "{problems:?}"
        );
    }

    #[test]
    fn a_type_error_names_its_line() {
        let problems =
            Config::from_toml("[lanes]\nmain = \"four\"\n", Path::new("."), &env).unwrap_err();
        assert_eq!(problems[0].line, Some(2), "{problems:?}");
        assert_eq!(problems[0].key, "lanes.main", "{problems:?}");
    }

    #[test]
    fn type_errors_name_their_key_and_the_other_problems_are_still_found() {
        let text = "[gateway]\nlisten = 5\n\n[[bots]]\nid = \"a\"\nbackend = \"echo\"\n\n[[bots]]\nid = \"a\"\nbackend = \"echo\"\ndescription = 1\n\n[chats_default]\nactivation = \"sometimes\"\n";
        let problems = Config::from_toml(text, Path::new("."), &env).unwrap_err();
        let found: Vec<_> = problems.iter().map(|p| (p.key.as_str(), p.line)).collect();
        assert!(
            found.contains(&("gateway.listen", Some(2))),
            "{problems:#?}"
        );
        assert!(
            found.contains(&("chats_default.activation", Some(14))),
            "{problems:#?}"
        );
        assert!(
            found.contains(&("bots[1].description", Some(11))),
            "{problems:#?}"
        );
        assert!(
            found.contains(&("bots[1].id", Some(9))),
            "the semantic checks ran too: {problems:#?}"
        );
        let required = "[[bots]]\nid = \"a\"\nbackend = \"ecoh\"\n";
        let problems = Config::from_toml(required, Path::new("."), &env).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert_eq!(problems[0].key, "bots[0].backend");
        assert_eq!(problems[0].line, Some(3));
        assert!(problems[0].message.contains("ecoh"), "{problems:#?}");
    }

    #[test]
    fn one_check_reports_a_typo_a_wrong_backend_an_unknown_bot_and_an_unset_secret() {
        let text = "[gateway]\nlisten = \"127.0.0.1:8642\"\nlisen = \"x\"\n\n\
                    [[bots]]\nid = \"snark\"\nbackend = \"opneai\"\n\n\
                    [[bots]]\nid = \"caid\"\nbackend = \"echo\"\n\n\
                    [[accounts]]\nbot = \"ghost\"\nplatform = \"local\"\n\n\
                    [[accounts]]\nbot = \"caid\"\nplatform = \"discord\"\n\
                    bot_token_env = \"CAID_DISCORD_TOKEN\"\napplication_id = \"1\"\n";
        let problems = Config::from_toml(text, Path::new("."), &env).unwrap_err();
        let found: Vec<_> = problems.iter().map(|p| (p.key.as_str(), p.line)).collect();
        assert_eq!(
            found,
            [
                ("gateway.lisen", Some(3)),
                ("bots[0].backend", Some(7)),
                ("accounts[0].bot", Some(14)),
                ("accounts[1].bot_token_env", Some(20)),
            ],
            "{problems:#?}"
        );
        assert!(problems[1].message.contains("opneai"), "{problems:#?}");
        assert!(
            problems[3].message.contains("CAID_DISCORD_TOKEN"),
            "{problems:#?}"
        );
        // A required key left out is found with the rest too.
        let missing = "[[bots]]\nid = \"a\"\n\n[[accounts]]\nbot = \"b\"\nplatform = \"local\"\n";
        let problems = Config::from_toml(missing, Path::new("."), &env).unwrap_err();
        let found: Vec<_> = problems.iter().map(|p| (p.key.as_str(), p.line)).collect();
        assert_eq!(
            found,
            [("bots[0]", Some(1)), ("accounts[0].bot", Some(5))],
            "{problems:#?}"
        );
        assert!(problems[0].message.contains("backend"), "{problems:#?}");
    }

    #[test]
    fn from_toml_gives_validation_problems_their_lines() {
        let text = "[[bots]]\nid = \"a\"\nbackend = \"echo\"\n\n[[bots]]\nid = \"a\"\nbackend = \"openai\"\n";
        let problems = Config::from_toml(text, Path::new("."), &env).unwrap_err();
        let found: Vec<_> = problems.iter().map(|p| (p.key.as_str(), p.line)).collect();
        assert!(found.contains(&("bots[1].id", Some(6))), "{problems:#?}");
        assert!(found.contains(&("bots[1].model", Some(5))), "{problems:#?}");
    }

    #[test]
    fn secrets_resolve_only_when_set_and_non_empty() {
        assert!(resolve_secret(Some("TOKEN"), &env).is_some());
        assert!(resolve_secret(Some("MISSING"), &env).is_none());
        assert!(resolve_secret(None, &env).is_none());
    }
}
