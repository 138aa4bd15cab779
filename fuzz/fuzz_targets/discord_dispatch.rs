//! Discord, from outside: gateway payloads (`{"op": 0, "t": "MESSAGE_CREATE", "d": ...}` and
//! the other dispatches the adapter reads), one after another as serenity's shard hands them
//! over, and a body posted to the HTTP interactions endpoint. Each is parsed into serenity's
//! models and normalized the way `gateway.rs` and `endpoint.rs` do, with the directory of roles
//! and threads kept up to date from the dispatches in between.
//!
//! Known upstream bug, skipped here: serenity 0.12's `ImageHash::from_str` panics on a
//! non-ASCII avatar or icon hash. The endpoint refuses such bodies
//! (`normalize::image_hashes_are_ascii`); serenity's own gateway parse is still exposed, so
//! gateway payloads that fail the same check are skipped rather than crash this target again.
#![no_main]

use baton_contract::AccountId;
use baton_discord::normalize::{self, Directory, Identity};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use serenity::model::application::Interaction;
use serenity::model::event::{Event, GatewayEvent};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let account = AccountId::from("fuzz");
    let me = Identity {
        user_id: "80351110224678912".into(),
        name: "Nelly".into(),
    };

    // Gateway payloads, back to back.
    let mut dir = Directory::default();
    for payload in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        let Ok(payload) = payload else {
            break;
        };
        if !normalize::image_hashes_are_ascii(&payload) {
            continue;
        }
        let Ok(GatewayEvent::Dispatch(_, event)) = serde_json::from_value::<GatewayEvent>(payload)
        else {
            continue;
        };
        match event {
            Event::GuildCreate(created) => {
                for role in created.guild.roles.values() {
                    dir.role(created.guild.id, role, &me.user_id);
                }
                for channel in created.guild.channels.values() {
                    dir.channel(channel);
                }
                for thread in &created.guild.threads {
                    dir.channel(thread);
                }
            }
            Event::GuildRoleCreate(e) => dir.role(e.role.guild_id, &e.role, &me.user_id),
            Event::ThreadCreate(e) => dir.channel(&e.thread),
            Event::ThreadDelete(e) => dir.forget_thread(e.thread.id),
            Event::MessageCreate(created) => {
                if let Ok(event) = normalize::message(&account, &me, &dir, &created.message) {
                    assert_eq!(event.message_id.as_str(), created.message.id.to_string());
                }
            }
            Event::InteractionCreate(created) => {
                if let Interaction::Command(command) = created.interaction {
                    interaction(&account, &dir, &command);
                }
            }
            _ => {}
        }
    }

    // The HTTP interactions endpoint: an application command is `type` 2.
    if let Ok(body) = serde_json::from_str::<Value>(text)
        && body.get("type").and_then(Value::as_u64) == Some(2)
        && normalize::image_hashes_are_ascii(&body)
        && let Ok(Interaction::Command(command)) = serde_json::from_value::<Interaction>(body)
    {
        interaction(&account, &dir, &command);
    }
});

fn interaction(
    account: &AccountId,
    dir: &Directory,
    command: &serenity::model::application::CommandInteraction,
) {
    if normalize::interaction(account, dir, command).is_err() {
        return;
    }
    // The reply handle must come apart into the interaction's id and token again.
    let handle = normalize::reply_token(command.id.get(), &command.token);
    if !command.token.is_empty() {
        let id = command.id.to_string();
        assert_eq!(
            normalize::split_reply_token(&handle),
            Some((id.as_str(), command.token.as_str()))
        );
    }
}
