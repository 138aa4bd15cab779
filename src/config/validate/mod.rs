//! Checks serde cannot do: references between sections, globs, URLs, environment variables.
//!
//! [`validate`] never stops at the first problem: a user fixing a config wants the whole list
//! at once, as ripgrep's `err_message!` keeps searching after a bad file. Each [`Problem`] names
//! the dotted key (`accounts[1].bot_token_env`) and says what to do. Lines are filled in by
//! the locator (`config/locate.rs`), which needs the file's text and so runs in
//! [`Config::from_toml`].
//!
//! One file per group of sections, each adding its methods to the one [`Checker`]:
//! `limits.rs` (`[gateway]`, `[lanes]`, `[local]`, `[limits]`, `[agent_to_agent]`, `[chains]`), `bots.rs`
//! (`[[bots]]` and `[backends]`), `accounts.rs` (`[[accounts]]`, with the table of platform keys
//! in `account_keys.rs`), `chats.rs`, `schedule.rs` (heartbeats, cron entries,
//! `gateway.timezone`), `retention.rs` (`[store]`, `[retention]`), `artifacts.rs` and `cluster.rs`. The checks they share
//! (an `_env` key, a glob, a URL, a duplicate, a reference to a bot) live here, so every
//! section words them the same way.
//!
//! No message ever contains a secret: an `_env` key is reported by the variable's *name*, and a
//! value that looks like a pasted secret instead of a name is never echoed back.

mod account_keys;
mod accounts;
mod artifacts;
mod bots;
mod budgets;
mod chats;
mod cluster;
mod feedback;
#[cfg(test)]
mod fixture;
mod limits;
mod retention;
mod schedule;
mod telemetry;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::hash::Hash;

use globset::Glob;

use super::{Config, Problem};

pub use budgets::unused_prices;

/// Every problem in a parsed config. Empty means the config can be used.
///
/// `env` looks up environment variables (secrets named by `_env` keys); tests pass a closure
/// instead of touching the process environment. Problems carry no line: [`Config::from_toml`]
/// adds them from the file's text.
pub fn validate(config: &Config, env: &dyn Fn(&str) -> Option<String>) -> Vec<Problem> {
    let mut check = Checker {
        env,
        problems: Vec::new(),
    };
    check.gateway(config);
    check.lanes(config);
    check.local(config);
    check.limits(config);
    check.bots(config);
    check.backends(config);
    check.accounts(config);
    check.chats(config);
    check.agent_to_agent(config);
    check.a2a(config);
    check.chains(config);
    check.feedback(config);
    check.schedules(config);
    check.store(config);
    check.retention(config);
    check.artifacts(config);
    check.cluster(config);
    check.telemetry(config);
    check.prices(config);
    check.budgets(config);
    check.problems
}

/// Collects problems; one method per config section (in the sibling files), plus the shared
/// checks below.
struct Checker<'e> {
    env: &'e dyn Fn(&str) -> Option<String>,
    problems: Vec<Problem>,
}

impl Checker<'_> {
    fn report(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.problems.push(Problem {
            key: key.into(),
            line: None,
            message: message.into(),
        });
    }

    /// An `_env` key whose variable is read: it must name a variable (see [`Self::env_name`])
    /// that is set and non-empty. `holds` says what the variable should contain, for the message.
    fn env_var(&mut self, key: &str, name: &str, holds: &str) {
        if !self.env_name(key, name, holds) {
            return;
        }
        if (self.env)(name).is_none_or(|value| value.is_empty()) {
            self.report(
                key,
                format!(
                    "environment variable `{name}` is not set or is empty; export it with {holds}"
                ),
            );
        }
    }

    /// An `_env` key's value must be a variable's name, not the secret itself. Checked even for
    /// keys whose variable is never read: a secret pasted into the file is a leak either way.
    /// Returns whether the name is well-formed.
    fn env_name(&mut self, key: &str, name: &str, holds: &str) -> bool {
        if is_env_name(name) {
            return true;
        }
        // The value may be the secret itself, pasted in by mistake: never echo it.
        self.report(
            key,
            format!(
                "must name an environment variable (letters, digits and `_`, e.g. \
                 `MY_BOT_TOKEN`), not hold a value; put {holds} in an environment variable \
                 and write that variable's name here"
            ),
        );
        false
    }

    fn glob(&mut self, key: String, pattern: &str) {
        if let Err(err) = Glob::new(pattern) {
            self.report(
                key,
                format!(
                    "`{pattern}` is not a valid glob ({}); use `*` and `?` as wildcards, or \
                     write the name literally",
                    err.kind()
                ),
            );
        }
    }

    /// A list of globs under `key`; each problem names its entry (`key[2]`).
    fn globs(&mut self, key: &str, patterns: &[String]) {
        for (i, pattern) in patterns.iter().enumerate() {
            self.glob(format!("{key}[{i}]"), pattern);
        }
    }

    /// An http(s) URL. The value is not echoed: a URL may carry credentials.
    fn url(&mut self, key: String, value: &str) {
        if let Err(why) = check_url(value) {
            self.report(
                key,
                format!("{why}; write a full http(s) URL such as `https://host/path`"),
            );
        }
    }

    /// A turn's time limit: at least a second, at most a day.
    fn turn_timeout(&mut self, key: &str, seconds: u64) {
        const DAY: u64 = 24 * 60 * 60;
        self.at_least_one(key, seconds, " (seconds a turn may run)");
        if seconds > DAY {
            self.report(
                key,
                format!("is {seconds}; a turn may run at most a day ({DAY} seconds)"),
            );
        }
    }

    fn at_least_one(&mut self, key: &str, value: u64, hint: &str) {
        if value == 0 {
            self.report(key, format!("must be at least 1{hint}"));
        }
    }

    /// A reference to a bot by id; returns whether some bot has it. When none does, the
    /// message says so and goes on with `fix`, which is given the list of known ids.
    fn bot_ref(
        &mut self,
        config: &Config,
        key: impl Into<String>,
        id: &str,
        fix: impl FnOnce(&str) -> String,
    ) -> bool {
        let known = config.bots.iter().any(|b| b.id == id);
        if !known {
            let fix = fix(&bot_ids(config));
            self.report(key, format!("no bot has the id `{id}`; {fix}"));
        }
        known
    }
}

/// Records that entry `i` uses `id`; when an earlier entry already did, returns that entry's
/// index (and keeps it as the one later duplicates are reported against).
fn earlier<K: Eq + Hash>(seen: &mut HashMap<K, usize>, id: K, i: usize) -> Option<usize> {
    match seen.entry(id) {
        Entry::Occupied(first) => Some(*first.get()),
        Entry::Vacant(slot) => {
            slot.insert(i);
            None
        }
    }
}

/// The configured bot ids, for messages.
fn bot_ids(config: &Config) -> String {
    if config.bots.is_empty() {
        return "(no bots are configured)".into();
    }
    let mut ids: Vec<&str> = Vec::with_capacity(config.bots.len());
    for bot in &config.bots {
        if !ids.contains(&bot.id.as_str()) {
            ids.push(&bot.id);
        }
    }
    ids.join(", ")
}

/// `[a-z0-9][a-z0-9_-]*`: account ids follow the rule for bot names, so both read alike in
/// session keys and webhook paths.
fn is_slug(s: &str) -> bool {
    crate::bot_id::BotId::is_valid(s)
}

/// A suggestion for a bad id: lowercase, runs of anything else turned into `-`.
fn slugify(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_end_matches('-');
    if trimmed.is_empty() {
        "my-bot".into()
    } else {
        trimmed.into()
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`: what a shell accepts as a variable name.
fn is_env_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn check_url(value: &str) -> Result<(), &'static str> {
    let url = reqwest::Url::parse(value).map_err(|_| "is not a URL")?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("must be an http or https URL");
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("has no host");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use baton_contract::Platform;

    use super::fixture::{BROKEN, SECRET, all_env, keys, no_env, parse};
    use super::*;

    /// Each section's file checks its own keys in [`BROKEN`]; here, that one call reports
    /// problems in every section together.
    #[test]
    fn reports_every_problem_at_once_each_naming_its_key() {
        let problems = validate(&parse(BROKEN), &no_env);
        let keys = keys(&problems);
        for section in [
            "gateway.",
            "lanes.",
            "limits.",
            "agent_to_agent.",
            "chains.",
            "bots[",
            "accounts[",
            "chats[",
        ] {
            assert!(
                keys.iter().any(|k| k.starts_with(section)),
                "nothing about {section} in {problems:#?}"
            );
        }
        for p in &problems {
            assert!(!p.message.is_empty(), "{p}");
        }
    }

    #[test]
    fn no_secret_value_ever_appears_in_a_message() {
        let config = parse(BROKEN);
        for env in [&no_env as &dyn Fn(&str) -> Option<String>, &all_env] {
            for p in validate(&config, env) {
                let text = p.to_string();
                assert!(!text.contains(SECRET), "{text}");
                assert!(!text.contains("pasted-secret"), "{text}");
            }
        }
        // With every variable set, nothing is reported about the environment.
        let problems = validate(&config, &all_env);
        assert!(!keys(&problems).contains(&"gateway.api_token_env"));
        let pasted = problems
            .iter()
            .find(|p| p.key == "accounts[1].bot_token_env")
            .expect("a pasted secret is reported");
        assert!(pasted.message.contains("environment variable"), "{pasted}");
    }

    #[test]
    fn connection_and_mcp_limits_must_leave_room() {
        let text = "[gateway]\nheader_timeout_seconds = 0\nidle_timeout_seconds = 0\n\
                    body_timeout_seconds = 0\nmax_connections = 0\nmcp_max_sessions = 0\n\
                    mcp_max_init_bytes = 100\nmcp_session_idle_seconds = 0\n";
        let problems = validate(&parse(text), &no_env);
        assert_eq!(
            keys(&problems),
            [
                "gateway.header_timeout_seconds",
                "gateway.idle_timeout_seconds",
                "gateway.body_timeout_seconds",
                "gateway.max_connections",
                "gateway.mcp_max_sessions",
                "gateway.mcp_session_idle_seconds",
                "gateway.mcp_max_init_bytes",
            ]
        );
        assert!(validate(&parse("[gateway]\nmax_connections = 8\n"), &no_env).is_empty());
    }

    #[test]
    fn env_vars_must_be_set_and_non_empty() {
        let text = "[gateway]\napi_token_env = \"TOKEN\"\n";
        let config = parse(text);
        let empty = |_: &str| Some(String::new());
        let problems = validate(&config, &empty);
        assert_eq!(keys(&problems), ["gateway.api_token_env"]);
        assert!(problems[0].message.contains("`TOKEN`"), "{}", problems[0]);
        assert!(validate(&config, &all_env).is_empty());
    }

    #[test]
    fn the_demo_config_is_valid_without_credentials() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        let text = std::fs::read_to_string(dir.join("demo.toml")).expect("config/demo.toml");
        let config = Config::from_toml(&text, &dir, &no_env).unwrap_or_else(|p| panic!("{p:#?}"));
        assert_eq!(config.bots.len(), 3);
        assert!(
            config
                .accounts
                .iter()
                .all(|a| a.platform == Platform::Local)
        );
    }

    #[test]
    fn the_example_config_is_valid_as_shipped() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        let text =
            std::fs::read_to_string(dir.join("baton.example.toml")).expect("baton.example.toml");
        if let Err(problems) = Config::from_toml(&text, &dir, &no_env) {
            panic!("{problems:#?}");
        }
    }

    /// Lines of the example that start with `#` directly followed by a setting are switched-off
    /// settings. Switched on (with every variable they name set), the file is still valid.
    #[test]
    fn the_example_config_is_valid_with_every_setting_switched_on() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        let text =
            std::fs::read_to_string(dir.join("baton.example.toml")).expect("baton.example.toml");
        let mut switched = 0;
        let on: String = text
            .lines()
            .map(|line| match line.strip_prefix('#') {
                Some(rest) if rest.starts_with(|c: char| c.is_ascii_alphabetic() || c == '[') => {
                    switched += 1;
                    format!("{rest}\n")
                }
                _ => format!("{line}\n"),
            })
            .collect();
        assert!(switched > 30, "only {switched} switched-off settings");
        let config = Config::from_toml(&on, &dir, &all_env).unwrap_or_else(|p| panic!("{p:#?}"));
        let platforms: Vec<_> = config.accounts.iter().map(|a| a.platform).collect();
        for platform in Platform::ALL {
            assert!(
                platforms.contains(&platform),
                "no {platform} account example"
            );
        }
        assert!(
            config
                .accounts
                .iter()
                .any(|a| a.mode.as_deref() == Some("events"))
        );
        assert!(
            config
                .accounts
                .iter()
                .any(|a| a.mode.as_deref() == Some("webhook"))
        );
    }

    #[test]
    fn slugs_and_env_names() {
        assert!(is_slug("snark") && is_slug("a1_b-c") && is_slug("9"));
        assert!(!is_slug("") && !is_slug("-a") && !is_slug("Snark") && !is_slug("a b"));
        assert_eq!(slugify("Snark Bot!"), "snark-bot");
        assert!(is_env_name("SNARK_TOKEN") && is_env_name("_x1"));
        assert!(!is_env_name("xoxb-123") && !is_env_name("1A") && !is_env_name(""));
    }
}
