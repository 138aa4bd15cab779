//! The fake Discord's REST API: messages (JSON or with files), edits, typing, channels,
//! interaction callbacks and webhooks, command registration, attachment downloads.

use super::*;

pub(super) async fn attachment_download(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(path): Path<String>,
    headers: HeaderMap,
) -> Response {
    let shelf = inner.lock().unwrap().files.clone();
    shelf.answer(&path, &headers, |_| true)
}

pub(super) fn bot_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bot "))
        .map(str::to_owned)
}

pub(super) fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({ "message": "401: Unauthorized", "code": 0 })),
    )
        .into_response()
}

pub(super) async fn gateway_url(State(inner): State<Arc<Mutex<Inner>>>) -> Json<Value> {
    let mut inner = inner.lock().unwrap();
    inner.gateway_requests += 1;
    let ws = inner.base.replacen("http://", "ws://", 1);
    Json(json!({ "url": format!("{ws}/gateway") }))
}

/// `GET /gateway/bot`: the URL and the session-start budget, for a known bot token only.
pub(super) async fn gateway_bot(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
) -> Response {
    let inner = inner.lock().unwrap();
    if !bot_token(&headers).is_some_and(|t| inner.bots.contains_key(&t)) {
        return unauthorized();
    }
    let ws = inner.base.replacen("http://", "ws://", 1);
    Json(
        json!({ "url": format!("{ws}/gateway"), "shards": 1, "session_start_limit":
        { "total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1 } }),
    )
    .into_response()
}

/// `GET /users/@me`: the bot user a token belongs to.
pub(super) async fn current_user(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
) -> Response {
    let inner = inner.lock().unwrap();
    match bot_token(&headers).and_then(|t| inner.bots.get(&t)) {
        Some(bot) => Json(user(&bot.user_id, &bot.name, true)).into_response(),
        None => unauthorized(),
    }
}

pub(super) async fn get_channel(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(channel): Path<String>,
    headers: HeaderMap,
) -> Response {
    let mut inner = inner.lock().unwrap();
    if !bot_token(&headers).is_some_and(|t| inner.bots.contains_key(&t)) {
        return unauthorized();
    }
    inner.channel_lookups += 1;
    let body = match inner.threads.get(&channel) {
        Some(parent) => {
            json!({ "id": channel, "type": 11, "guild_id": GUILD, "parent_id": parent })
        }
        None => json!({ "id": channel, "type": 0, "guild_id": GUILD, "parent_id": null }),
    };
    Json(body).into_response()
}

pub(super) async fn create_message(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(channel): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    let token = bot_token(&headers).unwrap_or_default();
    let Some(bot) = inner.bots.get(&token).cloned() else {
        return unauthorized();
    };
    let limited = inner.rate_limits.pop_front();
    inner.posts.push(Post {
        token: token.clone(),
        channel: channel.clone(),
        body: body.clone(),
        rate_limited: limited.is_some(),
    });
    if let Some((retry_after, global)) = limited {
        let mut response = (
            StatusCode::TOO_MANY_REQUESTS,
            Json(
                json!({ "message": "You are being rate limited.", "retry_after": retry_after,
                         "global": global }),
            ),
        )
            .into_response();
        let h = response.headers_mut();
        h.insert(
            "retry-after",
            (retry_after.ceil() as u64).to_string().parse().unwrap(),
        );
        h.insert(
            "x-ratelimit-scope",
            if global { "global" } else { "user" }.parse().unwrap(),
        );
        if global {
            h.insert("x-ratelimit-global", "true".parse().unwrap());
        }
        return response;
    }
    let content = body["content"].as_str().unwrap_or("");
    let reply_to = body["message_reference"]["message_id"].as_str();
    let dm_with = inner.dm_channels.get(&channel).cloned();
    let message = build_message(
        &mut inner,
        user(&bot.user_id, &bot.name, true),
        &channel,
        content,
        reply_to,
        dm_with.is_none(),
    );
    inner.broadcast(&message, dm_with.as_deref());
    let id = message["id"].as_str().unwrap_or("").to_owned();
    inner.seen.push(Seen::Post {
        id,
        text: content.to_owned(),
    });
    let mut answer = message;
    let obj = answer.as_object_mut().unwrap();
    obj.remove("guild_id");
    obj.remove("member");
    Json(answer).into_response()
}

pub(super) async fn edit_message(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path((_channel, id)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    let token = bot_token(&headers).unwrap_or_default();
    if !inner.bots.contains_key(&token) {
        return unauthorized();
    }
    if inner.edit_limits > 0 {
        inner.edit_limits -= 1;
        let body = json!({ "message": "You are being rate limited.", "retry_after": 1.0, "global": false });
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            Json(body),
        )
            .into_response();
    }
    let Some(message) = inner.messages.get_mut(&id) else {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({ "message": "Unknown Message", "code": 10008 })),
        )
            .into_response();
    };
    let content = body["content"].as_str().unwrap_or("").to_owned();
    message["content"] = content.clone().into();
    let answer = message.clone();
    inner.seen.push(Seen::Edit { id, text: content });
    Json(answer).into_response()
}

pub(super) async fn delete_message(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path((_channel, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let mut inner = inner.lock().unwrap();
    let token = bot_token(&headers).unwrap_or_default();
    if !inner.bots.contains_key(&token) {
        return unauthorized();
    }
    if inner.messages.remove(&id).is_none() {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({ "message": "Unknown Message", "code": 10008 })),
        )
            .into_response();
    }
    inner.seen.push(Seen::Delete { id });
    StatusCode::NO_CONTENT.into_response()
}

pub(super) async fn trigger_typing(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(channel): Path<String>,
    headers: HeaderMap,
) -> Response {
    let inner = inner.lock().unwrap();
    let token = bot_token(&headers).unwrap_or_default();
    if !inner.bots.contains_key(&token) {
        return unauthorized();
    }
    inner.seen.push(Seen::TypingOn { at: channel });
    StatusCode::NO_CONTENT.into_response()
}

pub(super) async fn interaction_callback(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path((id, token)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> StatusCode {
    inner
        .lock()
        .unwrap()
        .interaction_calls
        .push(InteractionCall {
            kind: "callback",
            id,
            token,
            authorized: headers.contains_key("authorization"),
            body,
        });
    StatusCode::NO_CONTENT
}

pub(super) async fn edit_original(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path((app, token)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    webhook_call(&inner, "edit", app, token, &headers, body)
}

pub(super) async fn followup(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path((app, token)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    webhook_call(&inner, "followup", app, token, &headers, body)
}

pub(super) fn webhook_call(
    inner: &Arc<Mutex<Inner>>,
    kind: &'static str,
    app: String,
    token: String,
    headers: &HeaderMap,
    body: Value,
) -> Json<Value> {
    let mut inner = inner.lock().unwrap();
    let id = inner.snowflake();
    inner.interaction_calls.push(InteractionCall {
        kind,
        id: app,
        token,
        authorized: headers.contains_key("authorization"),
        body: body.clone(),
    });
    Json(json!({ "id": id, "content": body["content"], "flags": 64 }))
}

pub(super) async fn register_global(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(app): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    register(
        &inner,
        format!("/applications/{app}/commands"),
        &headers,
        body,
    )
}

pub(super) async fn register_guild(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path((app, guild)): Path<(String, String)>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    register(
        &inner,
        format!("/applications/{app}/guilds/{guild}/commands"),
        &headers,
        body,
    )
}

pub(super) fn register(
    inner: &Arc<Mutex<Inner>>,
    path: String,
    headers: &HeaderMap,
    body: Value,
) -> Response {
    let mut inner = inner.lock().unwrap();
    let Some(token) = bot_token(headers).filter(|t| inner.bots.contains_key(t)) else {
        return unauthorized();
    };
    inner.registrations.push((token, path, body.clone()));
    Json(body).into_response()
}

// ---- Files to chats: Create Message with `payload_json` and `files[n]` ------------------------

/// Create Message: JSON, or multipart with files.
pub(super) async fn create_message_or_upload(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(channel): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some(parts) = multipart::parts(&headers, &body) else {
        let Ok(json) = serde_json::from_slice::<Value>(&body) else {
            return (StatusCode::BAD_REQUEST, "not JSON").into_response();
        };
        return create_message(State(inner), Path(channel), headers, Json(json)).await;
    };
    let mut inner = inner.lock().unwrap();
    if bot_token(&headers).is_none_or(|t| !inner.bots.contains_key(&t)) {
        return unauthorized();
    }
    inner.upload_calls += 1;
    if inner.upload_limits > 0 {
        inner.upload_limits -= 1;
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1"), ("x-ratelimit-scope", "user")],
            Json(json!({ "message": "You are being rate limited.", "retry_after": 1.0, "global": false })),
        )
            .into_response();
    }
    let payload: Value = parts
        .iter()
        .find(|p| p.name == "payload_json")
        .and_then(|p| serde_json::from_slice(&p.data).ok())
        .unwrap_or(Value::Null);
    let files: Vec<_> = parts
        .into_iter()
        .filter(|p| p.name.starts_with("files["))
        .collect();
    if files.is_empty() {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({ "code": 50006, "message": "Cannot send an empty message" })),
        )
            .into_response();
    }
    let parent = inner.threads.get(&channel).cloned();
    let id = inner.snowflake();
    for file in files {
        inner.uploads.push(Upload {
            channel: parent.clone().unwrap_or_else(|| channel.clone()),
            thread: parent.as_ref().map(|_| channel.clone()),
            name: file.filename.unwrap_or_default(),
            bytes: file.data,
            kind: "file".into(),
        });
    }
    let reply_to = payload["message_reference"]["message_id"].clone();
    Json(json!({ "id": id, "channel_id": channel, "content": "", "type": if reply_to.is_null() { 0 } else { 19 },
                 "message_reference": { "message_id": reply_to } }))
    .into_response()
}
