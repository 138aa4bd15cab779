//! `[[accounts]]`: each names a known bot, has an id unique on its platform, and carries the
//! keys of its platform and mode (the table is in `account_keys.rs`).
//!
//! A key that belongs to the account's platform but not to its current mode is accepted: the
//! Slack example puts `signing_secret_env` (events mode) on a socket-mode Slack
//! account, and a user copying it must not fail `baton check`. Such a key is never read, so its
//! variable need not be set; its value must still be a variable's *name*, since a secret pasted
//! into the file is a leak whether or not baton reads it. A key of another platform is an error.

use std::collections::HashMap;

use baton_contract::Platform;

use super::super::{AccountConfig, Config};
use super::account_keys::{KEYS, KeySpec, Mode, Need, Value, not_for_platform};
use super::{Checker, earlier, is_slug};

/// An account's `mode` is not one of its platform's (already reported).
struct UnknownMode;

impl Checker<'_> {
    pub(super) fn accounts(&mut self, config: &Config) {
        let mut seen: HashMap<(Platform, &str), usize> = HashMap::new();
        for (i, account) in config.accounts.iter().enumerate() {
            let key = |name: &str| format!("accounts[{i}].{name}");
            self.bot_ref(config, key("bot"), &account.bot, |ids| {
                format!("add a [[bots]] entry with that id or use one of: {ids}")
            });
            let id = account.account_id();
            if let Some(explicit) = &account.id
                && !is_slug(explicit)
            {
                self.report(
                    key("id"),
                    format!(
                        "`{explicit}` is not a slug; account ids appear in webhook paths \
                             and session keys, so use lowercase letters, digits, `-` and `_`"
                    ),
                );
            }
            if let Some(first) = earlier(&mut seen, (account.platform, id), i) {
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
            if account.platform == Platform::Telegram
                && account.mode.as_deref() == Some("webhook")
                && config.gateway.public_url.is_none()
            {
                self.report(
                    key("mode"),
                    "a Telegram webhook is registered under `[gateway] public_url`, which is \
                     not set; set it to the https address Telegram reaches baton at, or use \
                     mode = \"polling\"",
                );
            }
        }
        if let Some(url) = &config.gateway.public_url {
            self.url("gateway.public_url".into(), url);
        }
    }

    /// The keys each platform (and mode) needs, allows and refuses.
    fn platform_keys(&mut self, i: usize, account: &AccountConfig) {
        let key = |name: &str| format!("accounts[{i}].{name}");
        let platform = account.platform;
        let mode = self.mode(&key("mode"), platform, account.mode.as_deref());
        for spec in KEYS {
            let value = spec.value(account);
            if value.is_some() && !spec.platform_uses(platform) {
                self.report(key(spec.name), not_for_platform(spec.name, platform));
                continue;
            }
            // With an unknown mode, keys are checked against the platform only.
            let Ok(mode) = mode else { continue };
            let need = spec.need(platform, mode);
            match value {
                None if need == Need::Required => {
                    let during = match mode {
                        Some(m) => format!(" in {} mode", m.as_str()),
                        None => String::new(),
                    };
                    self.report(
                        key(spec.name),
                        format!(
                            "is missing; {platform} accounts{during} need it: {}",
                            spec.holds
                        ),
                    );
                }
                None => {}
                // `Need::Unused` here is another mode's key: accepted, see the module docs.
                Some(value) => self.account_value(&key(spec.name), spec, need, value),
            }
        }
    }

    /// The account's mode: the given one, or the platform's default. `None` for platforms
    /// without modes.
    fn mode(
        &mut self,
        key: &str,
        platform: Platform,
        given: Option<&str>,
    ) -> Result<Option<Mode>, UnknownMode> {
        let modes = Mode::of(platform);
        let Some(given) = given else {
            return Ok(modes.first().copied());
        };
        if modes.is_empty() {
            self.report(key, format!("{platform} accounts have no mode; remove it"));
            return Ok(None);
        }
        if let Some(mode) = modes.iter().find(|m| m.as_str() == given) {
            return Ok(Some(*mode));
        }
        let choices: Vec<_> = modes
            .iter()
            .map(|m| format!("\"{}\"", m.as_str()))
            .collect();
        self.report(
            key,
            format!(
                "`{given}` is not a {platform} mode; use {}",
                choices.join(" or ")
            ),
        );
        Err(UnknownMode)
    }

    /// A set key's value has the right shape; an `_env` key's variable is set if it is read.
    fn account_value(&mut self, key: &str, spec: &KeySpec, need: Need, value: Value<'_>) {
        match value {
            Value::Env(name) if need == Need::Unused => {
                self.env_name(key, name, spec.holds);
            }
            Value::Env(name) => self.env_var(key, name, spec.holds),
            Value::Url(url) => self.url(key.to_owned(), url),
            Value::ApplicationId(id) => {
                if !is_snowflake(id) {
                    self.report(
                        key,
                        "is not a Discord application id (a number, shown as \"Application \
                         ID\" in the developer portal)",
                    );
                }
            }
            Value::PublicKey(hex) => {
                if !(hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())) {
                    self.report(
                        key,
                        "is not a Discord public key (64 hex digits, shown as \"Public Key\" in \
                         the developer portal)",
                    );
                }
            }
            Value::Text(text) => {
                if text.trim().is_empty() {
                    self.report(key, format!("is empty; write {}", spec.holds));
                }
            }
            Value::GuildIds(guilds) => {
                for (g, guild) in guilds.iter().enumerate() {
                    if !is_snowflake(guild) {
                        self.report(
                            format!("{key}[{g}]"),
                            format!(
                                "`{guild}` is not a Discord guild id (a number such as \
                                 \"111111111111111111\")"
                            ),
                        );
                    }
                }
            }
        }
    }
}

fn is_snowflake(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::fixture::{all_env, assert_broken_reports, keys, parse};
    use super::super::validate;
    use crate::config::Config;

    #[test]
    fn accounts_report_each_problem_by_key() {
        assert_broken_reports(
            &[
                // slack socket without bot token; app token unset in env
                "accounts[0].bot_token_env",
                "accounts[0].app_token_env",
                // slack events: duplicate id, pasted secret, no signing secret
                "accounts[1].id",
                "accounts[1].bot_token_env",
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
                // lark: unknown mode; a slack key is still refused
                "accounts[5].mode",
                "accounts[5].signing_secret_env",
            ],
            // slack events carrying the socket-mode app token: accepted, its variable unread
            &["accounts[1].app_token_env"],
        );
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

    /// A Slack `[[accounts]]` block as users copy it: socket mode, with the
    /// events-mode `signing_secret_env` alongside.
    const COPIED_ACCOUNT: &str = r#"
[[bots]]
id = "snark"
backend = "echo"

[[accounts]]
bot = "snark"
platform = "slack"                    # slack | discord | feishu | lark | local
mode = "socket"                       # slack: socket | events ; feishu: websocket | webhook
app_token_env = "SNARK_SLACK_APP_TOKEN"
bot_token_env = "SNARK_SLACK_BOT_TOKEN"
signing_secret_env = "SNARK_SLACK_SIGNING_SECRET"   # events mode
api_url = "https://slack.com/api"     # every platform's base URL can be overridden (proxies, Lark vs Feishu, tests)
"#;

    #[test]
    fn the_spec_example_account_needs_only_its_socket_mode_variables() {
        let socket_only = |name: &str| {
            matches!(name, "SNARK_SLACK_APP_TOKEN" | "SNARK_SLACK_BOT_TOKEN")
                .then(|| "xoxb-or-xapp".to_owned())
        };
        if let Err(problems) = Config::from_toml(COPIED_ACCOUNT, Path::new("."), &socket_only) {
            panic!("{problems:#?}");
        }
        // Switched to events mode, the signing secret is read, so it must be set.
        let events = COPIED_ACCOUNT.replace("mode = \"socket\"", "mode = \"events\"");
        let problems = Config::from_toml(&events, Path::new("."), &socket_only).unwrap_err();
        assert_eq!(
            keys(&problems),
            ["accounts[0].signing_secret_env"],
            "{problems:#?}"
        );
    }

    #[test]
    fn another_modes_key_is_accepted_but_another_platforms_is_not() {
        let text = r#"
[[bots]]
id = "a"
backend = "echo"

[[accounts]]
bot = "a"
platform = "feishu"
app_id = "cli_x"
app_secret_env = "E"
verification_token_env = "UNSET_IN_WEBSOCKET_MODE"
encrypt_key_env = "xoxb-pasted-secret"
signing_secret_env = "S"
"#;
        let only_e = |name: &str| (name == "E").then(|| "secret".to_owned());
        let problems = validate(&parse(text), &only_e);
        // verification_token_env: webhook mode's, unread in websocket mode, so need not be set.
        // encrypt_key_env: webhook mode's too, but a pasted secret is still refused.
        // signing_secret_env: a Slack key, refused on Feishu even though its variable is set.
        assert_eq!(
            keys(&problems),
            [
                "accounts[0].signing_secret_env",
                "accounts[0].encrypt_key_env"
            ],
            "{problems:#?}"
        );
        assert!(
            problems[0].message.contains("(it is a slack key)"),
            "{}",
            problems[0]
        );
        assert!(
            problems[1].message.contains("environment variable"),
            "{}",
            problems[1]
        );
    }
}
