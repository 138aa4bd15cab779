//! Discord: the install URL for the bot's application (scopes `bot` and
//! `applications.commands`, the permissions baton uses and never Administrator) and the
//! privileged intent to switch on.

use serde_json::json;

use super::{Plain, Printout};
use crate::config::{AccountConfig, BotConfig};

/// The permissions baton uses, each with its bit: it reads and answers in channels and
/// threads, reads the history a reply refers to, posts files, and reacts.
const PERMISSIONS: [(&str, u64); 6] = [
    ("View Channels", 1 << 10),
    ("Send Messages", 1 << 11),
    ("Send Messages in Threads", 1 << 38),
    ("Read Message History", 1 << 16),
    ("Attach Files", 1 << 15),
    ("Add Reactions", 1 << 6),
];

/// The permission integer of the install URL.
fn permissions() -> u64 {
    PERMISSIONS.iter().fold(0, |all, (_, bit)| all | bit)
}

/// The install URL and the steps around it; the account must name its `application_id`.
pub(super) fn printout(bot: &BotConfig, account: &AccountConfig) -> anyhow::Result<Printout> {
    let Some(application_id) = account.application_id.as_deref() else {
        anyhow::bail!(
            "account discord/{} has no `application_id`; copy the Application ID from the \
             Developer Portal's General Information page into the [[accounts]] entry",
            account.account_id()
        );
    };
    let permissions = permissions();
    let url = format!(
        "https://discord.com/oauth2/authorize?client_id={application_id}\
         &scope=bot+applications.commands&permissions={permissions}"
    );
    let names: Vec<&str> = PERMISSIONS.iter().map(|(name, _)| *name).collect();
    let document = json!({
        "install_url": url,
        "client_id": application_id,
        "scopes": ["bot", "applications.commands"],
        "permissions": permissions.to_string(),
        "permission_names": names,
        "privileged_intents": ["MESSAGE_CONTENT"],
    });
    let guidance = vec![
        format!(
            "Discord install URL for bot `{}` (account discord/{}):",
            bot.id,
            account.account_id()
        ),
        "  1. https://discord.com/developers/applications > your application > Bot: switch on \
         Message Content Intent (privileged)."
            .to_owned(),
        format!(
            "  2. Bot > Reset Token; copy it into ${}.",
            account
                .bot_token_env
                .as_deref()
                .unwrap_or("<bot_token_env>")
        ),
        format!(
            "  3. Open the URL below and add the bot to your server ({}).",
            names.join(", ")
        ),
        "  4. Run `baton doctor`.".to_owned(),
    ];
    Ok(Printout {
        document,
        plain: Plain::Line(url),
        guidance,
    })
}
