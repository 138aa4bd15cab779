//! Checks serde cannot do: references between sections, globs, URLs, environment variables.
//!
//! [`validate`] never stops at the first problem: a user fixing a config wants the whole list
//! at once, as ripgrep's `err_message!` keeps searching after a bad file. Each [`Problem`] names
//! the dotted key (`accounts[1].bot_token_env`) and says what to do. Lines are filled in by
//! [`locate`], which needs the file's text and so runs in [`Config::from_toml`].
//!
//! No message ever contains a secret: an `_env` key is reported by the variable's *name*, and a
//! value that looks like a pasted secret instead of a name is never echoed back.

use std::collections::HashMap;
use std::net::SocketAddr;

use baton_contract::Platform;
use globset::Glob;

use super::{AccountConfig, BackendKind, BotConfig, Config, Problem};

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
    check.limits(config);
    check.bots(config);
    check.backends(config);
    check.accounts(config);
    check.chats(config);
    check.agent_to_agent(config);
    check.chains(config);
    check.problems
}

/// Collects problems; one method per config section.
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

    /// An `_env` key: it must name a variable (not hold the secret) that is set and non-empty.
    /// `holds` says what the variable should contain, for the message.
    fn env_var(&mut self, key: &str, name: &str, holds: &str) {
        if !is_env_name(name) {
            // The value may be the secret itself, pasted in by mistake: never echo it.
            self.report(
                key,
                format!(
                    "must name an environment variable (letters, digits and `_`, e.g. \
                     `MY_BOT_TOKEN`), not hold a value; put {holds} in an environment variable \
                     and write that variable's name here"
                ),
            );
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

    /// An http(s) URL. The value is not echoed: a URL may carry credentials.
    fn url(&mut self, key: String, value: &str) {
        if let Err(why) = check_url(value) {
            self.report(
                key,
                format!("{why}; write a full http(s) URL such as `https://host/path`"),
            );
        }
    }

    fn at_least_one(&mut self, key: &str, value: u64, hint: &str) {
        if value == 0 {
            self.report(key, format!("must be at least 1{hint}"));
        }
    }

    fn gateway(&mut self, config: &Config) {
        let gateway = &config.gateway;
        if gateway.listen.parse::<SocketAddr>().is_err() {
            self.report(
                "gateway.listen",
                format!(
                    "`{}` is not a socket address; write IP:PORT, e.g. \"127.0.0.1:8642\" \
                     (or \"0.0.0.0:8642\" to listen on every interface)",
                    gateway.listen
                ),
            );
        }
        if gateway.database.trim().is_empty() {
            self.report(
                "gateway.database",
                "is empty; name an SQLite file (e.g. \"baton.db\"), or \":memory:\" for a \
                 throwaway run",
            );
        }
        if let Some(name) = &gateway.api_token_env {
            self.env_var(
                "gateway.api_token_env",
                name,
                "the bearer token for /v1 and /api (or remove the key: without it only \
                 loopback clients are served)",
            );
        }
        let token = &gateway.silent_token;
        if token.is_empty() {
            self.report(
                "gateway.silent_token",
                "is empty; a bot needs a word to say \"I have nothing to add\" (default \
                 \"NO_REPLY\")",
            );
        } else if token.chars().any(char::is_whitespace) {
            self.report(
                "gateway.silent_token",
                "contains whitespace; use one word such as \"NO_REPLY\" (replies are trimmed \
                 before they are compared with it)",
            );
        }
        self.at_least_one(
            "gateway.turn_timeout_seconds",
            gateway.turn_timeout_seconds,
            " (seconds a turn may run)",
        );
    }

    fn lanes(&mut self, config: &Config) {
        let lanes = &config.lanes;
        for (name, value) in [
            ("main", lanes.main),
            ("nested", lanes.nested),
            ("subagent", lanes.subagent),
            ("cron", lanes.cron),
        ] {
            self.at_least_one(
                &format!("lanes.{name}"),
                value as u64,
                ": a lane with no room never runs a turn",
            );
        }
    }

    fn limits(&mut self, config: &Config) {
        let limits = &config.limits;
        for (name, value) in [
            (
                "inbound_per_sender_per_minute",
                limits.inbound_per_sender_per_minute,
            ),
            (
                "bot_pair_events_per_minute",
                limits.bot_pair_events_per_minute,
            ),
            ("send_per_pair_per_minute", limits.send_per_pair_per_minute),
            (
                "send_per_sender_per_minute",
                limits.send_per_sender_per_minute,
            ),
            ("fan_out_targets", limits.fan_out_targets),
        ] {
            self.at_least_one(
                &format!("limits.{name}"),
                u64::from(value),
                " (a budget of 0 would refuse everything)",
            );
        }
        self.at_least_one(
            "limits.fan_out_window_seconds",
            limits.fan_out_window_seconds,
            "",
        );
        self.at_least_one(
            "limits.max_depth",
            u64::from(limits.max_depth),
            " (to turn bot-to-bot messages off, set [agent_to_agent] enabled = false)",
        );
        if limits.max_ping_pong_turns > 5 {
            self.report(
                "limits.max_ping_pong_turns",
                format!(
                    "is {}; it must be between 0 and 5 (extra A<->B exchanges after a \
                     sessions_send)",
                    limits.max_ping_pong_turns
                ),
            );
        }
    }

    fn bots(&mut self, config: &Config) {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, bot) in config.bots.iter().enumerate() {
            let key = |name: &str| format!("bots[{i}].{name}");
            if bot.id.is_empty() {
                self.report(
                    key("id"),
                    "is empty; give the bot a slug id such as \"snark\"",
                );
            } else if !is_slug(&bot.id) {
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
            if let Some(first) = seen.insert(&bot.id, i) {
                seen.insert(&bot.id, first);
                self.report(
                    key("id"),
                    format!(
                        "`{}` is already the id of bots[{first}]; bot ids must be unique",
                        bot.id
                    ),
                );
            }
            self.backend_keys(i, bot);
            if bot.system_prompt.is_some() && bot.system_prompt_file.is_some() {
                self.report(
                    key("system_prompt_file"),
                    "is set together with `system_prompt`; keep one of them",
                );
            }
            if let Some(file) = &bot.system_prompt_file {
                let path = config.base_dir.join(file);
                let readable = std::fs::File::open(&path)
                    .and_then(|f| f.metadata())
                    .is_ok_and(|m| m.is_file());
                if !readable {
                    self.report(
                        key("system_prompt_file"),
                        format!(
                            "cannot read `{}`; relative paths are resolved from the config \
                             file's directory",
                            path.display()
                        ),
                    );
                }
            }
            for (t, tool) in bot.tools.iter().enumerate() {
                self.glob(format!("bots[{i}].tools[{t}]"), tool);
            }
        }
    }

    /// Keys that belong to one backend: present where needed, absent elsewhere.
    fn backend_keys(&mut self, i: usize, bot: &BotConfig) {
        let key = |name: &str| format!("bots[{i}].{name}");
        let backend = bot.backend;
        let only = |name: &str, owner: &str| {
            format!(
                "`{name}` is only used by the {owner} backend; remove it, or set backend = \"{owner}\""
            )
        };
        match backend {
            BackendKind::Openai => {
                if bot.model.as_deref().is_none_or(|m| m.trim().is_empty()) {
                    self.report(
                        key("model"),
                        "is missing; the openai backend needs a model name (e.g. model = \
                         \"gpt-4o-mini\")",
                    );
                }
            }
            BackendKind::Http => match &bot.url {
                None => self.report(
                    key("url"),
                    "is missing; the http backend needs the URL turns are POSTed to",
                ),
                Some(url) => self.url(key("url"), url),
            },
            BackendKind::Command => {
                if bot
                    .command
                    .first()
                    .is_none_or(|program| program.trim().is_empty())
                {
                    self.report(
                        key("command"),
                        "is missing or empty; the command backend needs the program and its \
                         arguments, e.g. command = [\"my-agent\", \"--json\"]",
                    );
                }
            }
            BackendKind::Echo => {}
        }
        if backend != BackendKind::Openai {
            if bot.base_url.is_some() {
                self.report(key("base_url"), only("base_url", "openai"));
            }
            if bot.api_key_env.is_some() {
                self.report(key("api_key_env"), only("api_key_env", "openai"));
            }
        } else {
            if let Some(url) = &bot.base_url {
                self.url(key("base_url"), url);
            }
            if let Some(name) = &bot.api_key_env {
                self.env_var(
                    &key("api_key_env"),
                    name,
                    "the model server's API key (or remove the key if the server needs none)",
                );
            }
        }
        if backend != BackendKind::Http && bot.url.is_some() {
            self.report(key("url"), only("url", "http"));
        }
        if backend != BackendKind::Command && !bot.command.is_empty() {
            self.report(key("command"), only("command", "command"));
        }
    }

    fn backends(&mut self, config: &Config) {
        let openai = &config.backends.openai;
        if let Some(url) = &openai.base_url {
            self.url("backends.openai.base_url".into(), url);
        }
        if let Some(name) = &openai.api_key_env {
            self.env_var(
                "backends.openai.api_key_env",
                name,
                "the model server's API key (or remove the key if the server needs none)",
            );
        }
    }

    fn accounts(&mut self, config: &Config) {
        let mut seen: HashMap<(Platform, &str), usize> = HashMap::new();
        for (i, account) in config.accounts.iter().enumerate() {
            let key = |name: &str| format!("accounts[{i}].{name}");
            if !config.bots.iter().any(|b| b.id == account.bot) {
                self.report(
                    key("bot"),
                    format!(
                        "no bot has the id `{}`; add a [[bots]] entry with that id or use one \
                         of: {}",
                        account.bot,
                        bot_ids(config)
                    ),
                );
            }
            let id = account.account_id();
            if let Some(explicit) = &account.id {
                if !is_slug(explicit) {
                    self.report(
                        key("id"),
                        format!(
                            "`{explicit}` is not a slug; account ids appear in webhook paths \
                             and session keys, so use lowercase letters, digits, `-` and `_`"
                        ),
                    );
                }
            }
            if let Some(first) = seen.insert((account.platform, id), i) {
                seen.insert((account.platform, id), first);
                self.report(
                    key("id"),
                    format!(
                        "account id `{id}` is already used on {} by accounts[{first}]; give one \
                         of them a distinct `id` (the default is the bot's id)",
                        account.platform
                    ),
                );
            }
            self.platform_keys(i, account);
        }
    }

    /// The keys each platform (and mode) needs, allows and refuses.
    fn platform_keys(&mut self, i: usize, account: &AccountConfig) {
        let key = |name: &str| format!("accounts[{i}].{name}");
        let platform = account.platform;
        let modes = Mode::of(platform);
        let mode = match (&account.mode, modes) {
            (None, _) => modes.first().copied(),
            (Some(_), []) => {
                self.report(
                    key("mode"),
                    format!("{platform} accounts have no mode; remove it"),
                );
                None
            }
            (Some(given), _) => match modes.iter().find(|m| m.as_str() == given) {
                Some(m) => Some(*m),
                None => {
                    let choices: Vec<_> = modes
                        .iter()
                        .map(|m| format!("\"{}\"", m.as_str()))
                        .collect();
                    self.report(
                        key("mode"),
                        format!(
                            "`{given}` is not a {platform} mode; use {}",
                            choices.join(" or ")
                        ),
                    );
                    // Keys are still checked against the platform, not against a mode.
                    for field in fields(account).into_iter().filter(|f| f.present) {
                        if !KEYS
                            .iter()
                            .any(|k| k.name == field.name && k.platform_uses(platform))
                        {
                            self.report(key(field.name), not_for_platform(field.name, platform));
                        }
                    }
                    return;
                }
            },
        };
        for field in fields(account) {
            let Some(spec) = KEYS.iter().find(|k| k.name == field.name) else {
                continue;
            };
            let need = spec.need(platform, mode);
            match (need, field.present) {
                (Need::Required, false) => {
                    let during = match mode {
                        Some(m) => format!(" in {} mode", m.as_str()),
                        None => String::new(),
                    };
                    self.report(
                        key(field.name),
                        format!(
                            "is missing; {platform} accounts{during} need it: {}",
                            spec.holds
                        ),
                    );
                }
                (Need::Unused, true) => {
                    let message = if spec.platform_uses(platform) {
                        let other = modes
                            .iter()
                            .find(|m| spec.need(platform, Some(**m)) != Need::Unused)
                            .map_or("another", |m| m.as_str());
                        format!(
                            "is only used in {platform} {other} mode; remove it, or set mode = \
                             \"{other}\""
                        )
                    } else {
                        not_for_platform(field.name, platform)
                    };
                    self.report(key(field.name), message);
                }
                (Need::Required | Need::Optional, true) => {
                    if let Some(value) = field.value {
                        self.account_value(&key(field.name), spec, value);
                    }
                    for (g, guild) in field.list.iter().enumerate() {
                        if !is_snowflake(guild) {
                            self.report(
                                format!("accounts[{i}].{}[{g}]", field.name),
                                format!(
                                    "`{guild}` is not a Discord guild id (a number such as \
                                     \"111111111111111111\")"
                                ),
                            );
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn account_value(&mut self, key: &str, spec: &KeySpec, value: &str) {
        if spec.name.ends_with("_env") {
            self.env_var(key, value, spec.holds);
        } else if spec.name == "api_url" {
            self.url(key.to_owned(), value);
        } else if spec.name == "application_id" && !is_snowflake(value) {
            self.report(
                key,
                "is not a Discord application id (a number, shown as \"Application ID\" in the \
                 developer portal)",
            );
        } else if spec.name == "public_key"
            && !(value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            self.report(
                key,
                "is not a Discord public key (64 hex digits, shown as \"Public Key\" in the \
                 developer portal)",
            );
        } else if value.trim().is_empty() {
            self.report(key, format!("is empty; write {}", spec.holds));
        }
    }

    fn chats(&mut self, config: &Config) {
        let mut seen: HashMap<(Platform, &str), usize> = HashMap::new();
        for (i, chat) in config.chats.iter().enumerate() {
            self.glob(format!("chats[{i}].id"), &chat.id);
            if let Some(first) = seen.insert((chat.platform, &chat.id), i) {
                seen.insert((chat.platform, &chat.id), first);
                self.report(
                    format!("chats[{i}].id"),
                    format!(
                        "{} chat `{}` already has an entry, chats[{first}]; merge the two",
                        chat.platform, chat.id
                    ),
                );
            }
            for (b, pattern) in chat.allow_bots.iter().flatten().enumerate() {
                self.glob(format!("chats[{i}].allow_bots[{b}]"), pattern);
            }
        }
        for (b, pattern) in config.chats_default.allow_bots.iter().enumerate() {
            self.glob(format!("chats_default.allow_bots[{b}]"), pattern);
        }
    }

    fn agent_to_agent(&mut self, config: &Config) {
        for (i, pattern) in config.agent_to_agent.allow.iter().enumerate() {
            let key = format!("agent_to_agent.allow[{i}]");
            let literal = !pattern.contains(['*', '?', '[', '{']);
            if literal && !config.bots.iter().any(|b| &b.id == pattern) {
                self.report(
                    key,
                    format!(
                        "no bot has the id `{pattern}`; use a bot id or a glob (known: {})",
                        bot_ids(config)
                    ),
                );
            } else {
                self.glob(key, pattern);
            }
        }
    }

    fn chains(&mut self, config: &Config) {
        let chains = &config.chains;
        if let Some(coordinator) = &chains.coordinator {
            if !config.bots.iter().any(|b| &b.id == coordinator) {
                self.report(
                    "chains.coordinator",
                    format!(
                        "no bot has the id `{coordinator}`; name one of: {} (or remove the key \
                         to let baton coordinate round-robin)",
                        bot_ids(config)
                    ),
                );
            }
        }
        self.at_least_one("chains.max_rounds", u64::from(chains.max_rounds), "");
        if chains.rounds == 0 || chains.rounds > chains.max_rounds.max(1) {
            self.report(
                "chains.rounds",
                format!(
                    "is {}; it must be between 1 and max_rounds ({})",
                    chains.rounds, chains.max_rounds
                ),
            );
        }
        self.at_least_one(
            "chains.turn_timeout_seconds",
            chains.turn_timeout_seconds,
            "",
        );
    }
}

/// An account mode, per platform. The first listed is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Socket,
    Events,
    Websocket,
    Webhook,
}

impl Mode {
    fn of(platform: Platform) -> &'static [Mode] {
        match platform {
            Platform::Slack => &[Mode::Socket, Mode::Events],
            Platform::Feishu | Platform::Lark => &[Mode::Websocket, Mode::Webhook],
            Platform::Discord | Platform::Local => &[],
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Mode::Socket => "socket",
            Mode::Events => "events",
            Mode::Websocket => "websocket",
            Mode::Webhook => "webhook",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Required,
    Optional,
    Unused,
}

/// One platform key of `[[accounts]]`: where it is needed, and what it holds.
struct KeySpec {
    name: &'static str,
    /// What the value is, for messages ("the Slack bot token (xoxb-...)").
    holds: &'static str,
    need: fn(Platform, Option<Mode>) -> Need,
}

impl KeySpec {
    fn need(&self, platform: Platform, mode: Option<Mode>) -> Need {
        (self.need)(platform, mode)
    }

    /// Whether some mode of `platform` uses the key.
    fn platform_uses(&self, platform: Platform) -> bool {
        let modes = Mode::of(platform);
        if modes.is_empty() {
            self.need(platform, None) != Need::Unused
        } else {
            modes
                .iter()
                .any(|m| self.need(platform, Some(*m)) != Need::Unused)
        }
    }
}

const fn when(yes: bool, need: Need) -> Need {
    if yes { need } else { Need::Unused }
}

fn feishu(platform: Platform) -> bool {
    matches!(platform, Platform::Feishu | Platform::Lark)
}

/// The account keys, in file order; `mode`, `bot` and `id` are checked separately.
const KEYS: &[KeySpec] = &[
    KeySpec {
        name: "app_token_env",
        holds: "the Slack app-level token (xapp-...), needed by Socket Mode",
        need: |p, m| {
            when(
                p == Platform::Slack && m == Some(Mode::Socket),
                Need::Required,
            )
        },
    },
    KeySpec {
        name: "bot_token_env",
        holds: "the bot token (Slack: xoxb-...; Discord: from the Bot page)",
        need: |p, _| {
            when(
                matches!(p, Platform::Slack | Platform::Discord),
                Need::Required,
            )
        },
    },
    KeySpec {
        name: "signing_secret_env",
        holds: "the Slack signing secret, which verifies Events API requests",
        need: |p, m| {
            when(
                p == Platform::Slack && m == Some(Mode::Events),
                Need::Required,
            )
        },
    },
    KeySpec {
        name: "app_id",
        holds: "the app id (Feishu/Lark: cli_...; Slack: A0...)",
        need: |p, _| match p {
            Platform::Slack => Need::Optional,
            Platform::Feishu | Platform::Lark => Need::Required,
            _ => Need::Unused,
        },
    },
    KeySpec {
        name: "application_id",
        holds: "the Discord application id",
        need: |p, _| when(p == Platform::Discord, Need::Required),
    },
    KeySpec {
        name: "public_key",
        holds: "the Discord application's public key",
        need: |p, _| when(p == Platform::Discord, Need::Optional),
    },
    KeySpec {
        name: "command_guilds",
        holds: "Discord guild ids to register /baton in",
        need: |p, _| when(p == Platform::Discord, Need::Optional),
    },
    KeySpec {
        name: "app_secret_env",
        holds: "the Feishu/Lark app secret",
        need: |p, _| when(feishu(p), Need::Required),
    },
    KeySpec {
        name: "verification_token_env",
        holds: "the Feishu/Lark event verification token",
        need: |p, m| when(feishu(p) && m == Some(Mode::Webhook), Need::Required),
    },
    KeySpec {
        name: "encrypt_key_env",
        holds: "the Feishu/Lark event encrypt key",
        need: |p, m| when(feishu(p) && m == Some(Mode::Webhook), Need::Optional),
    },
    KeySpec {
        name: "api_url",
        holds: "the platform API's base URL",
        need: |p, _| when(p != Platform::Local, Need::Optional),
    },
];

/// One platform key's value in an account, by name.
struct Field<'a> {
    name: &'static str,
    present: bool,
    value: Option<&'a str>,
    list: &'a [String],
}

fn fields(a: &AccountConfig) -> [Field<'_>; 11] {
    fn one<'a>(name: &'static str, value: &'a Option<String>) -> Field<'a> {
        Field {
            name,
            present: value.is_some(),
            value: value.as_deref(),
            list: &[],
        }
    }
    [
        one("app_token_env", &a.app_token_env),
        one("bot_token_env", &a.bot_token_env),
        one("signing_secret_env", &a.signing_secret_env),
        one("app_id", &a.app_id),
        one("application_id", &a.application_id),
        one("public_key", &a.public_key),
        Field {
            name: "command_guilds",
            present: !a.command_guilds.is_empty(),
            value: None,
            list: &a.command_guilds,
        },
        one("app_secret_env", &a.app_secret_env),
        one("verification_token_env", &a.verification_token_env),
        one("encrypt_key_env", &a.encrypt_key_env),
        one("api_url", &a.api_url),
    ]
}

fn not_for_platform(name: &str, platform: Platform) -> String {
    let users: Vec<&str> = Platform::ALL
        .iter()
        .filter(|p| KEYS.iter().any(|k| k.name == name && k.platform_uses(**p)))
        .map(|p| p.as_str())
        .collect();
    if users.is_empty() {
        format!("does not apply to {platform} accounts; remove it")
    } else {
        format!(
            "does not apply to {platform} accounts (it is a {} key); remove it",
            users.join("/")
        )
    }
}

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

/// `[a-z0-9][a-z0-9_-]*`
fn is_slug(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
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

fn is_snowflake(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
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

/// The 1-based line of a dotted key such as `bots[1].id` or `gateway.listen` in `text`.
///
/// Finds the table the key lives in (`[gateway]`, or the second `[[bots]]` header for
/// `bots[1]`), then the key's line inside that table. A key that is missing from its table
/// (a required key left out) gets the table's header line. `None` when neither is found.
pub(super) fn locate(text: &str, key: &str) -> Option<usize> {
    let mut arrays: HashMap<String, usize> = HashMap::new();
    // (canonical table path such as `bots[1]`, 1-based header line); the root table first.
    let mut tables: Vec<(String, usize)> = vec![(String::new(), 0)];
    let lines: Vec<&str> = text.lines().collect();
    for (n, line) in lines.iter().enumerate() {
        let t = line.trim();
        let (name, array) = if let Some(inner) = t.strip_prefix("[[") {
            match inner.split_once("]]") {
                Some((name, _)) => (name, true),
                None => continue,
            }
        } else if let Some(inner) = t.strip_prefix('[') {
            match inner.split_once(']') {
                Some((name, _)) => (name, false),
                None => continue,
            }
        } else {
            continue;
        };
        let mut plain = String::with_capacity(name.len());
        let mut canonical = String::with_capacity(name.len() + 4);
        let segments: Vec<&str> = name
            .split('.')
            .map(|s| s.trim().trim_matches('"'))
            .collect();
        for (s, segment) in segments.iter().enumerate() {
            if s > 0 {
                plain.push('.');
                canonical.push('.');
            }
            plain.push_str(segment);
            canonical.push_str(segment);
            if array && s + 1 == segments.len() {
                *arrays.entry(plain.clone()).or_insert(0) += 1;
            }
            if let Some(count) = arrays.get(&plain) {
                canonical.push_str(&format!("[{}]", count - 1));
            }
        }
        tables.push((canonical, n + 1));
    }
    // The longest table path that prefixes the key.
    let (t, (table, header)) = tables
        .iter()
        .enumerate()
        .filter(|(_, (path, _))| {
            path.is_empty()
                || key == path
                || key
                    .strip_prefix(path.as_str())
                    .is_some_and(|rest| rest.starts_with('.'))
        })
        .max_by_key(|(_, (path, _))| path.len())?;
    let rest = key[table.len()..].trim_start_matches('.');
    let leaf = rest
        .split(['.', '['])
        .next()
        .filter(|leaf| !leaf.is_empty());
    let end = tables.get(t + 1).map_or(lines.len(), |(_, h)| h - 1);
    let found = leaf.and_then(|leaf| {
        (*header..end).find(|&n| {
            let line = lines[n].trim_start();
            let line = line
                .strip_prefix('"')
                .and_then(|l| l.strip_prefix(leaf))
                .and_then(|l| l.strip_prefix('"'))
                .or_else(|| line.strip_prefix(leaf));
            line.is_some_and(|l| {
                let l = l.trim_start();
                l.starts_with('=') || l.starts_with('.')
            })
        })
    });
    match found {
        Some(n) => Some(n + 1),
        None if table.is_empty() => None,
        None => Some(*header),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const SECRET: &str = "sup3r-s3cret-value";

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn all_env(_: &str) -> Option<String> {
        Some(SECRET.to_owned())
    }

    fn parse(text: &str) -> Config {
        let mut config: Config = toml::from_str(text).expect("test config parses");
        config.base_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
        config
    }

    fn keys(problems: &[Problem]) -> Vec<&str> {
        problems.iter().map(|p| p.key.as_str()).collect()
    }

    const BROKEN: &str = r#"
[gateway]
listen = "localhost"
silent_token = "NO REPLY"
api_token_env = "BATON_API_TOKEN"

[lanes]
nested = 0

[limits]
max_ping_pong_turns = 9
send_per_pair_per_minute = 0

[agent_to_agent]
allow = ["snark", "ghost", "[oops"]

[chains]
coordinator = "nobody"
rounds = 20
max_rounds = 10

[[bots]]
id = "snark"
backend = "openai"
system_prompt = "hi"
system_prompt_file = "does-not-exist.md"
tools = ["chain_*", "[bad"]
api_key_env = "SNARK_KEY"

[[bots]]
id = "Snark Bot"
backend = "http"
url = "ftp://example.com"
base_url = "https://api.example.com/v1"

[[bots]]
id = "snark"
backend = "command"
command = []

[[accounts]]
bot = "snark"
platform = "slack"
app_token_env = "SNARK_APP"

[[accounts]]
bot = "snark"
platform = "slack"
mode = "events"
bot_token_env = "xoxb-1234-pasted-secret"
app_token_env = "SNARK_APP"

[[accounts]]
bot = "caid"
platform = "discord"
mode = "socket"
bot_token_env = "CAID_DISCORD"
app_token_env = "CAID_APP"
application_id = "not-a-number"
api_url = "discord.com"

[[accounts]]
bot = "snark"
platform = "feishu"
mode = "webhook"
app_id = "cli_1"
app_secret_env = "FEISHU_SECRET"
encrypt_key_env = "FEISHU_ENCRYPT"

[[accounts]]
bot = "snark"
platform = "local"
api_url = "http://127.0.0.1:1"

[[accounts]]
bot = "snark"
platform = "lark"
mode = "stream"
app_id = "cli_2"
app_secret_env = "LARK_SECRET"
signing_secret_env = "LARK_SIGNING"

[[chats]]
platform = "slack"
id = "C01*"
allow_bots = ["[x"]

[[chats]]
platform = "slack"
id = "C01*"

[[chats]]
platform = "discord"
id = "[z"
"#;

    #[test]
    fn reports_every_problem_at_once_each_naming_its_key() {
        let config = parse(BROKEN);
        let problems = validate(&config, &no_env);
        let keys = keys(&problems);
        for expected in [
            "gateway.listen",
            "gateway.silent_token",
            "gateway.api_token_env",
            "lanes.nested",
            "limits.max_ping_pong_turns",
            "limits.send_per_pair_per_minute",
            "agent_to_agent.allow[1]",
            "agent_to_agent.allow[2]",
            "chains.coordinator",
            "chains.rounds",
            "bots[0].model",
            "bots[0].system_prompt_file",
            "bots[0].tools[1]",
            "bots[0].api_key_env",
            "bots[1].id",
            "bots[1].url",
            "bots[1].base_url",
            "bots[2].id",
            "bots[2].command",
            // slack socket without bot token; app token unset in env
            "accounts[0].bot_token_env",
            "accounts[0].app_token_env",
            // slack events: duplicate id, pasted secret, app token only in socket mode, no signing secret
            "accounts[1].id",
            "accounts[1].bot_token_env",
            "accounts[1].app_token_env",
            "accounts[1].signing_secret_env",
            // discord: unknown bot, mode, slack key, bad application id and URL
            "accounts[2].bot",
            "accounts[2].mode",
            "accounts[2].app_token_env",
            "accounts[2].application_id",
            "accounts[2].api_url",
            // feishu webhook without verification token
            "accounts[3].verification_token_env",
            "accounts[3].encrypt_key_env",
            "accounts[4].api_url",
            "accounts[5].mode",
            "accounts[5].signing_secret_env",
            "chats[0].allow_bots[0]",
            "chats[1].id",
            "chats[2].id",
        ] {
            assert!(
                keys.contains(&expected),
                "missing {expected} in {problems:#?}"
            );
        }
        assert!(!keys.contains(&"agent_to_agent.allow[0]"), "{problems:#?}");
        assert!(!keys.contains(&"chats[0].id"), "{problems:#?}");
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
    fn every_platform_with_its_keys_is_valid() {
        let text = r#"
[[bots]]
id = "a"
backend = "echo"

[[accounts]]
bot = "a"
platform = "slack"
app_token_env = "A"
bot_token_env = "B"

[[accounts]]
bot = "a"
id = "a-events"
platform = "slack"
mode = "events"
bot_token_env = "B"
signing_secret_env = "C"
app_id = "A0123"

[[accounts]]
bot = "a"
platform = "discord"
bot_token_env = "D"
application_id = "111111111111111111"
public_key = "aabbccddeeff00112233445566778899aabbccddeeff00112233445566778899"
command_guilds = ["222"]
api_url = "http://127.0.0.1:9000"

[[accounts]]
bot = "a"
platform = "feishu"
mode = "webhook"
app_id = "cli_x"
app_secret_env = "E"
verification_token_env = "F"
encrypt_key_env = "G"

[[accounts]]
bot = "a"
platform = "lark"
app_id = "cli_y"
app_secret_env = "E"
api_url = "https://open.larksuite.com"

[[accounts]]
bot = "a"
platform = "local"
"#;
        let problems = validate(&parse(text), &all_env);
        assert!(problems.is_empty(), "{problems:#?}");
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
    fn locate_finds_the_nth_table_and_the_key_in_it() {
        let text = "[gateway]\nlisten = \"x\"\n\n[[bots]]\nid = \"a\"\n\n[[bots]]\nname = \"B\"\nid = \"b\"\n\n[[accounts]]\nbot = \"a\"\n[chains]\nrounds = 0\n";
        assert_eq!(locate(text, "gateway.listen"), Some(2));
        assert_eq!(locate(text, "bots[0].id"), Some(5));
        assert_eq!(locate(text, "bots[1].id"), Some(9));
        assert_eq!(
            locate(text, "bots[1].tools[2]"),
            Some(7),
            "missing key: header line"
        );
        assert_eq!(locate(text, "accounts[0].bot"), Some(12));
        assert_eq!(locate(text, "accounts[0].bot_token_env"), Some(11));
        assert_eq!(locate(text, "chains.rounds"), Some(14));
        assert_eq!(locate(text, "lanes.main"), None);
    }

    #[test]
    fn from_toml_gives_validation_problems_their_lines() {
        let text = "[[bots]]\nid = \"a\"\nbackend = \"echo\"\n\n[[bots]]\nid = \"a\"\nbackend = \"openai\"\n";
        let problems = Config::from_toml(text, Path::new("."), &no_env).unwrap_err();
        let found: Vec<_> = problems.iter().map(|p| (p.key.as_str(), p.line)).collect();
        assert!(found.contains(&("bots[1].id", Some(6))), "{problems:#?}");
        assert!(found.contains(&("bots[1].model", Some(5))), "{problems:#?}");
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
