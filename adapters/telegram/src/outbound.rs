//! Posting: `sendMessage` quoting the message answered (`reply_parameters`), edits, deletes, the
//! `typing` chat action and files (`sendDocument`, `sendPhoto`).
//!
//! Text goes out plain (no `parse_mode`), so it shows exactly as the bot wrote it and no reserved
//! character can make Telegram refuse it. Telegram takes no idempotency key: each call is made
//! once, and the gateway records a post as begun before it is made, so a retry after a crash
//! never posts it twice (a 429 is safe to retry: nothing was posted).

use std::time::Duration;

use baton_contract::{
    ChatId, DeleteMessage, EditMessage, MessageId, OutboundFile, OutboundMessage, Preview,
    SendError, SentMessage, ThreadId, Typing, TypingTarget,
};
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};

use crate::api::Api;
use crate::ids::{chat_number, message_id, split_message_id};

/// Telegram shows `typing` for about 5 s; it is sent again this often while the turn runs.
pub(crate) const TYPING_RENEW: Duration = Duration::from_secs(4);
/// The largest file a bot may send (50 MB).
pub(crate) const MAX_UPLOAD_BYTES: u64 = 50 * 1024 * 1024;

fn bad_chat(chat: &ChatId) -> SendError {
    SendError::Rejected {
        code: "bad_chat".into(),
        message: format!("`{chat}` is not a Telegram chat id (a number, -100… for supergroups)"),
    }
}

/// Where a message goes: the chat, its forum topic, the message it quotes.
fn place(
    chat: &ChatId,
    thread: Option<&ThreadId>,
    reply_to: Option<&MessageId>,
) -> Result<(i64, Value), SendError> {
    let chat_id = chat_number(chat).ok_or_else(|| bad_chat(chat))?;
    let mut body = json!({ "chat_id": chat_id });
    if let Some(topic) = thread.and_then(|t| t.as_str().parse::<i64>().ok()) {
        body["message_thread_id"] = json!(topic);
    }
    if let Some((_, quoted)) = reply_to
        .and_then(split_message_id)
        .filter(|(in_chat, _)| *in_chat == chat_id)
    {
        body["reply_parameters"] = json!({
            "message_id": quoted,
            "allow_sending_without_reply": true,
        });
    }
    Ok((chat_id, body))
}

fn sent(chat_id: i64, result: &Value) -> SentMessage {
    let id = result
        .get("message_id")
        .and_then(Value::as_i64)
        .map(|m| message_id(chat_id, m))
        .unwrap_or_else(|| MessageId(String::new()));
    SentMessage { message_id: id }
}

/// `sendMessage`, once.
pub(crate) async fn send(api: &Api, message: &OutboundMessage) -> Result<SentMessage, SendError> {
    let (chat_id, mut body) = place(
        &message.chat,
        message.thread.as_ref(),
        message.reply_to.as_ref(),
    )?;
    body["text"] = json!(message.text);
    let result = api.call("sendMessage", &body).await?;
    Ok(sent(chat_id, &result))
}

/// `editMessageText`, once. Telegram's "message is not modified" means the text is already
/// the one asked for: that is success.
pub(crate) async fn edit(api: &Api, edit: &EditMessage) -> Result<(), SendError> {
    let (chat_id, message) =
        split_message_id(&edit.message_id).ok_or_else(|| bad_chat(&edit.chat))?;
    let body = json!({ "chat_id": chat_id, "message_id": message, "text": edit.text });
    match api.call("editMessageText", &body).await {
        Ok(_) => Ok(()),
        Err(err) if err.is_not_modified() => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// `sendMessageDraft`, once: the reply so far, as a draft in a private chat.
pub(crate) async fn draft(api: &Api, preview: &Preview) -> Result<(), SendError> {
    let (_, mut body) = place(&preview.chat, preview.thread.as_ref(), None)?;
    body["draft_id"] = json!(preview.draft_id);
    body["text"] = json!(preview.text);
    api.call("sendMessageDraft", &body).await?;
    Ok(())
}

/// `deleteMessage`, once.
pub(crate) async fn delete(api: &Api, message: &DeleteMessage) -> Result<(), SendError> {
    let (chat_id, id) =
        split_message_id(&message.message_id).ok_or_else(|| bad_chat(&message.chat))?;
    api.call(
        "deleteMessage",
        &json!({ "chat_id": chat_id, "message_id": id }),
    )
    .await?;
    Ok(())
}

/// `sendChatAction` `typing` (renewed every [`TYPING_RENEW`]; it fades by itself when renewal
/// stops, and a message the bot sends ends it at once).
pub(crate) async fn typing(api: &Api, at: &TypingTarget) -> Result<Option<Typing>, SendError> {
    let (_, mut body) = place(&at.chat, at.thread.as_ref(), None)?;
    body["action"] = json!("typing");
    api.call("sendChatAction", &body).await?;
    Ok(Some(Typing {
        renew_every: Some(TYPING_RENEW),
        handle: None,
    }))
}

/// `sendPhoto` for an image, else `sendDocument`, once.
pub(crate) async fn upload(api: &Api, file: &OutboundFile) -> Result<SentMessage, SendError> {
    let (chat_id, body) = place(&file.chat, file.thread.as_ref(), file.reply_to.as_ref())?;
    let (method, field) = if file.is_image() {
        ("sendPhoto", "photo")
    } else {
        ("sendDocument", "document")
    };
    let part = Part::bytes(file.content.to_vec())
        .file_name(file.name.clone())
        .mime_str(&file.media_type)
        .unwrap_or_else(|_| Part::bytes(file.content.to_vec()).file_name(file.name.clone()));
    let mut form = Form::new().part(field, part);
    if let Value::Object(fields) = body {
        for (key, value) in fields {
            let text = match value {
                Value::String(s) => s,
                other => other.to_string(),
            };
            form = form.text(key, text);
        }
    }
    let result = api.call_multipart(method, form).await?;
    Ok(sent(chat_id, &result))
}

/// `setMyCommands`: `/baton` in the bot's command menu.
pub(crate) async fn register_commands(api: &Api) -> Result<(), crate::api::ApiError> {
    let commands: Vec<Value> = crate::setup::COMMANDS
        .iter()
        .map(|(command, description)| json!({ "command": command, "description": description }))
        .collect();
    api.call("setMyCommands", &json!({ "commands": commands }))
        .await
        .map(|_| ())
}
