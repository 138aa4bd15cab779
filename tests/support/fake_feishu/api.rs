//! The fake Feishu's Open Platform API: tenant token, `bot/v3/info`, messages (reply, create,
//! get, update, recall), reactions, chat membership, resources and uploads.

use super::*;

pub(super) async fn resource_download(
    State(inner): Shared,
    Path((id, key)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let (tokens, shelf) = {
        let inner = inner.lock().unwrap();
        let tokens: HashSet<String> = inner.tokens.keys().map(|t| format!("Bearer {t}")).collect();
        (tokens, inner.files.clone())
    };
    let kind = query.get("type").map(String::as_str).unwrap_or("");
    shelf.answer(&format!("{id}/{key}?type={kind}"), &headers, |auth| {
        auth.is_some_and(|auth| tokens.contains(auth))
    })
}

pub(super) fn bearer(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
        .to_owned()
}

pub(super) type Shared = State<Arc<Mutex<Inner>>>;

pub(super) async fn token(State(inner): Shared, Json(body): Json<Value>) -> Json<Value> {
    let mut inner = inner.lock().unwrap();
    let app_id = body["app_id"].as_str().unwrap_or("");
    let Some(app) = inner.apps.get(app_id) else {
        return Json(json!({ "code": 10003, "msg": "invalid param" }));
    };
    let name = app.name.clone();
    if body["app_secret"].as_str() != Some(&format!("secret-{name}")) {
        return Json(json!({ "code": 10014, "msg": "app secret invalid" }));
    }
    let n = {
        let fetches = inner.token_fetches.entry(name.clone()).or_default();
        *fetches += 1;
        *fetches
    };
    let token = format!("t-{name}-{n}");
    inner.tokens.insert(token.clone(), name);
    Json(json!({ "code": 0, "msg": "ok", "tenant_access_token": token, "expire": inner.expire }))
}

/// The app a request's token belongs to, or the 99991663 answer.
pub(super) fn authorised(inner: &Inner, headers: &HeaderMap) -> Result<String, Json<Value>> {
    inner.tokens.get(&bearer(headers)).cloned().ok_or_else(|| {
        Json(json!({ "code": 99991663, "msg": "Invalid access token for authorization. Please make a request with token attached." }))
    })
}

pub(super) async fn bot_info(State(inner): Shared, headers: HeaderMap) -> Json<Value> {
    let mut inner = inner.lock().unwrap();
    let name = match authorised(&inner, &headers) {
        Ok(name) => name,
        Err(refused) => return refused,
    };
    *inner.bot_info_calls.entry(name.clone()).or_default() += 1;
    let app = inner.apps.values().find(|a| a.name == name).unwrap();
    Json(json!({ "code": 0, "msg": "ok", "bot": {
        "activate_status": 2, "app_name": name, "avatar_url": "https://example.invalid/a.png",
        "ip_white_list": [], "open_id": app.open_id } }))
}

pub(super) async fn reply(
    State(inner): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let (response, delivered) = message_call(&inner, &headers, Target::Reply(id), &body);
    acked(&inner, delivered).await;
    response
}

pub(super) async fn create(
    State(inner): Shared,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    assert_eq!(
        query.get("receive_id_type").map(String::as_str),
        Some("chat_id")
    );
    let chat = body["receive_id"].as_str().unwrap_or("").to_owned();
    let (response, delivered) = message_call(&inner, &headers, Target::Chat(chat), &body);
    acked(&inner, delivered).await;
    response
}

/// Wait until the apps a post was delivered to (`frames`: app, frame id) have acked it.
pub(super) async fn acked(inner: &Arc<Mutex<Inner>>, frames: Vec<(String, String)>) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let pending = {
            let inner = inner.lock().unwrap();
            frames.iter().any(|(app, frame)| {
                !inner
                    .acks
                    .iter()
                    .any(|a| &a.app == app && &a.message_id == frame)
            })
        };
        if !pending {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "fake Feishu: a delivered bot mention was never acked"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// With the include_bot scope on, deliver post `id` (text `text`, by `poster`) to every other
/// app it @mentions by app id, as that app sees it; returns `(app, frame id)` for each.
pub(super) fn deliver_mentions(
    inner: &mut Inner,
    poster: &str,
    id: &str,
    text: &str,
) -> Vec<(String, String)> {
    if !inner.bot_mentions {
        return Vec::new();
    }
    let chat = inner.chats.get(id).cloned().unwrap_or_default();
    let mentioned: Vec<(String, String)> = inner
        .apps
        .values()
        .filter(|a| a.name != poster && text.contains(&format!("user_id=\"cli_{}\"", a.name)))
        .map(|a| (a.name.clone(), a.open_id.clone()))
        .collect();
    let mut frames = Vec::new();
    for (app, open_id) in mentioned {
        let mut event = message_event(
            &app,
            &format!("evt_{id}_{app}"),
            id,
            (&chat, "group"),
            &format!("ou_{poster}_as_seen_by_{app}"),
            "@_user_1 (delivered by Feishu)",
            &[(&open_id, &app)],
        );
        event["event"]["sender"]["sender_type"] = "app".into();
        let frame = push(inner, &app, &event, 1);
        frames.push((app, frame));
    }
    frames
}

pub(super) fn message_call(
    inner: &Arc<Mutex<Inner>>,
    headers: &HeaderMap,
    target: Target,
    body: &Value,
) -> (Response, Vec<(String, String)>) {
    post_message(&mut inner.lock().unwrap(), headers, target, body)
}

pub(super) fn post_message(
    inner: &mut Inner,
    headers: &HeaderMap,
    target: Target,
    body: &Value,
) -> (Response, Vec<(String, String)>) {
    let content: Value =
        serde_json::from_str(body["content"].as_str().unwrap_or("{}")).unwrap_or(Value::Null);
    let card = cards::shown_card(inner, &content);
    let mut post = Post {
        app: String::new(),
        target,
        text: content["text"].as_str().unwrap_or("").to_owned(),
        in_thread: body["reply_in_thread"].as_bool().unwrap_or(false),
        uuid: body["uuid"].as_str().unwrap_or("").to_owned(),
        msg_type: body["msg_type"].as_str().unwrap_or("").to_owned(),
        outcome: Outcome::TokenRefused,
    };
    let name = match authorised(inner, headers) {
        Ok(name) => name,
        Err(refused) => {
            inner.posts.push(post);
            return (refused.into_response(), Vec::new());
        }
    };
    post.app = name;
    if let Some(limit) = inner.rate_limits.pop_front() {
        post.outcome = Outcome::RateLimited;
        inner.posts.push(post);
        let response = match limit {
            RateLimit::Http429 => (
                StatusCode::TOO_MANY_REQUESTS,
                [("x-ogw-ratelimit-reset", "1")],
                Json(json!({ "code": 99991400, "msg": "request trigger frequency limit" })),
            )
                .into_response(),
            RateLimit::Code(code) => {
                Json(json!({ "code": code, "msg": "message frequency limit" })).into_response()
            }
        };
        return (response, Vec::new());
    }
    let id = match inner
        .uuids
        .get(&post.uuid)
        .filter(|_| !post.uuid.is_empty())
    {
        Some(id) => {
            post.outcome = Outcome::SameUuid(id.clone());
            id.clone()
        }
        None => {
            inner.next += 1;
            let id = format!("om_sent_{}", inner.next);
            inner.uuids.insert(post.uuid.clone(), id.clone());
            post.outcome = Outcome::Sent(id.clone());
            if let Some(card) = &card {
                post.text = cards::posted_card(inner, card, &id);
            }
            inner.seen.push(Seen::Post {
                id: id.clone(),
                text: post.text.clone(),
            });
            id
        }
    };
    let chat = match &post.target {
        Target::Chat(chat) => Some(chat.clone()),
        Target::Reply(parent) => inner.chats.get(parent).cloned(),
    };
    if let Some(chat) = chat {
        inner.chats.insert(id.clone(), chat);
    }
    inner.posters.insert(id.clone(), post.app.clone());
    let delivered = match post.outcome {
        Outcome::Sent(_) => deliver_mentions(inner, &post.app.clone(), &id, &post.text.clone()),
        _ => Vec::new(),
    };
    if matches!(post.outcome, Outcome::Sent(_)) {
        shown_upload(inner, &post, &content);
    }
    inner.posts.push(post);
    let response = Json(json!({ "code": 0, "msg": "success", "data": {
        "message_id": id, "msg_type": "text", "create_time": "1700000000000",
        "sender": { "id": "cli_x", "id_type": "app_id", "sender_type": "app" } } }))
    .into_response();
    (response, delivered)
}

/// `GET /open-apis/im/v1/messages/<id>`: a message an app posted, with its sender app.
pub(super) async fn get_message(
    State(inner): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Json<Value> {
    let inner = inner.lock().unwrap();
    if let Err(refused) = authorised(&inner, &headers) {
        return refused;
    }
    let Some(app) = inner.posters.get(&id) else {
        return Json(json!({ "code": 230011, "msg": "message not found" }));
    };
    Json(json!({ "code": 0, "msg": "success", "data": { "items": [{
        "message_id": id, "msg_type": "text",
        "sender": { "id": format!("cli_{app}"), "id_type": "app_id", "sender_type": "app" } }] } }))
}

pub(super) async fn is_in_chat(
    State(inner): Shared,
    Path(chat): Path<String>,
    headers: HeaderMap,
) -> Json<Value> {
    let mut inner = inner.lock().unwrap();
    let name = match authorised(&inner, &headers) {
        Ok(name) => name,
        Err(refused) => return refused,
    };
    inner.in_chat_calls += 1;
    let member = match inner.p2p.get(&chat) {
        Some(app) => *app == name,
        None => !inner.outside.contains(&(name, chat)),
    };
    Json(json!({ "code": 0, "msg": "success", "data": { "is_in_chat": member } }))
}

/// Feishu lets a message be edited this many times.
pub(super) const MAX_EDITS: u32 = 20;

pub(super) async fn update(
    State(inner): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    if let Err(refused) = authorised(&inner, &headers) {
        return refused.into_response();
    }
    let edits = inner.edits.entry(id.clone()).or_default();
    if *edits >= MAX_EDITS {
        return Json(
            json!({ "code": 230072, "msg": "The message has been edited too many times" }),
        )
        .into_response();
    }
    *edits += 1;
    let content: Value =
        serde_json::from_str(body["content"].as_str().unwrap_or("{}")).unwrap_or(Value::Null);
    let text = content["text"].as_str().unwrap_or("").to_owned();
    inner.seen.push(Seen::Edit {
        id: id.clone(),
        text,
    });
    Json(json!({ "code": 0, "msg": "success", "data": { "message_id": id } })).into_response()
}

pub(super) async fn recall(
    State(inner): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let inner = inner.lock().unwrap();
    if let Err(refused) = authorised(&inner, &headers) {
        return refused.into_response();
    }
    inner.seen.push(Seen::Delete { id });
    Json(json!({ "code": 0, "msg": "success", "data": {} })).into_response()
}

pub(super) async fn add_reaction(
    State(inner): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    if let Err(refused) = authorised(&inner, &headers) {
        return refused.into_response();
    }
    assert_eq!(body["reaction_type"]["emoji_type"], "Typing");
    inner.next += 1;
    let reaction = format!("reaction_{}", inner.next);
    inner.reactions.insert(reaction.clone(), id.clone());
    inner.seen.push(Seen::TypingOn { at: id.clone() });
    Json(json!({ "code": 0, "msg": "success", "data": {
        "reaction_id": reaction, "operator": { "operator_id": "cli_x", "operator_type": "app" },
        "action_time": "1700000000000", "reaction_type": { "emoji_type": "Typing" } } }))
    .into_response()
}

pub(super) async fn delete_reaction(
    State(inner): Shared,
    Path((id, reaction)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let mut inner = inner.lock().unwrap();
    if let Err(refused) = authorised(&inner, &headers) {
        return refused.into_response();
    }
    if inner.reactions.remove(&reaction).as_deref() != Some(id.as_str()) {
        return Json(json!({ "code": 231003, "msg": "The reaction does not exist" }))
            .into_response();
    }
    inner.seen.push(Seen::TypingOff { at: id });
    Json(json!({ "code": 0, "msg": "success", "data": { "reaction_id": reaction } }))
        .into_response()
}

// ---- Files to chats: image/file uploads, shown by an `image`/`file` message -------------------

pub(super) async fn upload_image(
    State(inner): Shared,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    upload(&inner, &headers, &body, "image")
}

pub(super) async fn upload_file(
    State(inner): Shared,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    upload(&inner, &headers, &body, "file")
}

pub(super) fn upload(
    inner: &Arc<Mutex<Inner>>,
    headers: &HeaderMap,
    body: &[u8],
    kind: &str,
) -> Response {
    let mut inner = inner.lock().unwrap();
    if let Err(refused) = authorised(&inner, headers) {
        return refused.into_response();
    }
    inner.upload_calls += 1;
    if inner.upload_limits > 0 {
        inner.upload_limits -= 1;
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("x-ogw-ratelimit-reset", "1")],
            Json(json!({ "code": 99991400, "msg": "request trigger frequency limit" })),
        )
            .into_response();
    }
    let Some(parts) = multipart::parts(headers, body) else {
        return Json(json!({ "code": 234001, "msg": "Invalid request param." })).into_response();
    };
    let field = |name: &str| parts.iter().find(|p| p.name == name);
    let (file, name) = match kind {
        "image" => {
            if field("image_type").map(|p| p.text()).as_deref() != Some("message") {
                return Json(json!({ "code": 234001, "msg": "image_type must be message" }))
                    .into_response();
            }
            (
                field("image"),
                field("image").and_then(|p| p.filename.clone()),
            )
        }
        _ => {
            if field("file_type").is_none() {
                return Json(json!({ "code": 234001, "msg": "file_type is required" }))
                    .into_response();
            }
            (field("file"), field("file_name").map(|p| p.text()))
        }
    };
    let Some(file) = file else {
        return Json(json!({ "code": 234001, "msg": "no file" })).into_response();
    };
    let (name, data) = (name.unwrap_or_default(), file.data.clone());
    inner.next += 1;
    let key = format!("{kind}_key_{}", inner.next);
    inner
        .uploaded
        .insert(key.clone(), (name, data, kind.to_owned()));
    let data = match kind {
        "image" => json!({ "image_key": key }),
        _ => json!({ "file_key": key }),
    };
    Json(json!({ "code": 0, "msg": "success", "data": data })).into_response()
}

/// An `image`/`file` message just sent: record the upload it shows, where it went.
pub(super) fn shown_upload(inner: &mut Inner, post: &Post, content: &Value) {
    let key = match post.msg_type.as_str() {
        "image" => content["image_key"].as_str(),
        "file" => content["file_key"].as_str(),
        _ => return,
    };
    let Some((name, bytes, kind)) = key.and_then(|k| inner.uploaded.get(k)).cloned() else {
        return;
    };
    let (channel, thread) = match &post.target {
        Target::Chat(chat) => (chat.clone(), None),
        Target::Reply(parent) => (
            inner.chats.get(parent).cloned().unwrap_or_default(),
            Some(parent.clone()),
        ),
    };
    inner.uploads.push(Upload {
        channel,
        thread,
        name,
        bytes,
        kind,
    });
}
