//! Slack: an app manifest for the bot's account. It subscribes to the four `message.*` events
//! with their history scopes (plus `app_mention`), asks for the scopes the bot's features use,
//! declares `/baton`, and turns Socket Mode on, or, in events mode, points the request URLs at
//! `<public_url>/hooks/slack/<account>`.

use serde_json::{Value, json};

use super::{Plain, Printout};
use crate::config::{AccountConfig, BotConfig, Config};

/// The events every manifest subscribes to.
const EVENTS: [&str; 5] = [
    "app_mention",
    "message.channels",
    "message.groups",
    "message.im",
    "message.mpim",
];

/// Whether the account runs in events mode (HTTP) rather than Socket Mode.
pub(in crate::cli) fn events_mode(account: &AccountConfig) -> bool {
    account.mode.as_deref() == Some("events")
}

/// The bot scopes `bot` needs on Slack: reading what it is woken by (mentions and the four
/// kinds of conversation), writing replies, files both ways, `/baton`, and the typing status
/// when its feedback shows one.
pub(in crate::cli) fn bot_scopes(config: &Config, bot: &BotConfig) -> Vec<&'static str> {
    let mut scopes = vec![
        "app_mentions:read",
        "channels:history",
        "groups:history",
        "im:history",
        "mpim:history",
        "chat:write",
        "files:read",
        "files:write",
        "commands",
    ];
    if config.feedback.with(&bot.feedback).typing {
        scopes.push("assistant:write");
    }
    scopes
}

/// The manifest and the steps to use it.
pub(super) fn printout(config: &Config, bot: &BotConfig, account: &AccountConfig) -> Printout {
    let events = events_mode(account);
    let hook = config.gateway.public_url.as_deref().map(|url| {
        format!(
            "{}/hooks/slack/{}",
            url.trim_end_matches('/'),
            account.account_id()
        )
    });
    let mut command = json!({
        "command": "/baton",
        "description": "baton admin commands (help, status, pause, chains)",
        "usage_hint": "help",
        "should_escape": false,
    });
    let mut settings = json!({
        "event_subscriptions": { "bot_events": EVENTS },
        "socket_mode_enabled": !events,
        "org_deploy_enabled": false,
        "token_rotation_enabled": false,
    });
    let url = hook
        .as_deref()
        .unwrap_or("https://YOUR-PUBLIC-URL/hooks/slack/ACCOUNT");
    if events {
        command["url"] = Value::from(url);
        settings["event_subscriptions"]["request_url"] = Value::from(url);
        settings["interactivity"] = json!({ "is_enabled": true, "request_url": url });
    }
    let document = json!({
        "display_information": {
            "name": truncate(bot.display_name(), 35),
            "description": truncate(&bot.description, 140),
        },
        "features": {
            "bot_user": { "display_name": truncate(bot.display_name(), 80), "always_online": true },
            "slash_commands": [command],
        },
        "oauth_config": { "scopes": { "bot": bot_scopes(config, bot) } },
        "settings": settings,
    });
    let mut guidance =
        vec![
        format!(
            "Slack app manifest for bot `{}` (account slack/{}):",
            bot.id,
            account.account_id()
        ),
        "  1. https://api.slack.com/apps > Create New App > From a manifest; pick the workspace \
         and paste the manifest below."
            .to_owned(),
        format!(
            "  2. Install to Workspace; copy the Bot User OAuth Token (xoxb-...) into ${}.",
            account.bot_token_env.as_deref().unwrap_or("<bot_token_env>")
        ),
    ];
    if events {
        guidance.push(format!(
            "  3. Basic Information > Signing Secret into ${}.",
            account
                .signing_secret_env
                .as_deref()
                .unwrap_or("<signing_secret_env>")
        ));
        if hook.is_none() {
            guidance.push(
                "  note: [gateway] public_url is not set, so the request URLs below are \
                 placeholders; set it and run this again."
                    .to_owned(),
            );
        }
    } else {
        guidance.push(format!(
            "  3. Basic Information > App-Level Tokens > Generate, scope connections:write; \
             copy it (xapp-...) into ${}.",
            account
                .app_token_env
                .as_deref()
                .unwrap_or("<app_token_env>")
        ));
    }
    guidance
        .push("  4. Invite the bot to a channel (/invite @name), then run `baton doctor`.".into());
    Printout {
        document,
        plain: Plain::Yaml,
        guidance,
    }
}

/// At most `max` characters of `text` (Slack refuses longer names and descriptions).
fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}
