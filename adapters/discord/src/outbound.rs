//! Posting one chunk: a reply to the triggering message, or a private answer to `/baton`; and a
//! file, as a message of its own in the same place.
//!
//! The gateway has already split the reply to 2000 characters (closing and reopening code
//! fences) and retries a 429 itself; this module makes exactly one request per call.
//!
//! **Mentions.** A bot must never ping `@everyone`, `@here` or a role by accident (a model
//! echoing "@everyone" is enough). Every post sets `allowed_mentions` to `parse: []`, so nothing
//! in the text pings by pattern, and lists in `users` only the users written as `<@id>` in the
//! chunk itself: a bot that deliberately addresses someone (or another bot) by mention still
//! reaches them. `replied_user` is off: the reply is shown linked to the message it answers, but
//! its author gets no extra notification (for bots that would be noise; people see the reply).
//!
//! **Idempotency.** Each chunk carries a `nonce` derived from the gateway's idempotency key with
//! `enforce_nonce`, so Discord itself drops a second post of the same chunk made within a few
//! minutes (the gateway's own record covers the rest).

use std::time::Duration;

use baton_contract::{
    ChatId, DeleteMessage, EditMessage, MessageId, OutboundFile, OutboundMessage, SendError,
    SentMessage, ThreadId, Typing, TypingTarget,
};
use reqwest::Method;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::rest::{Auth, Rest};

/// How often the typing indicator is triggered again: Discord shows it for about 10 s.
const TYPING_RENEW: Duration = Duration::from_secs(8);

/// Discord's cap on `allowed_mentions.users`.
const MAX_ALLOWED_USERS: usize = 100;

/// Post `message` to its channel (or thread) once, replying to `reply_to` when it is a Discord
/// message.
pub(crate) async fn post(rest: &Rest, message: &OutboundMessage) -> Result<SentMessage, SendError> {
    let channel = post_channel(&message.chat, message.thread.as_ref())?;
    let body = message_body(message);
    let posted = rest
        .call(
            Method::POST,
            &format!("/channels/{channel}/messages"),
            Some(&body),
            Auth::Bot,
            &format!("channel:{channel}"),
        )
        .await?;
    let id = posted
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok(SentMessage {
        message_id: MessageId(id),
    })
}

/// Where a post goes: a thread is a channel of its own on Discord, so into the thread, never
/// into its parent.
fn post_channel<'a>(chat: &'a ChatId, thread: Option<&'a ThreadId>) -> Result<&'a str, SendError> {
    let channel = thread.map_or(chat.as_str(), |t| t.as_str());
    if !is_snowflake(channel) {
        return Err(SendError::Rejected {
            code: "bad_channel".into(),
            message: format!("`{channel}` is not a Discord channel id"),
        });
    }
    Ok(channel)
}

/// The largest file a bot may attach on Discord without server boosts (10 MiB).
pub(crate) const MAX_UPLOAD_BYTES: u64 = 10 * 1024 * 1024;

/// Post `file` once as a message of its own with the file attached (Create Message,
/// `multipart/form-data`: `payload_json` and `files[0]`), where the text goes, with a nonce from
/// its idempotency key as for text.
pub(crate) async fn upload(rest: &Rest, file: &OutboundFile) -> Result<SentMessage, SendError> {
    let channel = post_channel(&file.chat, file.thread.as_ref())?;
    let mut payload = json!({
        "allowed_mentions": { "parse": [], "users": [], "replied_user": false },
        "nonce": nonce(&file.idempotency_key),
        "enforce_nonce": true,
        "attachments": [{ "id": 0, "filename": file.name }],
    });
    if let Some(reply_to) = file.reply_to.as_ref().filter(|m| is_snowflake(m.as_str())) {
        payload["message_reference"] = json!({
            "message_id": reply_to.as_str(),
            "fail_if_not_exists": false,
        });
    }
    let part = Part::stream(reqwest::Body::from(file.content.clone()))
        .file_name(file.name.clone())
        .mime_str(&file.media_type)
        .or_else(|_| {
            Part::stream(reqwest::Body::from(file.content.clone()))
                .file_name(file.name.clone())
                .mime_str("application/octet-stream")
        })
        .map_err(|e| SendError::Rejected {
            code: "bad_file".into(),
            message: format!("could not build the upload: {e}"),
        })?;
    let form = Form::new()
        .text("payload_json", payload.to_string())
        .part("files[0]", part);
    let posted = rest
        .call_multipart(
            Method::POST,
            &format!("/channels/{channel}/messages"),
            form,
            &format!("channel:{channel}"),
        )
        .await?;
    let id = posted
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok(SentMessage {
        message_id: MessageId(id),
    })
}

/// Replace the text of a message this bot posted (Edit Message), once. The same mention rule
/// as a post: the edit may ping only the users written as `<@id>` in it.
pub(crate) async fn edit(rest: &Rest, edit: &EditMessage) -> Result<(), SendError> {
    let channel = edit
        .thread
        .as_ref()
        .map(|t| t.as_str())
        .unwrap_or(edit.chat.as_str());
    let id = edit.message_id.as_str();
    if !is_snowflake(channel) || !is_snowflake(id) {
        return Err(SendError::Rejected {
            code: "bad_message".into(),
            message: format!("`{channel}`/`{id}` is not a Discord channel/message id"),
        });
    }
    let body = json!({
        "content": edit.text,
        "allowed_mentions": allowed_mentions(&edit.text),
    });
    // One bucket per channel's message edits, apart from posts.
    rest.call(
        Method::PATCH,
        &format!("/channels/{channel}/messages/{id}"),
        Some(&body),
        Auth::Bot,
        &format!("edit:{channel}"),
    )
    .await?;
    Ok(())
}

/// Delete a message this bot posted, once.
pub(crate) async fn delete(rest: &Rest, message: &DeleteMessage) -> Result<(), SendError> {
    let channel = message
        .thread
        .as_ref()
        .map(|t| t.as_str())
        .unwrap_or(message.chat.as_str());
    let id = message.message_id.as_str();
    if !is_snowflake(channel) || !is_snowflake(id) {
        return Err(SendError::Rejected {
            code: "bad_message".into(),
            message: format!("`{channel}`/`{id}` is not a Discord channel/message id"),
        });
    }
    rest.call(
        Method::DELETE,
        &format!("/channels/{channel}/messages/{id}"),
        None,
        Auth::Bot,
        &format!("delete:{channel}"),
    )
    .await?;
    Ok(())
}

/// Trigger Typing Indicator: shows "<bot> is typing…" in the channel for about 10 s, or until
/// the bot posts; renewed by the gateway while the turn runs.
pub(crate) async fn typing(rest: &Rest, at: &TypingTarget) -> Result<Option<Typing>, SendError> {
    let channel = at
        .thread
        .as_ref()
        .map(|t| t.as_str())
        .unwrap_or(at.chat.as_str());
    if !is_snowflake(channel) {
        return Ok(None);
    }
    rest.call(
        Method::POST,
        &format!("/channels/{channel}/typing"),
        None,
        Auth::Bot,
        &format!("typing:{channel}"),
    )
    .await?;
    Ok(Some(Typing {
        renew_every: Some(TYPING_RENEW),
        handle: None,
    }))
}

/// The Create Message body for one chunk.
pub(crate) fn message_body(message: &OutboundMessage) -> Value {
    let mut body = json!({
        "content": message.text,
        "allowed_mentions": allowed_mentions(&message.text),
        "nonce": nonce(&message.idempotency_key),
        "enforce_nonce": true,
    });
    if let Some(reply_to) = message
        .reply_to
        .as_ref()
        .filter(|m| is_snowflake(m.as_str()))
    {
        // `fail_if_not_exists: false`: if the question was deleted meanwhile, the answer is
        // still posted, just without the link.
        body["message_reference"] = json!({
            "message_id": reply_to.as_str(),
            "fail_if_not_exists": false,
        });
    }
    body
}

/// `allowed_mentions` that pings only the users written as `<@id>` / `<@!id>` in `text`.
pub(crate) fn allowed_mentions(text: &str) -> Value {
    let mut users: Vec<&str> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<@") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('>') else { break };
        let id = after[..end].strip_prefix('!').unwrap_or(&after[..end]);
        if is_snowflake(id) && !users.contains(&id) && users.len() < MAX_ALLOWED_USERS {
            users.push(id);
        }
        rest = &after[end + 1..];
    }
    json!({ "parse": [], "users": users, "replied_user": false })
}

/// A Discord nonce (at most 25 characters) standing for an idempotency key: FNV-1a, which is
/// stable across builds, so a replay after a restart sends the same nonce.
pub(crate) fn nonce(idempotency_key: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in idempotency_key.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash.to_string()
}

/// Whether `s` looks like a Discord id (a decimal snowflake).
pub(crate) fn is_snowflake(s: &str) -> bool {
    !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use baton_contract::{ChatId, ThreadId};

    use super::*;

    fn chunk(text: &str) -> OutboundMessage {
        OutboundMessage {
            chat: ChatId::from("290926798999357250"),
            thread: None,
            reply_to: Some(MessageId::from("334385199974967042")),
            text: text.into(),
            idempotency_key: "reply:discord:snark:334385199974967042#0".into(),
            ephemeral: None,
        }
    }

    #[test]
    fn a_reply_references_its_message_and_pings_nobody_by_pattern() {
        let body = message_body(&chunk("Replying to you @everyone"));
        let fixture: Value = serde_json::from_str(
            &std::fs::read_to_string(format!(
                "{}/fixtures/rest_create_message_reply_request.json",
                env!("CARGO_MANIFEST_DIR")
            ))
            .unwrap(),
        )
        .unwrap();
        assert_eq!(body["message_reference"], fixture["message_reference"]);
        assert_eq!(body["allowed_mentions"]["parse"], json!([]));
        assert_eq!(body["allowed_mentions"]["replied_user"], false);
        assert_eq!(body["allowed_mentions"]["users"], json!([]));
        assert_eq!(body["enforce_nonce"], true);
        assert!(body["nonce"].as_str().unwrap().len() <= 25);
    }

    #[test]
    fn only_users_written_as_mentions_may_be_pinged() {
        let allowed = allowed_mentions("<@111> and <@!222>, not <@&333> nor <#444> nor <@111>");
        assert_eq!(allowed["users"], json!(["111", "222"]));
    }

    #[test]
    fn nonces_are_stable_and_differ_per_chunk() {
        assert_eq!(nonce("run#0"), nonce("run#0"));
        assert_ne!(nonce("run#0"), nonce("run#1"));
    }

    #[test]
    fn a_non_discord_reply_target_is_not_referenced() {
        let mut m = chunk("hi");
        m.reply_to = Some(MessageId::from("cmd:786008729715212338"));
        m.thread = Some(ThreadId::from("1"));
        assert!(message_body(&m).get("message_reference").is_none());
    }
}
