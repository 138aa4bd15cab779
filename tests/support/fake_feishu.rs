//! A fake Feishu/Lark Open Platform on 127.0.0.1: the tenant token, `bot/v3/info`, message reply
//! and create (recording every call, honouring `uuid` like Feishu), the long connection's
//! endpoint and its binary pbbp2 websocket, with scriptable rate limits, token expiry, dropped
//! connections and a connection that goes silent. It also builds events, encrypts and signs
//! webhook bodies the way Feishu does.
//!
//! Like Feishu, it never delivers one app's post to another, except, once
//! [`FakeFeishu::deliver_bot_mentions`] is on (the `include_bot` scope), a post that @mentions an
//! app (`<at user_id="cli_<name>">`): that app gets it over its long connection *before* the
//! poster's call is answered, so the platform's copy always comes first; `GET` of a posted
//! message names its sender app. Every app is in every
//! group chat unless [`FakeFeishu::not_in`] says otherwise, and a direct chat has only the app
//! its events were pushed to (`is_in_chat`).
//!
//! Apps are registered with [`FakeFeishu::app`]: app id `cli_<name>`, secret `secret-<name>`, and
//! the bot's own `open_id`. Tokens are `t-<name>-<n>`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use baton_feishu::frame::{Frame, METHOD_CONTROL, METHOD_DATA, header};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::gateway::DEADLINE;
use super::multipart;
use super::seen::{Seen, Timeline};
use super::shelf::Shelf;
use super::uploads::Upload;

/// The `service_id` the fake puts in connection URLs.
pub const SERVICE: i32 = 77;

/// Where a message call was aimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `POST /open-apis/im/v1/messages/<id>/reply`.
    Reply(String),
    /// `POST /open-apis/im/v1/messages?receive_id_type=chat_id`.
    Chat(String),
}

/// What the fake answered to a message call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Posted; the new message id.
    Sent(String),
    /// The `uuid` was seen before: nothing new posted, the earlier id returned.
    SameUuid(String),
    /// Refused with a rate limit.
    RateLimited,
    /// Refused: the token was expired.
    TokenRefused,
}

/// One message call as received.
#[derive(Debug, Clone)]
pub struct Post {
    /// The app whose token it carried (`snark`), or empty.
    pub app: String,
    /// Where it went.
    pub target: Target,
    /// The text inside `content`.
    pub text: String,
    /// `reply_in_thread`.
    pub in_thread: bool,
    /// `uuid`.
    pub uuid: String,
    /// `msg_type`.
    pub msg_type: String,
    /// The answer.
    pub outcome: Outcome,
}

/// One acknowledgement frame the client sent.
#[derive(Debug, Clone)]
pub struct Ack {
    /// The app.
    pub app: String,
    /// The frame's `message_id` header.
    pub message_id: String,
    /// The ack's payload code.
    pub code: i64,
    /// The frame's seq id, echoed.
    pub seq_id: u64,
    /// Whether it carried `biz_rt`.
    pub biz_rt: bool,
}

/// A scripted rate limit.
#[derive(Debug, Clone, Copy)]
pub enum RateLimit {
    /// HTTP 429 with code 99991400 and `x-ogw-ratelimit-reset: 1`.
    Http429,
    /// HTTP 200 with this code (230020, 99991400).
    Code(i64),
}

struct App {
    name: String,
    open_id: String,
    ping_interval: f64,
}

enum Ctl {
    Frame(Vec<u8>),
    Drop,
}

#[derive(Default)]
struct Inner {
    base: String,
    apps: HashMap<String, App>,
    tokens: HashMap<String, String>,
    token_fetches: HashMap<String, usize>,
    bot_info_calls: HashMap<String, usize>,
    endpoint_calls: HashMap<String, usize>,
    expire: u64,
    posts: Vec<Post>,
    uuids: HashMap<String, String>,
    rate_limits: VecDeque<RateLimit>,
    connects: HashMap<String, usize>,
    sockets: HashMap<String, (usize, mpsc::UnboundedSender<Ctl>)>,
    pings: Vec<(String, Instant)>,
    acks: Vec<Ack>,
    muted: HashSet<String>,
    next: u64,
    /// `(app, chat)` pairs where the app's bot is not a member.
    outside: HashSet<(String, String)>,
    in_chat_calls: usize,
    /// Post mentions of an app are delivered to it (the include_bot scope).
    bot_mentions: bool,
    /// The chat of each message id seen (pushed or posted).
    chats: HashMap<String, String>,
    /// The app that posted each message id.
    posters: HashMap<String, String>,
    /// Direct (p2p) chats seen in pushed events, and the one app in each.
    p2p: HashMap<String, String>,
    /// Edits made per message id (Feishu allows 20).
    edits: HashMap<String, u32>,
    /// reaction id -> message id
    reactions: HashMap<String, String>,
    seen: Timeline,
    // Files to chats: uploaded images and files by key (name, bytes, kind), the image/file
    // messages that showed them, and how many of the next uploads get 429.
    uploaded: HashMap<String, (String, Vec<u8>, String)>,
    uploads: Vec<Upload>,
    upload_limits: u32,
    upload_calls: usize,
    /// Message resources, at `<message_id>/<key>?type=<image|file>`, for a valid tenant token.
    files: Shelf,
}

/// A running fake Feishu.
#[derive(Clone)]
pub struct FakeFeishu {
    /// `http://127.0.0.1:PORT`: an account's `api_url`.
    pub api_url: String,
    inner: Arc<Mutex<Inner>>,
}

impl FakeFeishu {
    /// The next `n` image/file uploads get HTTP 429 (code 99991400, reset 1 s).
    pub fn rate_limit_uploads(&self, n: u32) {
        self.inner.lock().unwrap().upload_limits = n;
    }

    /// The images and files shown in chats (an `image`/`file` message of an upload), in order.
    pub fn uploads(&self) -> Vec<Upload> {
        self.inner.lock().unwrap().uploads.clone()
    }

    /// How many image/file uploads came, 429s included.
    pub fn upload_calls(&self) -> usize {
        self.inner.lock().unwrap().upload_calls
    }

    /// Start on 127.0.0.1:0.
    pub async fn start() -> FakeFeishu {
        let inner = Arc::new(Mutex::new(Inner {
            expire: 7200,
            ..Inner::default()
        }));
        let app = Router::new()
            .route(
                "/open-apis/auth/v3/tenant_access_token/internal",
                post(token),
            )
            .route("/open-apis/bot/v3/info", get(bot_info))
            .route("/open-apis/im/v1/messages/{id}/reply", post(reply))
            .route("/open-apis/im/v1/messages/{id}", put(update).delete(recall))
            .route(
                "/open-apis/im/v1/messages/{id}/reactions",
                post(add_reaction),
            )
            .route(
                "/open-apis/im/v1/messages/{id}/reactions/{reaction}",
                delete(delete_reaction),
            )
            .route(
                "/open-apis/im/v1/messages/{id}/resources/{key}",
                get(resource_download),
            )
            .route("/open-apis/im/v1/messages", post(create))
            .route("/open-apis/im/v1/images", post(upload_image))
            .route("/open-apis/im/v1/files", post(upload_file))
            .route("/open-apis/im/v1/messages/{id}", get(get_message))
            .route(
                "/open-apis/im/v1/chats/{chat}/members/is_in_chat",
                get(is_in_chat),
            )
            .route("/callback/ws/endpoint", post(endpoint))
            .route("/ws/{app}", get(socket))
            .with_state(Arc::clone(&inner));
        let base = super::turns::serve(app).await;
        inner.lock().unwrap().base = base.clone();
        FakeFeishu {
            api_url: base,
            inner,
        }
    }

    /// Register app `cli_<name>` (secret `secret-<name>`) whose bot is `open_id`.
    pub fn app(&self, name: &str, open_id: &str) {
        self.inner.lock().unwrap().apps.insert(
            format!("cli_{name}"),
            App {
                name: name.to_owned(),
                open_id: open_id.to_owned(),
                ping_interval: 120.0,
            },
        );
    }

    /// The `PingInterval` (seconds) the endpoint and pongs give `name`'s connections.
    pub fn set_ping_interval(&self, name: &str, seconds: f64) {
        let mut inner = self.inner.lock().unwrap();
        let app = inner.apps.get_mut(&format!("cli_{name}")).unwrap();
        app.ping_interval = seconds;
    }

    /// Tokens fetched from now on live `seconds`.
    pub fn set_token_expire(&self, seconds: u64) {
        self.inner.lock().unwrap().expire = seconds;
    }

    /// The next message calls are refused with these rate limits, in order.
    pub fn rate_limit_next(&self, limits: &[RateLimit]) {
        self.inner.lock().unwrap().rate_limits.extend(limits);
    }

    /// Every token `name` holds is now expired: the next call with it gets 99991663.
    pub fn expire_tokens(&self, name: &str) {
        self.inner
            .lock()
            .unwrap()
            .tokens
            .retain(|_, app| app != name);
    }

    /// How many tokens `name` has fetched.
    pub fn token_fetches(&self, name: &str) -> usize {
        count(&self.inner.lock().unwrap().token_fetches, name)
    }

    /// How many times `name` asked `bot/v3/info`.
    pub fn bot_info_calls(&self, name: &str) -> usize {
        count(&self.inner.lock().unwrap().bot_info_calls, name)
    }

    /// `name`'s bot is not in `chat`.
    pub fn not_in(&self, name: &str, chat: &str) {
        let mut inner = self.inner.lock().unwrap();
        inner.outside.insert((name.to_owned(), chat.to_owned()));
    }

    /// How many membership questions were asked, by every app.
    pub fn in_chat_calls(&self) -> usize {
        self.inner.lock().unwrap().in_chat_calls
    }

    /// From now on, a post that @mentions an app is delivered to it (the include_bot scope).
    pub fn deliver_bot_mentions(&self) {
        self.inner.lock().unwrap().bot_mentions = true;
    }

    /// How many times `name` asked for a long-connection endpoint.
    pub fn endpoint_calls(&self, name: &str) -> usize {
        count(&self.inner.lock().unwrap().endpoint_calls, name)
    }

    /// How many reactions are on messages now (put on and not removed).
    pub fn reactions_left(&self) -> usize {
        self.inner.lock().unwrap().reactions.len()
    }

    /// Posts, edits and the typing reaction (at the message), in order.
    pub fn seen(&self) -> Timeline {
        self.inner.lock().unwrap().seen.clone()
    }

    /// Every message call, refused ones included, in order.
    pub fn all_posts(&self) -> Vec<Post> {
        self.inner.lock().unwrap().posts.clone()
    }

    /// The calls that posted a new message.
    pub fn posts(&self) -> Vec<Post> {
        self.all_posts()
            .into_iter()
            .filter(|p| matches!(p.outcome, Outcome::Sent(_)))
            .collect()
    }

    /// Every ack frame received.
    pub fn acks(&self) -> Vec<Ack> {
        self.inner.lock().unwrap().acks.clone()
    }

    /// The acks for frames with this `message_id` header.
    pub fn acks_for(&self, message_id: &str) -> usize {
        self.acks()
            .iter()
            .filter(|a| a.message_id == message_id)
            .count()
    }

    /// When `name`'s pings arrived.
    pub fn pings(&self, name: &str) -> Vec<Instant> {
        let inner = self.inner.lock().unwrap();
        inner
            .pings
            .iter()
            .filter(|(app, _)| app == name)
            .map(|(_, at)| *at)
            .collect()
    }

    /// How many websockets `name` has opened.
    pub fn connects(&self, name: &str) -> usize {
        count(&self.inner.lock().unwrap().connects, name)
    }

    /// Wait until `name` has opened its `n`th websocket and it is open.
    pub async fn wait_connected(&self, name: &str, n: usize) {
        self.wait_for(|f| f.connects(name) >= n && f.socket_open(name))
            .await;
    }

    fn socket_open(&self, name: &str) -> bool {
        self.inner
            .lock()
            .unwrap()
            .sockets
            .get(name)
            .is_some_and(|(_, tx)| !tx.is_closed())
    }

    /// From now on, `name`'s current connection answers nothing (pings included).
    pub fn mute(&self, name: &str) {
        self.inner.lock().unwrap().muted.insert(name.to_owned());
    }

    /// Close `name`'s current connection from the server side.
    pub fn drop_connection(&self, name: &str) {
        let inner = self.inner.lock().unwrap();
        let (_, tx) = inner.sockets.get(name).expect("app has a websocket");
        let _ = tx.send(Ctl::Drop);
    }

    /// Send `event` to `name` as one data frame; returns the frame's `message_id` header.
    pub fn push_event(&self, name: &str, event: &Value) -> String {
        self.push_fragments(name, event, 1)
    }

    /// Send `event` to `name` split over `parts` data frames (sent last part first, to show the
    /// order does not matter); returns the frames' `message_id` header.
    pub fn push_fragments(&self, name: &str, event: &Value, parts: usize) -> String {
        push(&mut self.inner.lock().unwrap(), name, event, parts)
    }

    /// Wait, up to the test deadline, until `cond` holds.
    pub async fn wait_for(&self, cond: impl Fn(&FakeFeishu) -> bool) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while !cond(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "fake Feishu: condition not reached in time"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// [`FakeFeishu::push_fragments`], inside the lock.
fn push(inner: &mut Inner, name: &str, event: &Value, parts: usize) -> String {
    if let (Some(id), Some(chat)) = (
        event
            .pointer("/event/message/message_id")
            .and_then(Value::as_str),
        event
            .pointer("/event/message/chat_id")
            .and_then(Value::as_str),
    ) {
        inner.chats.insert(id.to_owned(), chat.to_owned());
        if event
            .pointer("/event/message/chat_type")
            .and_then(Value::as_str)
            == Some("p2p")
        {
            inner.p2p.insert(chat.to_owned(), name.to_owned());
        }
    }
    let payload = event.to_string().into_bytes();
    inner.next += 1;
    let frame_id = format!("frame-{}", inner.next);
    let size = payload.len().div_ceil(parts);
    let chunks: Vec<&[u8]> = payload.chunks(size).collect();
    let sum = chunks.len();
    let (_, tx) = inner
        .sockets
        .get(name)
        .expect("app has a websocket")
        .clone();
    for (seq, chunk) in chunks.iter().enumerate().rev() {
        inner.next += 1;
        let frame = Frame {
            seq_id: inner.next,
            log_id: 1000 + inner.next,
            service: SERVICE,
            method: METHOD_DATA,
            headers: vec![
                header("type", "event"),
                header("message_id", &frame_id),
                header("sum", &sum.to_string()),
                header("seq", &seq.to_string()),
                header("trace_id", "trace"),
            ],
            payload_encoding: None,
            payload_type: None,
            payload: Some(chunk.to_vec()),
            log_id_new: None,
        };
        tx.send(Ctl::Frame(frame.to_bytes()))
            .expect("websocket open");
    }
    frame_id
}

fn count(map: &HashMap<String, usize>, name: &str) -> usize {
    map.get(name).copied().unwrap_or(0)
}

/// An `im.message.receive_v1` event for app `app` (`cli_<name>`): `text` may hold `@_user_N`
/// placeholders for `mentions` (open_id, name) in order.
pub fn message_event(
    app: &str,
    event_id: &str,
    message_id: &str,
    chat: (&str, &str),
    sender: &str,
    text: &str,
    mentions: &[(&str, &str)],
) -> Value {
    let (chat_id, chat_type) = chat;
    let mentions: Vec<Value> = mentions
        .iter()
        .enumerate()
        .map(|(n, (open_id, name))| {
            json!({ "key": format!("@_user_{}", n + 1), "id": { "open_id": open_id, "union_id": format!("on_{open_id}") },
                    "name": name, "tenant_key": "tenant" })
        })
        .collect();
    json!({
        "schema": "2.0",
        "header": {
            "event_id": event_id, "event_type": "im.message.receive_v1",
            "create_time": "1700000000000", "token": "verification-token",
            "app_id": format!("cli_{app}"), "tenant_key": "tenant"
        },
        "event": {
            "sender": { "sender_id": { "open_id": sender, "union_id": format!("on_{sender}") },
                        "sender_type": "user", "tenant_key": "tenant" },
            "message": {
                "message_id": message_id, "create_time": "1700000000000",
                "chat_id": chat_id, "chat_type": chat_type, "message_type": "text",
                "content": json!({ "text": text }).to_string(),
                "mentions": mentions
            }
        }
    })
}

// ---- Files posted in chats ------------------------------------------------------------------

impl FakeFeishu {
    /// Serve `bytes` as the resource `key` (`type` `image` or `file`) of message `message_id`.
    pub fn resource(
        &self,
        message_id: &str,
        key: &str,
        kind: &str,
        bytes: &[u8],
        content_type: &str,
    ) {
        self.shelf().put(
            &format!("{message_id}/{key}?type={kind}"),
            bytes,
            content_type,
        );
    }

    /// The resources this fake serves, their fetches and failures (as
    /// `<message_id>/<key>?type=<kind>`).
    pub fn shelf(&self) -> Shelf {
        self.inner.lock().unwrap().files.clone()
    }
}

/// [`message_event`] for an `image` message (`content` `{"image_key": ...}`), or with
/// `file_name` a `file` message (`{"file_key": ..., "file_name": ...}`).
pub fn file_event(
    app: &str,
    event_id: &str,
    message_id: &str,
    chat: (&str, &str),
    sender: &str,
    key: &str,
    file_name: Option<&str>,
) -> Value {
    let mut event = message_event(app, event_id, message_id, chat, sender, "", &[]);
    let message = &mut event["event"]["message"];
    let (kind, content) = match file_name {
        None => ("image", json!({ "image_key": key })),
        Some(name) => ("file", json!({ "file_key": key, "file_name": name })),
    };
    message["message_type"] = kind.into();
    message["content"] = content.to_string().into();
    event
}

async fn resource_download(
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

/// A webhook body for `event`: encrypted with `encrypt_key` (fixed IV) when given.
pub fn webhook_body(event: &Value, encrypt_key: Option<&str>) -> String {
    match encrypt_key {
        Some(key) => {
            let iv: [u8; 16] = std::array::from_fn(|i| (i * 7) as u8);
            json!({ "encrypt": baton_feishu::crypto::encrypt(key, iv, &event.to_string()) })
                .to_string()
        }
        None => event.to_string(),
    }
}

/// `X-Lark-*` signature headers for `body`, signed with `encrypt_key` at `timestamp`.
pub fn signed_headers(
    encrypt_key: &str,
    timestamp: i64,
    body: &str,
) -> Vec<(&'static str, String)> {
    let ts = timestamp.to_string();
    let nonce = "n0nce";
    vec![
        ("x-lark-request-timestamp", ts.clone()),
        ("x-lark-request-nonce", nonce.to_owned()),
        (
            "x-lark-signature",
            baton_feishu::signature::sign(&ts, nonce, encrypt_key, body.as_bytes()),
        ),
    ]
}

fn bearer(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
        .to_owned()
}

type Shared = State<Arc<Mutex<Inner>>>;

async fn token(State(inner): Shared, Json(body): Json<Value>) -> Json<Value> {
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
fn authorised(inner: &Inner, headers: &HeaderMap) -> Result<String, Json<Value>> {
    inner.tokens.get(&bearer(headers)).cloned().ok_or_else(|| {
        Json(json!({ "code": 99991663, "msg": "Invalid access token for authorization. Please make a request with token attached." }))
    })
}

async fn bot_info(State(inner): Shared, headers: HeaderMap) -> Json<Value> {
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

async fn reply(
    State(inner): Shared,
    Path(id): Path<String>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let (response, delivered) = message_call(&inner, &headers, Target::Reply(id), &body);
    acked(&inner, delivered).await;
    response
}

async fn create(
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
async fn acked(inner: &Arc<Mutex<Inner>>, frames: Vec<(String, String)>) {
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
fn deliver_mentions(
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

fn message_call(
    inner: &Arc<Mutex<Inner>>,
    headers: &HeaderMap,
    target: Target,
    body: &Value,
) -> (Response, Vec<(String, String)>) {
    post_message(&mut inner.lock().unwrap(), headers, target, body)
}

fn post_message(
    inner: &mut Inner,
    headers: &HeaderMap,
    target: Target,
    body: &Value,
) -> (Response, Vec<(String, String)>) {
    let content: Value =
        serde_json::from_str(body["content"].as_str().unwrap_or("{}")).unwrap_or(Value::Null);
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
async fn get_message(
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

async fn is_in_chat(
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
const MAX_EDITS: u32 = 20;

async fn update(
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

async fn recall(State(inner): Shared, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let inner = inner.lock().unwrap();
    if let Err(refused) = authorised(&inner, &headers) {
        return refused.into_response();
    }
    inner.seen.push(Seen::Delete { id });
    Json(json!({ "code": 0, "msg": "success", "data": {} })).into_response()
}

async fn add_reaction(
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

async fn delete_reaction(
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

async fn endpoint(State(inner): Shared, Json(body): Json<Value>) -> Json<Value> {
    let mut inner = inner.lock().unwrap();
    let app_id = body["AppID"].as_str().unwrap_or("");
    let Some(app) = inner.apps.get(app_id) else {
        return Json(json!({ "code": 514, "msg": "auth failed" }));
    };
    if body["AppSecret"].as_str() != Some(&format!("secret-{}", app.name)) {
        return Json(json!({ "code": 514, "msg": "auth failed" }));
    }
    let (name, interval) = (app.name.clone(), app.ping_interval);
    *inner.endpoint_calls.entry(name.clone()).or_default() += 1;
    let ws = inner.base.replacen("http://", "ws://", 1);
    Json(json!({ "code": 0, "msg": "ok", "data": {
        "URL": format!("{ws}/ws/{name}?device_id=d1&service_id={SERVICE}"),
        "ClientConfig": { "PingInterval": interval, "ReconnectCount": -1,
                          "ReconnectInterval": 120, "ReconnectNonce": 30 } } }))
}

async fn socket(
    State(inner): Shared,
    Path(app): Path<String>,
    upgrade: WebSocketUpgrade,
) -> Response {
    upgrade.on_upgrade(move |ws| serve_socket(inner, app, ws))
}

async fn serve_socket(inner: Arc<Mutex<Inner>>, app: String, mut ws: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Ctl>();
    let number = {
        let mut inner = inner.lock().unwrap();
        inner.muted.remove(&app);
        let n = {
            let connects = inner.connects.entry(app.clone()).or_default();
            *connects += 1;
            *connects
        };
        inner.sockets.insert(app.clone(), (n, tx));
        n
    };
    let forget = |inner: &Arc<Mutex<Inner>>| {
        let mut inner = inner.lock().unwrap();
        if inner.sockets.get(&app).is_some_and(|(n, _)| *n == number) {
            inner.sockets.remove(&app);
        }
    };
    loop {
        tokio::select! {
            ctl = rx.recv() => match ctl {
                Some(Ctl::Frame(bytes)) => {
                    if ws.send(Message::Binary(bytes.into())).await.is_err() {
                        forget(&inner);
                        return;
                    }
                }
                Some(Ctl::Drop) | None => {
                    let _ = ws.send(Message::Close(None)).await;
                    forget(&inner);
                    return;
                }
            },
            incoming = ws.recv() => {
                let bytes = match incoming {
                    Some(Ok(Message::Binary(bytes))) => bytes,
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                        forget(&inner);
                        return;
                    }
                    Some(Ok(_)) => continue,
                };
                let frame = Frame::from_bytes(&bytes).expect("the client sends pbbp2 frames");
                assert_eq!(frame.service, SERVICE, "frames carry the URL's service_id");
                let pong = {
                    let mut guard = inner.lock().unwrap();
                    if guard.muted.contains(&app) {
                        continue;
                    }
                    match (frame.method, frame.kind()) {
                        (METHOD_CONTROL, "ping") => {
                            guard.pings.push((app.clone(), Instant::now()));
                            let interval = guard.apps.values().find(|a| a.name == app).unwrap().ping_interval;
                            let mut pong = Frame::ping(SERVICE);
                            pong.headers = vec![header("type", "pong")];
                            pong.payload = Some(json!({ "PingInterval": interval }).to_string().into_bytes());
                            Some(pong)
                        }
                        (METHOD_DATA, _) => {
                            let payload: Value = serde_json::from_slice(frame.payload.as_deref().unwrap_or(b"{}")).unwrap_or(Value::Null);
                            guard.acks.push(Ack {
                                app: app.clone(),
                                message_id: frame.header("message_id").unwrap_or("").to_owned(),
                                code: payload["code"].as_i64().unwrap_or(0),
                                seq_id: frame.seq_id,
                                biz_rt: frame.header("biz_rt").is_some(),
                            });
                            None
                        }
                        _ => None,
                    }
                };
                if let Some(pong) = pong
                    && ws.send(Message::Binary(pong.to_bytes().into())).await.is_err()
                {
                    forget(&inner);
                    return;
                }
            }
        }
    }
}

// ---- Files to chats: image/file uploads, shown by an `image`/`file` message -------------------

async fn upload_image(
    State(inner): Shared,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    upload(&inner, &headers, &body, "image")
}

async fn upload_file(
    State(inner): Shared,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    upload(&inner, &headers, &body, "file")
}

fn upload(inner: &Arc<Mutex<Inner>>, headers: &HeaderMap, body: &[u8], kind: &str) -> Response {
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
fn shown_upload(inner: &mut Inner, post: &Post, content: &Value) {
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
