//! Admin commands (SPEC.md section 7): `/baton help`, `status`, `bots`, `activation`, `pause`,
//! `resume`, `reset`, `pairing approve`. One parser ([`AdminCommand::parse`]) and one handler
//! set serve text commands in any chat and native slash commands alike; authorization and
//! auditing happen in the pipeline's admin step.

mod command;

use std::fmt::Write as _;

pub use command::{AdminCommand, HELP, ParseError, text_command};

use crate::dispatcher::{Inbound, Shared};
use crate::mirror::now_ms;
use crate::roster::Bot;

/// Run an authorized command in the chat `inbound` came from. `Err` is a user-facing message.
pub(crate) async fn execute(
    shared: &Shared,
    inbound: &Inbound<'_>,
    command: &AdminCommand,
) -> Result<String, String> {
    let store = &shared.store;
    let chat = &inbound.settings_key;
    let failed = |err: crate::store::StoreError| format!("the store failed: {err}");
    match command {
        AdminCommand::Help => Ok(HELP.to_owned()),
        AdminCommand::Status => Ok(status(shared, inbound).await),
        AdminCommand::Bots => Ok(bots(shared)),
        AdminCommand::Activation(activation) => {
            store
                .set_activation(chat, Some(activation.as_str()))
                .await
                .map_err(failed)?;
            Ok(format!(
                "Activation in this chat is now `{}`.",
                activation.as_str()
            ))
        }
        AdminCommand::Pause(bot) => {
            let bot = resolve_bot(shared, bot.as_deref())?;
            store.set_paused(chat, &bot, true).await.map_err(failed)?;
            Ok(format!("Paused {} in this chat.", who(&bot)))
        }
        AdminCommand::Resume(bot) => {
            let bot = resolve_bot(shared, bot.as_deref())?;
            let paused = store.chat_settings(chat).await.map_err(failed)?.paused;
            let resumed = paused
                .iter()
                .filter(|p| bot == "*" || **p == bot || *p == "*");
            for p in resumed {
                store.set_paused(chat, p, false).await.map_err(failed)?;
            }
            Ok(format!("Resumed {} in this chat.", who(&bot)))
        }
        AdminCommand::Reset(bot) => {
            let bot = resolve_bot(shared, bot.as_deref())?;
            let only = (bot != "*").then_some(bot.as_str());
            let event = &inbound.event;
            let n = store
                .reset_sessions(event.platform.as_str(), event.chat.as_str(), only)
                .await
                .map_err(failed)?;
            Ok(format!(
                "Started a new conversation for {} ({n} session(s)).",
                who(&bot)
            ))
        }
        AdminCommand::PairingApprove(code) => {
            match store
                .approve_pairing(code, now_ms())
                .await
                .map_err(failed)?
            {
                Some((platform, user)) => Ok(format!("Approved {user} on {platform}.")),
                None => Err(format!("No pending pairing with code `{code}`.")),
            }
        }
    }
}

fn who(bot: &str) -> String {
    if bot == "*" {
        "every bot".to_owned()
    } else {
        format!("`{bot}`")
    }
}

/// A bot named by id or display name (`@` optional); `None` means every bot (`*`).
fn resolve_bot(shared: &Shared, name: Option<&str>) -> Result<String, String> {
    let Some(name) = name else {
        return Ok("*".to_owned());
    };
    shared
        .roster
        .bots()
        .iter()
        .find(|b| b.id() == name || b.config.display_name().eq_ignore_ascii_case(name))
        .map(|b| b.id().to_owned())
        .ok_or_else(|| format!("No bot named `{name}`; `/baton bots` lists them."))
}

fn bots(shared: &Shared) -> String {
    let mut out = String::from("Bots:");
    for bot in shared.roster.bots() {
        let _ = write!(out, "\n- {}", bot_line(bot));
    }
    out
}

fn bot_line(bot: &Bot) -> String {
    let c = &bot.config;
    let model = c
        .model
        .as_deref()
        .map(|m| format!(", {m}"))
        .unwrap_or_default();
    format!(
        "{} ({}) — {:?}{model}. {}",
        c.id,
        c.display_name(),
        c.backend,
        c.description
    )
    .trim_end()
    .to_owned()
}

async fn status(shared: &Shared, inbound: &Inbound<'_>) -> String {
    let mut out = String::from("baton status\nAccounts:");
    for account in shared.roster.accounts() {
        let _ = write!(
            out,
            "\n- {}/{} (bot {}): {:?}",
            account.platform,
            account.id,
            account.bot.id(),
            account.adapter.connection_state()
        );
    }
    out.push_str("\nLanes:");
    for load in shared.lanes.load() {
        let _ = write!(
            out,
            "\n- {}: {} running, {} queued, capacity {}",
            load.lane, load.running, load.queued, load.capacity
        );
    }
    let settings = shared
        .store
        .chat_settings(&inbound.settings_key)
        .await
        .unwrap_or_default();
    let activation = settings
        .activation
        .unwrap_or_else(|| inbound.policy.activation.as_str().to_owned());
    let paused = if settings.paused.is_empty() {
        "none".to_owned()
    } else {
        settings.paused.join(", ")
    };
    let _ = write!(
        out,
        "\nThis chat: activation {activation}; paused: {paused}"
    );
    out
}
