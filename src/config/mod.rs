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
pub use validate::validate;

use locate::{line_at, locate};

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
        let (parsed, unknown) = typed(&mut tree, &mut problems);
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
        problems.extend(validate(&config, env).into_iter().map(|mut problem| {
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

/// Deserialize `tree` into a [`Config`], with the unknown keys' paths. A wrongly typed value is
/// a problem at its key path (`bots[0].backend`); it is then taken out and the rest is read
/// again, so the other values (and then the semantic checks) are still looked at. That ends when
/// a value taken out was required (its default cannot stand in for it): `None`.
fn typed(tree: &mut toml::Value, problems: &mut Vec<Problem>) -> (Option<Config>, Vec<String>) {
    let mut unknown = std::collections::BTreeSet::new();
    let mut removed = 0;
    while removed <= MAX_TYPE_ERRORS {
        let mut ignored = Vec::new();
        let mut record = |path: serde_ignored::Path<'_>| ignored.push(path.to_string());
        let de = serde_ignored::Deserializer::new(tree.clone(), &mut record);
        let result: Result<Config, _> = serde_path_to_error::deserialize(de);
        unknown.extend(ignored);
        let err = match result {
            Ok(config) => return (Some(config), unknown.into_iter().collect()),
            Err(err) => err,
        };
        let message = err.inner().message().trim().to_owned();
        if removed > 0 && message.starts_with("missing field") {
            break;
        }
        let key = err.path().to_string();
        problems.push(Problem {
            key: if key == "." { "(file)".into() } else { key },
            line: None,
            message,
        });
        if !take_out(tree, err.path()) {
            break;
        }
        removed += 1;
    }
    (None, unknown.into_iter().collect())
}

/// Remove the value at `path` from `tree`; false when there is none to remove.
fn take_out(tree: &mut toml::Value, path: &serde_path_to_error::Path) -> bool {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut node = tree;
    for segment in parents {
        let next = match (segment, node) {
            (Segment::Map { key }, toml::Value::Table(table)) => table.get_mut(key),
            (Segment::Seq { index }, toml::Value::Array(items)) => items.get_mut(*index),
            _ => None,
        };
        match next {
            Some(next) => node = next,
            None => return false,
        }
    }
    match (last, node) {
        (Segment::Map { key }, toml::Value::Table(table)) => table.remove(key).is_some(),
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
