//! Feishu/Lark: the scopes in the developer console's bulk-import form, the event to subscribe
//! to, and the subscription mode (long connection or a webhook under `public_url`).

use serde_json::json;

use super::{Plain, Printout};
use crate::config::{AccountConfig, BotConfig, Config};

/// The tenant scopes baton uses: posting as the bot; reading DMs, group @mentions (also by
/// other bots) and every group message (`activation = "always"`, context); reading a message's
/// sender; the typing reaction; chat membership (handing posts to sibling bots); files; the
/// streaming card of `stream = "native"` (CardKit: made and updated, and found again from its
/// message after a restart).
const SCOPES: [&str; 11] = [
    "im:message:send_as_bot",
    "im:message:readonly",
    "im:message.p2p_msg:readonly",
    "im:message.group_at_msg:readonly",
    "im:message.group_at_msg.include_bot:readonly",
    "im:message.group_msg",
    "im:message.reactions:write_only",
    "im:chat:readonly",
    "im:resource",
    "cardkit:card:write",
    "cardkit:card:read",
];

/// The scopes to import and the steps around them.
pub(super) fn printout(config: &Config, bot: &BotConfig, account: &AccountConfig) -> Printout {
    let webhook = account.mode.as_deref() == Some("webhook");
    let id = account.account_id();
    let document = json!({ "scopes": { "tenant": SCOPES, "user": [] } });
    let console = match account.platform {
        baton_contract::Platform::Lark => "https://open.larksuite.com/app",
        _ => "https://open.feishu.cn/app",
    };
    let mut guidance = vec![
        format!(
            "{} scopes for bot `{}` (account {}/{id}):",
            account.platform, bot.id, account.platform
        ),
        format!(
            "  1. {console} > Create Custom App; Add features > Bot. Copy the App ID (cli_...) \
             into the account's app_id and the App Secret into ${}.",
            account
                .app_secret_env
                .as_deref()
                .unwrap_or("<app_secret_env>")
        ),
        "  2. Permissions & Scopes > Batch import: paste the JSON below.".to_owned(),
    ];
    if webhook {
        let url = config.gateway.public_url.as_deref().map_or_else(
            || format!("https://YOUR-PUBLIC-URL/hooks/{}/{id}", account.platform),
            |url| {
                format!(
                    "{}/hooks/{}/{id}",
                    url.trim_end_matches('/'),
                    account.platform
                )
            },
        );
        guidance.push(format!(
            "  3. Events & Callbacks: send events to a developer server at {url}; copy the \
             Verification Token (and Encrypt Key, if set) into the account's _env variables."
        ));
    } else {
        guidance.push(
            "  3. Events & Callbacks: subscription mode \"Receive events through persistent \
             connection\" (long connection)."
                .to_owned(),
        );
    }
    guidance.push(
        "  4. Add the event im.message.receive_v1; publish a version; add the bot to a group, \
         then run `baton doctor`."
            .to_owned(),
    );
    Printout {
        document,
        plain: Plain::Json,
        guidance,
    }
}
