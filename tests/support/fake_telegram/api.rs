//! The fake's Bot API methods (`POST /bot<token>/<method>`) and file downloads.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State as Extract};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::super::multipart::{self, Part};
use super::super::seen::Seen;
use super::super::uploads::Upload;
use super::{ChatAction, Inner, Post};

/// Telegram's limit on a message's text.
const MAX_TEXT: usize = 4096;

#[derive(Clone)]
pub(super) struct State {
    pub(super) inner: Arc<Mutex<Inner>>,
    pub(super) arrived: Arc<Notify>,
}

fn ok(result: Value) -> Response {
    Json(json!({"ok": true, "result": result})).into_response()
}

fn error(code: u16, description: &str) -> Response {
    let status = StatusCode::from_u16(code).unwrap();
    (
        status,
        Json(json!({"ok": false, "error_code": code, "description": description})),
    )
        .into_response()
}

fn too_many(retry_after: u64) -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        Json(json!({"ok": false, "error_code": 429,
            "description": format!("Too Many Requests: retry after {retry_after}"),
            "parameters": {"retry_after": retry_after}})),
    )
        .into_response()
}

/// A new message in `chat` by `author`, numbered in that chat, remembered for replies to it.
pub(super) fn new_message(
    inner: &mut Inner,
    chat: i64,
    author: Value,
    text: &str,
    entities: Value,
    reply_to: Option<i64>,
) -> Value {
    let next = inner.next_message.entry(chat).or_insert(1);
    let id = *next;
    *next += 1;
    inner.authors.insert((chat, id), author.clone());
    inner.texts.insert((chat, id), text.to_owned());
    let kind = if chat < 0 { "supergroup" } else { "private" };
    let mut message = json!({
        "message_id": id, "date": 1_700_000_000, "from": author,
        "chat": {"id": chat, "type": kind}, "text": text, "entities": entities,
    });
    if let Some(parent) = reply_to {
        message["reply_to_message"] = json!({
            "message_id": parent, "date": 1_700_000_000,
            "from": inner.authors.get(&(chat, parent)).cloned().unwrap_or(Value::Null),
            "chat": {"id": chat, "type": kind},
            "text": inner.texts.get(&(chat, parent)).cloned().unwrap_or_default(),
        });
    }
    message
}

/// Queue `message` as a new update for `bot`.
pub(super) fn deliver(inner: &mut Inner, bot: &str, message: &Value) {
    let update_id = inner.next_update;
    inner.next_update += 1;
    let update = json!({"update_id": update_id, "message": message});
    inner.delivered.push((bot.to_owned(), update.clone()));
    let b = inner.bots.iter_mut().find(|b| b.name == bot).unwrap();
    b.queue.push_back(update);
}

/// The `mention` entities Telegram finds in a sent text: every `@username`, offsets in UTF-16.
fn mentions_in(text: &str) -> Value {
    let mut entities = Vec::new();
    let mut units = 0;
    let mut start: Option<usize> = None;
    for c in text.chars().chain(std::iter::once(' ')) {
        let word = c.is_alphanumeric() || c == '_';
        match start {
            Some(at) if !word => {
                if units - at > 1 {
                    entities.push(json!({"type": "mention", "offset": at, "length": units - at}));
                }
                start = None;
            }
            None if c == '@' => start = Some(units),
            _ => {}
        }
        units += c.len_utf16();
    }
    Value::Array(entities)
}

/// `POST /bot<token>/<method>`.
pub(super) async fn method(
    Extract(state): Extract<State>,
    Path((bot, method)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(token) = bot.strip_prefix("bot") else {
        return error(404, "Not Found");
    };
    let name = {
        let inner = state.inner.lock().unwrap();
        inner
            .bots
            .iter()
            .find(|b| format!("tok-{}", b.name) == token)
            .map(|b| b.name.clone())
    };
    let Some(name) = name else {
        return error(401, "Unauthorized");
    };
    let Some((body, files)) = parameters(&headers, &body) else {
        return error(
            400,
            "Bad Request: the fake reads JSON, form and multipart bodies only",
        );
    };
    match method.as_str() {
        "getMe" => get_me(&state, &name),
        "getUpdates" => get_updates(&state, &name, &body).await,
        "deleteWebhook" => {
            bot_mut(&state, &name, |b| b.webhook = None);
            ok(json!(true))
        }
        "setWebhook" => {
            let url = body["url"].as_str().unwrap_or_default().to_owned();
            let secret = body["secret_token"].as_str().unwrap_or_default().to_owned();
            bot_mut(&state, &name, |b| b.webhook = Some((url, secret)));
            ok(json!(true))
        }
        "getChatMember" => {
            let inner = state.inner.lock().unwrap();
            let chat = body["chat_id"].as_i64().unwrap_or_default();
            let user = body["user_id"].as_i64().unwrap_or_default();
            let status = if inner.outside.contains(&(chat, user)) {
                "left"
            } else {
                "member"
            };
            ok(json!({"status": status, "user": {"id": user, "is_bot": true, "first_name": "bot"}}))
        }
        "setMyCommands" => {
            bot_mut(&state, &name, |b| {
                b.commands = Some(body["commands"].clone())
            });
            ok(json!(true))
        }
        "sendMessage" => send_message(&state, &name, &body).await,
        "sendDocument" => send_file(&state, &name, &body, files, "document"),
        "sendPhoto" => send_file(&state, &name, &body, files, "photo"),
        "editMessageText" => edit(&state, &body),
        "sendMessageDraft" => {
            let chat = body["chat_id"].as_i64().unwrap_or_default();
            if chat <= 0 {
                return error(400, "Bad Request: TEXTDRAFT_PEER_INVALID");
            }
            let mut inner = state.inner.lock().unwrap();
            inner.drafts.push(super::Draft {
                chat,
                draft_id: body["draft_id"].as_i64().unwrap_or_default(),
                text: body["text"].as_str().unwrap_or_default().to_owned(),
            });
            ok(json!(true))
        }
        "deleteMessage" => {
            let id = format!("{}:{}", body["chat_id"], body["message_id"]);
            state.inner.lock().unwrap().seen.push(Seen::Delete { id });
            ok(json!(true))
        }
        "sendChatAction" => {
            let mut inner = state.inner.lock().unwrap();
            let chat = body["chat_id"].as_i64().unwrap_or_default();
            inner.seen.push(Seen::TypingOn {
                at: chat.to_string(),
            });
            inner.actions.push(ChatAction {
                bot: name,
                chat,
                action: body["action"].as_str().unwrap_or_default().to_owned(),
                at: tokio::time::Instant::now(),
            });
            ok(json!(true))
        }
        "getFile" => {
            let inner = state.inner.lock().unwrap();
            let id = body["file_id"].as_str().unwrap_or_default();
            match inner.files.get(id) {
                Some((path, bytes)) => ok(json!({"file_id": id, "file_unique_id": id,
                    "file_size": bytes.len(), "file_path": path})),
                None => error(400, "Bad Request: invalid file_id"),
            }
        }
        _ => error(404, "Not Found: method not found"),
    }
}

/// A method's parameters, sent as JSON (baton), as a form (python-telegram-bot) or as
/// `multipart/form-data` (a file upload), where Telegram takes nested values JSON-encoded; and
/// the multipart body's file parts.
fn parameters(headers: &HeaderMap, body: &[u8]) -> Option<(Value, Vec<Part>)> {
    if let Some(parts) = multipart::parts(headers, body) {
        let (files, fields): (Vec<Part>, Vec<Part>) =
            parts.into_iter().partition(|p| p.filename.is_some());
        let fields = fields.iter().map(|p| field(p.name.clone(), &p.text()));
        return Some((Value::Object(fields.collect()), files));
    }
    if body.is_empty() {
        return Some((json!({}), Vec::new()));
    }
    if body.first() == Some(&b'{') {
        return Some((serde_json::from_slice(body).ok()?, Vec::new()));
    }
    let form = std::str::from_utf8(body).ok()?;
    let url = reqwest::Url::parse(&format!("http://form/?{form}")).ok()?;
    let fields = url.query_pairs().map(|(k, v)| field(k.into_owned(), &v));
    Some((Value::Object(fields.collect()), Vec::new()))
}

/// A form field: its JSON value where it is JSON (a nested object, a number), else its text.
fn field(name: String, text: &str) -> (String, Value) {
    let value = serde_json::from_str(text).unwrap_or(Value::String(text.to_owned()));
    (name, value)
}

fn bot_mut(state: &State, name: &str, f: impl FnOnce(&mut super::Bot)) {
    let mut inner = state.inner.lock().unwrap();
    f(inner.bots.iter_mut().find(|b| b.name == name).unwrap());
}

fn get_me(state: &State, name: &str) -> Response {
    let inner = state.inner.lock().unwrap();
    let b = inner.bots.iter().find(|b| b.name == name).unwrap();
    ok(
        json!({"id": b.id, "is_bot": true, "first_name": b.name, "username": b.username,
        "can_join_groups": true, "can_read_all_group_messages": true,
        "supports_inline_queries": false}),
    )
}

/// Long polling: drop what `offset` confirms, answer what is left, or wait for it.
async fn get_updates(state: &State, name: &str, body: &Value) -> Response {
    let offset = body["offset"].as_i64();
    let timeout = Duration::from_secs(body["timeout"].as_u64().unwrap_or(0).min(30));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let arrived = state.arrived.notified();
        tokio::pin!(arrived);
        arrived.as_mut().enable();
        {
            let mut inner = state.inner.lock().unwrap();
            let b = inner.bots.iter_mut().find(|b| b.name == name).unwrap();
            if b.webhook.is_some() {
                return error(
                    409,
                    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
                );
            }
            b.get_updates += 1;
            if let Some(offset) = offset {
                b.queue
                    .retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            }
            if !b.queue.is_empty() || tokio::time::Instant::now() >= deadline {
                return ok(Value::Array(b.queue.iter().cloned().collect()));
            }
        }
        let _ = tokio::time::timeout_at(deadline, arrived).await;
    }
}

async fn send_message(state: &State, name: &str, body: &Value) -> Response {
    let chat = body["chat_id"].as_i64().unwrap_or_default();
    let text = body["text"].as_str().unwrap_or_default().to_owned();
    let mut post = Post {
        bot: name.to_owned(),
        chat,
        text: text.clone(),
        quotes: body["reply_parameters"]["message_id"].as_i64(),
        topic: body["message_thread_id"].as_i64(),
        message_id: None,
        refused: None,
    };
    let (answer, hold) = {
        let mut inner = state.inner.lock().unwrap();
        if let Some(retry_after) = inner.rate_limits.pop_front() {
            post.refused = Some(429);
            inner.posts.push(post);
            return too_many(retry_after);
        }
        if text.chars().count() > MAX_TEXT {
            post.refused = Some(400);
            inner.posts.push(post);
            return error(400, "Bad Request: message is too long");
        }
        if text.trim().is_empty() {
            post.refused = Some(400);
            inner.posts.push(post);
            return error(400, "Bad Request: message text is empty");
        }
        let me = inner.bots.iter().find(|b| b.name == name).unwrap();
        let author =
            json!({"id": me.id, "is_bot": true, "first_name": me.name, "username": me.username});
        let entities = mentions_in(&text);
        let message = new_message(&mut inner, chat, author, &text, entities, post.quotes);
        let id = message["message_id"].as_i64().unwrap();
        post.message_id = Some(id);
        inner.posts.push(post);
        inner.seen.push(Seen::Post {
            id: format!("{chat}:{id}"),
            text: text.clone(),
        });
        hand_to_other_bots(&mut inner, name, chat, &message);
        (ok(message), inner.hold_posts)
    };
    state.arrived.notify_waiters();
    if hold {
        std::future::pending::<()>().await;
    }
    answer
}

/// In bot-to-bot mode, `name`'s post in group `chat` is an update for every other bot there.
fn hand_to_other_bots(inner: &mut Inner, name: &str, chat: i64, message: &Value) {
    if !inner.bot_to_bot || chat >= 0 {
        return;
    }
    let others: Vec<String> = inner
        .bots
        .iter()
        .filter(|b| b.name != name && !inner.outside.contains(&(chat, b.id)))
        .map(|b| b.name.clone())
        .collect();
    for other in others {
        deliver(inner, &other, message);
    }
}

/// `sendDocument` / `sendPhoto`: the file part `field` becomes a message carrying it (a
/// document, or a photo in one size), recorded as an [`Upload`] of that kind; its `caption`
/// is the message's text. 429 while posts are rate limited.
fn send_file(state: &State, name: &str, body: &Value, files: Vec<Part>, field: &str) -> Response {
    let Some(file) = files.into_iter().find(|p| p.name == field) else {
        return error(
            400,
            &format!("Bad Request: there is no {field} in the request"),
        );
    };
    let chat = body["chat_id"].as_i64().unwrap_or_default();
    let quotes = body["reply_parameters"]["message_id"].as_i64();
    let mut inner = state.inner.lock().unwrap();
    inner.upload_calls += 1;
    if let Some(retry_after) = inner.rate_limits.pop_front() {
        return too_many(retry_after);
    }
    let file_id = format!("sent-{}", inner.uploads.len() + 1);
    let file_name = file.filename.clone().unwrap_or_default();
    inner.files.insert(
        file_id.clone(),
        (format!("{field}s/{file_name}"), file.data.clone()),
    );
    inner.uploads.push(Upload {
        channel: chat.to_string(),
        thread: quotes
            .or(body["message_thread_id"].as_i64())
            .map(|id| id.to_string()),
        name: file_name.clone(),
        bytes: file.data.clone(),
        kind: field.to_owned(),
    });
    let me = inner.bots.iter().find(|b| b.name == name).unwrap();
    let author =
        json!({"id": me.id, "is_bot": true, "first_name": me.name, "username": me.username});
    let caption = body["caption"].as_str().unwrap_or_default();
    let mut message = new_message(&mut inner, chat, author, "", json!([]), quotes);
    let object = message.as_object_mut().unwrap();
    object.remove("text");
    object.remove("entities");
    if !caption.is_empty() {
        object.insert("caption".into(), json!(caption));
    }
    let size = file.data.len();
    let media = if field == "photo" {
        json!([{"file_id": file_id, "file_unique_id": file_id, "width": 1, "height": 1, "file_size": size}])
    } else {
        json!({"file_id": file_id, "file_unique_id": file_id, "file_name": file_name,
            "mime_type": file.content_type, "file_size": size})
    };
    object.insert(field.into(), media);
    hand_to_other_bots(&mut inner, name, chat, &message);
    drop(inner);
    state.arrived.notify_waiters();
    ok(message)
}

fn edit(state: &State, body: &Value) -> Response {
    let chat = body["chat_id"].as_i64().unwrap_or_default();
    let id = body["message_id"].as_i64().unwrap_or_default();
    let text = body["text"].as_str().unwrap_or_default().to_owned();
    let mut inner = state.inner.lock().unwrap();
    if text.chars().count() > MAX_TEXT {
        return error(400, "Bad Request: MESSAGE_TOO_LONG");
    }
    match inner.texts.get(&(chat, id)) {
        None => error(400, "Bad Request: message to edit not found"),
        Some(old) if *old == text => error(
            400,
            "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message",
        ),
        Some(_) => {
            inner.texts.insert((chat, id), text.clone());
            inner.edits.push((chat, id, text.clone()));
            inner.seen.push(Seen::Edit {
                id: format!("{chat}:{id}"),
                text: text.clone(),
            });
            ok(json!({"message_id": id, "chat": {"id": chat}, "text": text}))
        }
    }
}

/// `GET /file/bot<token>/<file_path>`.
pub(super) async fn file(
    Extract(state): Extract<State>,
    Path((bot, path)): Path<(String, String)>,
) -> Response {
    let inner = state.inner.lock().unwrap();
    let known = inner
        .bots
        .iter()
        .any(|b| bot == format!("bottok-{}", b.name));
    if !known {
        return error(401, "Unauthorized");
    }
    match inner.files.values().find(|(p, _)| *p == path) {
        Some((_, bytes)) => bytes.clone().into_response(),
        None => error(404, "Not Found"),
    }
}
