//! Admin commands (SPEC.md section 7): `/baton help`, `status`, `bots`, `activation`, `pause`,
//! `resume`, `reset`, `pairing approve`, `approve`, `deny`. One parser ([`AdminCommand::parse`])
//! and one handler set serve text commands in any chat and native slash commands alike;
//! authorization and auditing happen in the pipeline's admin step.

mod command;

use std::fmt::Write as _;
use std::sync::Arc;

pub use command::{AdminCommand, HELP, ParseError, text_command};

use crate::dispatcher::{DecideError, Decision, Inbound, Resolver, Shared, decide_approval};
use crate::mirror::now_ms;
use crate::roster::Bot;

/// Run an authorized command in the chat `inbound` came from. `Err` is a user-facing message.
pub(crate) async fn execute(
    shared: &Arc<Shared>,
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
        AdminCommand::Approve { id, note } => {
            decide(shared, inbound, id, Decision::Approve, note.as_deref()).await
        }
        AdminCommand::Deny { id, note } => {
            decide(shared, inbound, id, Decision::Deny, note.as_deref()).await
        }
    }
}

/// `approve` / `deny`: decide a bot's approval request as the admin who ran the command.
async fn decide(
    shared: &Arc<Shared>,
    inbound: &Inbound<'_>,
    id: &str,
    decision: Decision,
    note: Option<&str>,
) -> Result<String, String> {
    let by = Resolver::Human {
        id: inbound.event.sender.id.as_str(),
        name: &inbound.speaker.name,
    };
    match decide_approval(shared, id, decision, by, note).await {
        Ok(decided) => Ok(match decision {
            Decision::Approve => format!("Approved {}.", decided.id),
            Decision::Deny => format!("Denied {}.", decided.id),
        }),
        Err(DecideError::NotPending(id, state)) => {
            Err(format!("No pending approval {id}: it was already {state}."))
        }
        Err(DecideError::NotAnApproval(id)) => Err(format!(
            "No pending approval {id}: that is a question, and the answer is a message in its chat."
        )),
        Err(err @ DecideError::Store(_)) => Err(err.to_string()),
        Err(DecideError::Unknown(_) | DecideError::SelfApproval(_)) => {
            Err(format!("No pending approval {}.", id.trim()))
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
