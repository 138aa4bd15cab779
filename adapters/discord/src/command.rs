//! The `/baton` application command: its definition, and registering it with Discord.
//!
//! One subcommand per admin command the gateway understands (`src/admin/command.rs`), each with
//! typed options, so Discord's client shows usage and choices. An invocation arrives as
//! INTERACTION_CREATE and is turned back into the text command line (`activation always`) by
//! [`normalize::command_line`](crate::normalize::command_line), so one parser serves both.
//!
//! Registration uses the bulk-overwrite endpoint, which is idempotent: every start puts the
//! same definition, and an older `/baton` is replaced rather than duplicated. Guild commands
//! (`command_guilds`) appear at once; global commands can take a while to show in every client.
//!
//! The command is visible to everyone: baton checks `[admins]` itself and refuses others
//! privately. A server can hide it further under Server Settings → Integrations.

use baton_contract::SendError;
use reqwest::Method;
use serde_json::Value;
use serenity::builder::{CreateCommand, CreateCommandOption};
use serenity::model::application::CommandOptionType;

use crate::normalize::COMMAND_NAME;
use crate::rest::{Auth, Rest};

/// The `/baton` definition, as Discord's Create Command JSON.
pub fn definition() -> Value {
    use CommandOptionType::{String as Text, SubCommand, SubCommandGroup};
    let sub = |name: &str, about: &str| CreateCommandOption::new(SubCommand, name, about);
    let text = |name: &str, about: &str, required: bool| {
        CreateCommandOption::new(Text, name, about).required(required)
    };
    let bot = || {
        text(
            "bot",
            "a baton bot id or name; leave out for every bot",
            false,
        )
    };
    let command = CreateCommand::new(COMMAND_NAME)
        .description("baton admin commands (answered privately)")
        .dm_permission(true)
        .add_option(sub("help", "list the commands"))
        .add_option(sub(
            "status",
            "bots, accounts, connections, lanes and queues, this chat's settings",
        ))
        .add_option(sub("bots", "the roster"))
        .add_option(
            sub("activation", "when bots in this chat answer").add_sub_option(
                text(
                    "mode",
                    "mention: only when mentioned; always: every message",
                    true,
                )
                .add_string_choice("mention", "mention")
                .add_string_choice("always", "always"),
            ),
        )
        .add_option(sub("pause", "silence a bot (or all) in this chat").add_sub_option(bot()))
        .add_option(sub("resume", "undo pause").add_sub_option(bot()))
        .add_option(sub("reset", "start a new conversation").add_sub_option(bot()))
        .add_option(
            CreateCommandOption::new(SubCommandGroup, "pairing", "DM pairing").add_sub_option(
                sub("approve", "let a DM sender in").add_sub_option(text(
                    "code",
                    "the code the sender was given",
                    true,
                )),
            ),
        )
        .add_option(decision("approve", "approve a bot's approval request"))
        .add_option(decision("deny", "deny a bot's approval request"));
    serde_json::to_value(command).expect("a command definition always serializes")
}

fn decision(name: &str, about: &str) -> CreateCommandOption {
    CreateCommandOption::new(CommandOptionType::SubCommand, name, about)
        .add_sub_option(
            CreateCommandOption::new(CommandOptionType::String, "id", "the request id (ap-...)")
                .required(true),
        )
        .add_sub_option(CreateCommandOption::new(
            CommandOptionType::String,
            "note",
            "why, for the requesting bot",
        ))
}

/// Put `/baton` in each of `guilds`, or globally when `guilds` is empty. Returns the first
/// failure, described for the operator; later guilds are still tried.
pub(crate) async fn register(
    rest: &Rest,
    application_id: &str,
    guilds: &[String],
) -> Result<(), String> {
    let body = Value::Array(vec![definition()]);
    let paths: Vec<String> = if guilds.is_empty() {
        vec![format!("/applications/{application_id}/commands")]
    } else {
        guilds
            .iter()
            .map(|g| format!("/applications/{application_id}/guilds/{g}/commands"))
            .collect()
    };
    let mut first_error = None;
    for path in paths {
        if let Err(err) = rest
            .call(Method::PUT, &path, Some(&body), Auth::Bot, "commands")
            .await
        {
            let hint = match &err {
                SendError::Rejected { code, .. } if code == "50001" || code == "http_403" => {
                    "; invite the bot with the applications.commands scope (see README, Connect \
                     Discord)"
                }
                _ => "",
            };
            first_error.get_or_insert(format!("registering /baton at {path} failed: {err}{hint}"));
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use serenity::model::application::CommandInteraction;

    use super::*;
    use crate::normalize::command_line;

    #[test]
    fn every_admin_command_is_a_subcommand() {
        let def = definition();
        assert_eq!(def["name"], "baton");
        let names: Vec<&str> = def["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "help",
                "status",
                "bots",
                "activation",
                "pause",
                "resume",
                "reset",
                "pairing",
                "approve",
                "deny"
            ]
        );
    }

    fn invoked(options: Value) -> CommandInteraction {
        let mut fixture: Value = serde_json::from_str(
            &std::fs::read_to_string(format!(
                "{}/fixtures/gw_dispatch_interaction_create_baton.json",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap(),
        )
        .unwrap();
        fixture["d"]["data"]["options"] = options;
        serde_json::from_value(fixture["d"].clone()).unwrap()
    }

    #[test]
    fn an_invocation_reads_back_as_the_text_command_line() {
        let status = invoked(serde_json::json!([{ "type": 1, "name": "status", "options": [] }]));
        assert_eq!(command_line(&status.data.options), "status");
        let activation = invoked(serde_json::json!([{ "type": 1, "name": "activation",
            "options": [{ "type": 3, "name": "mode", "value": "always" }] }]));
        assert_eq!(command_line(&activation.data.options), "activation always");
        let pairing = invoked(serde_json::json!([{ "type": 2, "name": "pairing",
            "options": [{ "type": 1, "name": "approve",
                "options": [{ "type": 3, "name": "code", "value": "AB12CD" }] }] }]));
        assert_eq!(
            command_line(&pairing.data.options),
            "pairing approve AB12CD"
        );
        let deny = invoked(serde_json::json!([{ "type": 1, "name": "deny",
            "options": [{ "type": 3, "name": "id", "value": "ap-1" },
                        { "type": 3, "name": "note", "value": "not on a Friday" }] }]));
        assert_eq!(
            command_line(&deny.data.options),
            "deny ap-1 not on a Friday"
        );
    }
}
