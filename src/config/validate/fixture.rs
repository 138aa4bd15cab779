//! Test support: one config with something wrong in every section, and helpers to check it.
//! Each section's tests assert the problems about their own keys.

use std::path::Path;

use super::super::{Config, Problem};

/// What `all_env` says every variable holds; must never show up in a message.
pub(super) const SECRET: &str = "sup3r-s3cret-value";

pub(super) fn no_env(_: &str) -> Option<String> {
    None
}

pub(super) fn all_env(_: &str) -> Option<String> {
    Some(SECRET.to_owned())
}

/// Parse without validating; relative paths resolve from the repository's `config/`.
pub(super) fn parse(text: &str) -> Config {
    let mut config: Config = toml::from_str(text).expect("test config parses");
    config.base_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    config
}

/// Load `text` as `baton run` would (parse, then check) and render each problem as users see it.
pub(super) fn problems(text: &str) -> Vec<String> {
    match Config::from_toml(text, Path::new("."), &no_env) {
        Ok(_) => Vec::new(),
        Err(problems) => problems.iter().map(ToString::to_string).collect(),
    }
}

pub(super) fn keys(problems: &[Problem]) -> Vec<&str> {
    problems.iter().map(|p| p.key.as_str()).collect()
}

/// Something wrong in every section (and a few things right, which must not be reported).
pub(super) const BROKEN: &str = r#"
[gateway]
listen = "localhost"
silent_token = "NO REPLY"
api_token_env = "BATON_API_TOKEN"

[lanes]
nested = 0
max_queued_per_session = 0

[local]
room_log_messages = 0

[limits]
max_ping_pong_turns = 9
send_per_pair_per_minute = 0

[agent_to_agent]
allow = ["snark", "ghost", "[oops"]

[chains]
coordinator = "nobody"
rounds = 20
max_rounds = 10

[[a2a.peers]]
id = "snark"
url = "ftp://peer.example.com"

[[a2a.peers]]
id = "Not A Name"
url = "https://peer.example.com/a2a"

[[a2a.peers]]
id = "twice"
url = "https://peer.example.com/a2a"

[[a2a.peers]]
id = "twice"
url = "https://other.example.com/a2a"

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
vision = true

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

/// Asserts that validating [`BROKEN`] reports each of `expected` and none of `unexpected`.
#[track_caller]
pub(super) fn assert_broken_reports(expected: &[&str], unexpected: &[&str]) {
    let problems = super::validate(&parse(BROKEN), &no_env);
    let keys = keys(&problems);
    for key in expected {
        assert!(keys.contains(key), "missing {key} in {problems:#?}");
    }
    for key in unexpected {
        assert!(!keys.contains(key), "unexpected {key} in {problems:#?}");
    }
}
