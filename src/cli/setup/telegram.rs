//! Telegram: there is no app manifest, so the document is what baton asks of the bot (Group
//! Privacy off, bot-to-bot mode on), the command menu it registers with `setMyCommands`, and in
//! webhook mode the URL it registers itself; the @BotFather steps go around it.

use serde_json::json;

use super::{Plain, Printout};
use crate::config::{AccountConfig, BotConfig, Config};
use baton_telegram::setup::{BOTFATHER_STEPS, COMMANDS};

/// The settings and steps for the bot's Telegram account.
pub(super) fn printout(config: &Config, bot: &BotConfig, account: &AccountConfig) -> Printout {
    let webhook = account.mode.as_deref() == Some("webhook");
    let hook = config.gateway.public_url.as_deref().map(|url| {
        format!(
            "{}/hooks/telegram/{}",
            url.trim_end_matches('/'),
            account.account_id()
        )
    });
    let commands: Vec<_> = COMMANDS
        .iter()
        .map(|(command, description)| json!({"command": command, "description": description}))
        .collect();
    let document = json!({
        "group_privacy": "disabled",
        "bot_to_bot": "enabled",
        "commands": commands,
        "mode": if webhook { "webhook" } else { "polling" },
        "webhook_url": if webhook { hook.clone() } else { None },
    });
    let mut guidance = vec![format!(
        "Telegram settings for bot `{}` (account telegram/{}):",
        bot.id,
        account.account_id()
    )];
    guidance.extend(
        BOTFATHER_STEPS
            .iter()
            .enumerate()
            .map(|(n, step)| format!("  {}. {step}", n + 1)),
    );
    if webhook && hook.is_none() {
        guidance.push(
            "  note: [gateway] public_url is not set, so baton cannot register the webhook; set \
             it to the address Telegram reaches baton at, or use mode = \"polling\""
                .to_owned(),
        );
    }
    guidance.push(
        "baton registers the command menu below with setMyCommands at start; the settings are \
         what @BotFather must show:"
            .to_owned(),
    );
    Printout {
        document,
        plain: Plain::Json,
        guidance,
    }
}
