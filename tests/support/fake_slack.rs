//! A fake Slack on 127.0.0.1: the Web API methods baton calls, the Socket Mode websocket, and a
//! `response_url` endpoint, recording everything, with scriptable 429s. It also signs Events API
//! requests the way Slack does.
//!
//! Apps are registered with [`FakeSlack::app`]: each has a bot token (`xoxb-<name>`), an
//! app-level token (`xapp-<name>`), a bot user id and a bot id. Envelopes pushed with
//! [`FakeSlack::push`] go to the app's newest open websocket; acks are recorded per envelope id.
//! Envelopes given to [`FakeSlack::deliver`] are offered again, as Slack does, until one of
//! the app's sockets acknowledges them. Every socket's open and close times are kept, so a test
//! can see how many were open at once ([`FakeSlack::spans`]); with
//! [`FakeSlack::drop_silent_sockets`] the fake pings and closes a socket whose client stopped
//! answering, as Slack closes a dead connection. [`FakeSlack::post_event`] posts Events API
//! requests to a webhook account served by several instances, again at another one when a post
//! fails, as Slack retries.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::gateway::DEADLINE;
use super::seen::{Seen, Timeline};
use super::shelf::Shelf;
use super::spans::{SpanId, Spans};
use super::uploads::Upload;

/// One `chat.postMessage` call as received.
#[derive(Debug, Clone)]
pub struct Post {
    /// The bearer token it carried.
    pub token: String,
    /// `channel`.
    pub channel: String,
    /// `thread_ts`, if any.
    pub thread_ts: Option<String>,
    /// `text`.
    pub text: String,
    /// Whether the fake answered 429 to it.
    pub rate_limited: bool,
}

/// One call of Slack's streaming methods as received.
#[derive(Debug, Clone)]
pub struct StreamCall {
    /// `chat.startStream`, `chat.appendStream` or `chat.stopStream`.
    pub method: &'static str,
    /// The stream message's `ts` (for a start: the one it got).
    pub ts: String,
    /// The text it carried (`markdown_text`, or its `markdown_text` chunks).
    pub text: String,
    /// A start's `thread_ts`, `recipient_user_id` and `recipient_team_id`.
    pub thread_ts: Option<String>,
    pub recipient_user_id: Option<String>,
    pub recipient_team_id: Option<String>,
}

#[derive(Default)]
struct Inner {
    base: String,
    /// app name -> (bot user id, bot id)
    apps: HashMap<String, (String, String)>,
    posts: Vec<Post>,
    responses: Vec<(String, String)>,
    acks: Vec<String>,
    connects: HashMap<String, usize>,
    /// app name -> its open websockets, oldest first.
    sockets: HashMap<String, Vec<Live>>,
    /// Every websocket ever opened.
    spans: Spans,
    /// Ping every quarter of this, and close a socket silent for this long.
    silent_limit: Option<Duration>,
    /// Envelopes offered until acknowledged ([`FakeSlack::deliver`]).
    outbox: Vec<Offered>,
    /// Events API requests posted to webhook accounts ([`FakeSlack::post_event`]), failed ones
    /// included.
    event_posts: usize,
    rate_limits: u32,
    /// The next `chat.update` calls answered 429 with `Retry-After: 1`.
    update_limits: u32,
    /// `assistant.threads.setStatus` answers `missing_scope`.
    no_status_scope: bool,
    /// Every thread status set, in order: (thread ts, status; empty clears it).
    statuses: Vec<(String, String)>,
    /// Scopes `auth.test` says the bot token lacks (`x-oauth-scopes` leaves them out).
    withheld_scopes: Vec<String>,
    next_ts: u64,
    seen: Timeline,
    // Files to chats: uploads waiting for completion (file id -> name, bytes), the files shared,
    // and how many of the next `files.getUploadURLExternal` calls get 429.
    pending_uploads: HashMap<String, (String, Option<Vec<u8>>)>,
    uploads: Vec<Upload>,
    upload_limits: u32,
    upload_calls: usize,
    /// Files served at `/files-pri/...` to a known bot token.
    files: Shelf,
    /// Every streaming call answered, in order.
    stream_calls: Vec<StreamCall>,
    /// Each stream's text so far, and whether it is still live, by `ts`.
    streams: HashMap<String, (String, bool)>,
    /// `chat.startStream` answers `unknown_method` (a workspace without the methods).
    no_streams: bool,
}

/// One open websocket: its id in `spans`, and its outgoing frames.
struct Live {
    id: SpanId,
    tx: mpsc::UnboundedSender<String>,
}

/// How long Slack waits for an ack before offering an envelope again (its own wait is ~3 s; a
/// second keeps the tests short).
const REDELIVER_AFTER: Duration = Duration::from_secs(1);

/// An envelope offered until one of its app's sockets acknowledges it.
struct Offered {
    app: String,
    envelope_id: String,
    body: Value,
    /// How many times it was sent so far.
    sent: u32,
    last_sent: Option<std::time::Instant>,
}

/// A running fake Slack.
#[derive(Clone)]
pub struct FakeSlack {
    /// `http://127.0.0.1:PORT/api`: an account's `api_url`.
    pub api_url: String,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    inner: Arc<Mutex<Inner>>,
}

impl FakeSlack {
    /// Start on 127.0.0.1:0.
    pub async fn start() -> FakeSlack {
        let inner = Arc::new(Mutex::new(Inner {
            next_ts: 1_700_000_000_000_100,
            ..Inner::default()
        }));
        let app = Router::new()
            .route("/api/auth.test", get(auth_test).post(auth_test))
            .route("/api/apps.connections.open", post(connections_open))
            .route("/api/chat.postMessage", post(post_message))
            .route("/api/chat.update", post(update_message))
            .route("/api/chat.delete", post(delete_message))
            .route("/api/chat.startStream", post(start_stream))
            .route("/api/chat.appendStream", post(append_stream))
            .route("/api/chat.stopStream", post(stop_stream))
            .route("/api/assistant.threads.setStatus", post(set_status))
            .route(
                "/api/files.getUploadURLExternal",
                get(upload_url).post(upload_url),
            )
            .route("/upload/{file}", post(upload_bytes))
            .route("/api/files.completeUploadExternal", post(complete_upload))
            .route("/ws/{app}", get(socket))
            .route("/commands/{id}", post(response_url))
            .route("/files-pri/{*path}", get(file_download))
            .with_state(Arc::clone(&inner));
        let base = super::turns::serve(app).await;
        inner.lock().unwrap().base = base.clone();
        tokio::spawn(redeliver(Arc::downgrade(&inner)));
        FakeSlack {
            api_url: format!("{base}/api"),
            base,
            inner,
        }
    }

    /// Register an app `name` whose bot user is `user_id` (bot id `B_<name>`).
    pub fn app(&self, name: &str, user_id: &str) {
        self.inner
            .lock()
            .unwrap()
            .apps
            .insert(name.to_owned(), (user_id.to_owned(), format!("B_{name}")));
    }

    /// The next `n` `chat.postMessage` calls get 429 with `Retry-After: 1`.
    pub fn rate_limit_next(&self, n: u32) {
        self.inner.lock().unwrap().rate_limits = n;
    }

    /// `chat.startStream` answers `unknown_method`, as where the workspace has no streaming.
    pub fn without_streams(&self) {
        self.inner.lock().unwrap().no_streams = true;
    }

    /// Every call of the streaming methods answered `ok`, in order.
    pub fn stream_calls(&self) -> Vec<StreamCall> {
        self.inner.lock().unwrap().stream_calls.clone()
    }

    /// The next `n` `chat.update` calls get 429 with `Retry-After: 1`.
    pub fn rate_limit_updates(&self, n: u32) {
        self.inner.lock().unwrap().update_limits = n;
    }

    /// Refuse `assistant.threads.setStatus` with `missing_scope`, as for an app without
    /// `assistant:write`.
    pub fn without_status_scope(&self) {
        self.inner.lock().unwrap().no_status_scope = true;
    }

    /// Leave `scope` out of the scopes `auth.test` reports (`x-oauth-scopes`), as for an app
    /// installed without it.
    pub fn withhold_scope(&self, scope: &str) {
        self.inner
            .lock()
            .unwrap()
            .withheld_scopes
            .push(scope.to_owned());
    }

    /// The next `n` `files.getUploadURLExternal` calls get 429 with `Retry-After: 1`.
    pub fn rate_limit_uploads(&self, n: u32) {
        self.inner.lock().unwrap().upload_limits = n;
    }

    /// The files shared into chats (`files.completeUploadExternal`), in order.
    pub fn uploads(&self) -> Vec<Upload> {
        self.inner.lock().unwrap().uploads.clone()
    }

    /// How many `files.getUploadURLExternal` calls came, 429s included.
    pub fn upload_calls(&self) -> usize {
        self.inner.lock().unwrap().upload_calls
    }

    /// Every `assistant.threads.setStatus` accepted, in order: (thread ts, status), an empty
    /// status clearing it.
    pub fn statuses(&self) -> Vec<(String, String)> {
        self.inner.lock().unwrap().statuses.clone()
    }

    /// Posts, edits and the thread status, in order (ids are `ts`).
    pub fn seen(&self) -> Timeline {
        self.inner.lock().unwrap().seen.clone()
    }

    /// Every `chat.postMessage` call, 429s included, in order.
    pub fn all_posts(&self) -> Vec<Post> {
        self.inner.lock().unwrap().posts.clone()
    }

    /// The posts that were accepted.
    pub fn posts(&self) -> Vec<Post> {
        self.all_posts()
            .into_iter()
            .filter(|p| !p.rate_limited)
            .collect()
    }

    /// Every `response_url` call: (path id, text).
    pub fn responses(&self) -> Vec<(String, String)> {
        self.inner.lock().unwrap().responses.clone()
    }

    /// A `response_url` on this fake.
    pub fn response_url(&self, id: &str) -> String {
        format!("{}/commands/{id}", self.base)
    }

    /// Envelope ids acknowledged so far.
    pub fn acks(&self) -> Vec<String> {
        self.inner.lock().unwrap().acks.clone()
    }

    /// How many websockets `app` has opened.
    pub fn connects(&self, app: &str) -> usize {
        self.inner
            .lock()
            .unwrap()
            .connects
            .get(app)
            .copied()
            .unwrap_or(0)
    }

    /// Wait until `app` has opened its `n`th websocket (and got its hello).
    pub async fn wait_connected(&self, app: &str, n: usize) {
        self.wait_for(|s| s.connects(app) >= n && s.socket_open(app))
            .await;
    }

    /// Whether `app` has a websocket open now.
    pub fn socket_open(&self, app: &str) -> bool {
        self.inner
            .lock()
            .unwrap()
            .sockets
            .get(app)
            .is_some_and(|open| open.iter().any(|live| !live.tx.is_closed()))
    }

    /// Send `frame` on `app`'s newest websocket.
    pub fn push(&self, app: &str, frame: &Value) {
        let inner = self.inner.lock().unwrap();
        let live = inner
            .sockets
            .get(app)
            .and_then(|open| open.last())
            .expect("app has a websocket");
        live.tx.send(frame.to_string()).expect("websocket open");
    }

    /// Offer the Events API `body` to `app` as envelope `envelope_id` on its newest socket, and
    /// again every second (on whichever socket is newest then, `retry_attempt` counting up)
    /// until a socket acknowledges it.
    pub fn deliver(&self, app: &str, envelope_id: &str, body: Value) {
        self.inner.lock().unwrap().outbox.push(Offered {
            app: app.to_owned(),
            envelope_id: envelope_id.to_owned(),
            body,
            sent: 0,
            last_sent: None,
        });
    }

    /// Whether envelope `envelope_id` was acknowledged.
    pub fn acked(&self, envelope_id: &str) -> bool {
        self.inner
            .lock()
            .unwrap()
            .acks
            .iter()
            .any(|a| a == envelope_id)
    }

    /// How many times each delivered envelope was sent, in the order they were given.
    pub fn sends(&self) -> Vec<u32> {
        let inner = self.inner.lock().unwrap();
        inner.outbox.iter().map(|o| o.sent).collect()
    }

    /// Ping every socket every quarter of `limit`, and close one that has sent nothing (not
    /// even a pong) for `limit`: Slack's way with a client that stopped (a paused process).
    /// Applies to sockets opened from now on.
    pub fn drop_silent_sockets(&self, limit: Duration) {
        self.inner.lock().unwrap().silent_limit = Some(limit);
    }

    /// When each app's websockets were open (an app's opens after its hello was sent).
    pub fn spans(&self) -> Spans {
        self.inner.lock().unwrap().spans.clone()
    }

    /// Wait, up to the test deadline, until `cond` holds.
    pub async fn wait_for(&self, cond: impl Fn(&FakeSlack) -> bool) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while !cond(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "fake Slack: condition not reached in time"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

// ---- Files posted in chats ------------------------------------------------------------------

impl FakeSlack {
    /// A hosted file `id` with `bytes`, served at its `url_private_download` to any known app's
    /// bot token: the file object as Slack puts it in a message's `files`.
    pub fn file(&self, id: &str, name: &str, mimetype: &str, bytes: &[u8]) -> Value {
        let path = format!("T1-{id}/download/{name}");
        self.shelf().put(&path, bytes, mimetype);
        json!({
            "id": id, "created": 1_700_000_000, "timestamp": 1_700_000_000, "name": name,
            "title": name, "mimetype": mimetype, "filetype": name.rsplit('.').next(),
            "pretty_type": mimetype, "user": "U_HUMAN", "editable": false, "size": bytes.len(),
            "mode": "hosted", "is_external": false, "external_type": "", "is_public": true,
            "public_url_shared": false, "display_as_bot": false, "username": "",
            "url_private": format!("{}/files-pri/T1-{id}/{name}", self.base),
            "url_private_download": format!("{}/files-pri/{path}", self.base),
            "permalink": format!("https://fake.slack.com/files/U_HUMAN/{id}/{name}"),
        })
    }

    /// The files this fake serves, their fetches and failures (paths under `/files-pri/`).
    pub fn shelf(&self) -> Shelf {
        self.inner.lock().unwrap().files.clone()
    }
}

async fn file_download(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(path): Path<String>,
    headers: HeaderMap,
) -> Response {
    let (apps, shelf) = {
        let inner = inner.lock().unwrap();
        let apps: Vec<String> = inner
            .apps
            .keys()
            .map(|a| format!("Bearer xoxb-{a}"))
            .collect();
        (apps, inner.files.clone())
    };
    shelf.answer(&path, &headers, |auth| {
        auth.is_some_and(|auth| apps.iter().any(|a| a == auth))
    })
}

// ---- The Events API: posting to a webhook account's request URL -------------------------------

/// The instances serving an events-mode account behind its one request URL (a load balancer's
/// pool): their base URLs, changed as instances come and go.
#[derive(Clone, Default)]
pub struct Pool(Arc<Mutex<Vec<String>>>);

impl Pool {
    /// The instances' base URLs from now on.
    pub fn set(&self, bases: Vec<String>) {
        *self.0.lock().unwrap() = bases;
    }

    /// The `n`th instance, counting round the pool.
    fn at(&self, n: usize) -> Option<String> {
        let bases = self.0.lock().unwrap();
        (!bases.is_empty()).then(|| bases[n % bases.len()].clone())
    }
}

/// How long the fake waits before posting an event again after a failed post (Slack's own wait
/// is a minute and more; a tenth of a second keeps the tests short).
const POST_AGAIN_AFTER: Duration = Duration::from_millis(100);

impl FakeSlack {
    /// Post the Events API `body` as Slack does for an events-mode account: to `path`
    /// (`/hooks/slack/<account>`) at one of `pool`'s instances, signed with `secret`; while a
    /// post fails (no answer, or not a 200), again at the next instance, with
    /// `x-slack-retry-num` counting up, until one answers 200 (then [`FakeSlack::acked`] holds
    /// for `event_id`) or the test deadline passes.
    pub fn post_event(&self, pool: &Pool, path: &str, secret: &str, event_id: &str, body: &Value) {
        let first = {
            let mut inner = self.inner.lock().unwrap();
            inner.event_posts += 1;
            inner.event_posts
        };
        let (inner, pool) = (Arc::downgrade(&self.inner), pool.clone());
        let (path, secret, event_id) = (path.to_owned(), secret.to_owned(), event_id.to_owned());
        let body = body.to_string();
        tokio::spawn(async move {
            let http = reqwest::Client::builder()
                .timeout(DEADLINE)
                .build()
                .unwrap();
            let deadline = tokio::time::Instant::now() + DEADLINE;
            for attempt in 0.. {
                if let Some(base) = pool.at(first + attempt) {
                    let mut request = http
                        .post(format!("{base}{path}"))
                        .header("content-type", "application/json")
                        .body(body.clone());
                    for (k, v) in signed_headers(&secret, unix_now(), &body) {
                        request = request.header(k, v);
                    }
                    if attempt > 0 {
                        request = request
                            .header("x-slack-retry-num", attempt.to_string())
                            .header("x-slack-retry-reason", "http_error");
                    }
                    let ok = matches!(request.send().await, Ok(r) if r.status() == 200);
                    let Some(inner) = inner.upgrade() else { return };
                    let mut inner = inner.lock().unwrap();
                    if attempt > 0 {
                        inner.event_posts += 1;
                    }
                    if ok {
                        inner.acks.push(event_id);
                        return;
                    }
                }
                if tokio::time::Instant::now() >= deadline {
                    return;
                }
                tokio::time::sleep(POST_AGAIN_AFTER).await; // the platform's pace
            }
        });
    }

    /// How many Events API requests were posted to webhook accounts, posts again included.
    pub fn event_posts(&self) -> usize {
        self.inner.lock().unwrap().event_posts
    }
}

/// Events API headers for `body`, signed with `secret` at `timestamp` (Unix seconds).
pub fn signed_headers(secret: &str, timestamp: i64, body: &str) -> Vec<(&'static str, String)> {
    let ts = timestamp.to_string();
    vec![
        ("x-slack-request-timestamp", ts.clone()),
        (
            "x-slack-signature",
            baton_slack::signature::sign(secret, &ts, body.as_bytes()),
        ),
    ]
}

/// Now, in Unix seconds.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// An `events_api` envelope around an Events API body.
pub fn events_envelope(envelope_id: &str, retry_attempt: u32, body: Value) -> Value {
    json!({
        "envelope_id": envelope_id,
        "payload": body,
        "type": "events_api",
        "accepts_response_payload": false,
        "retry_attempt": retry_attempt,
        "retry_reason": if retry_attempt > 0 { "timeout" } else { "" },
    })
}

/// An Events API body: a `kind` (`message` / `app_mention`) event in `channel` at `ts`.
pub fn event_body(app_id: &str, event_id: &str, kind: &str, event: Value) -> Value {
    let mut event = event;
    event["type"] = kind.into();
    json!({
        "token": "verification-token",
        "team_id": "T1",
        "api_app_id": app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1_700_000_000,
    })
}

fn bearer(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
        .to_owned()
}

/// The bot scopes an app gets unless the test withholds some: what `baton setup slack` asks for.
const SCOPES: [&str; 10] = [
    "app_mentions:read",
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
    "chat:write",
    "files:read",
    "files:write",
    "commands",
    "assistant:write",
];

async fn auth_test(State(inner): State<Arc<Mutex<Inner>>>, headers: HeaderMap) -> Response {
    let token = bearer(&headers);
    let inner = inner.lock().unwrap();
    let app = token.strip_prefix("xoxb-").unwrap_or("");
    let scopes: Vec<&str> = SCOPES
        .into_iter()
        .filter(|s| !inner.withheld_scopes.iter().any(|w| w == s))
        .collect();
    match inner.apps.get(app) {
        Some((user, bot)) => (
            [("x-oauth-scopes", scopes.join(","))],
            Json(json!({
                "ok": true, "url": "https://fake.slack.com/", "team": "Fake", "user": app,
                "team_id": "T1", "user_id": user, "bot_id": bot,
            })),
        )
            .into_response(),
        None => Json(json!({ "ok": false, "error": "invalid_auth" })).into_response(),
    }
}

async fn connections_open(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
) -> Json<Value> {
    let token = bearer(&headers);
    let inner = inner.lock().unwrap();
    let app = token.strip_prefix("xapp-").unwrap_or("");
    if !inner.apps.contains_key(app) {
        return Json(json!({ "ok": false, "error": "invalid_auth" }));
    }
    if inner
        .withheld_scopes
        .iter()
        .any(|s| s == "connections:write")
    {
        return Json(
            json!({ "ok": false, "error": "missing_scope", "needed": "connections:write" }),
        );
    }
    let ws = inner.base.replacen("http://", "ws://", 1);
    Json(json!({ "ok": true, "url": format!("{ws}/ws/{app}") }))
}

async fn post_message(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    let rate_limited = inner.rate_limits > 0;
    let channel = body["channel"].as_str().unwrap_or("").to_owned();
    inner.posts.push(Post {
        token: bearer(&headers),
        channel: channel.clone(),
        thread_ts: body["thread_ts"].as_str().map(str::to_owned),
        text: body["text"].as_str().unwrap_or("").to_owned(),
        rate_limited,
    });
    if rate_limited {
        inner.rate_limits -= 1;
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            Json(json!({ "ok": false, "error": "ratelimited" })),
        )
            .into_response();
    }
    inner.next_ts += 1;
    let n = inner.next_ts;
    let ts = format!("{}.{:06}", n / 1_000_000, n % 1_000_000);
    inner.seen.push(Seen::Post {
        id: ts.clone(),
        text: body["text"].as_str().unwrap_or("").to_owned(),
    });
    Json(json!({
        "ok": true, "channel": channel, "ts": ts,
        "message": { "type": "message", "text": body["text"], "user": "U_BOT", "ts": ts, "bot_id": "B_BOT" },
    }))
    .into_response()
}

async fn update_message(
    State(inner): State<Arc<Mutex<Inner>>>,
    Json(body): Json<Value>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    if inner.update_limits > 0 {
        inner.update_limits -= 1;
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            Json(json!({ "ok": false, "error": "ratelimited" })),
        )
            .into_response();
    }
    let ts = body["ts"].as_str().unwrap_or("").to_owned();
    inner.seen.push(Seen::Edit {
        id: ts.clone(),
        text: body["text"].as_str().unwrap_or("").to_owned(),
    });
    // The shape Slack documents for chat.update (slack-morphism needs `message`).
    Json(
        json!({ "ok": true, "channel": body["channel"], "ts": ts, "text": body["text"],
        "message": { "text": body["text"], "user": "U_BOT", "bot_id": "B_BOT" } }),
    )
    .into_response()
}

/// The next message `ts`.
fn next_ts(inner: &mut Inner) -> String {
    inner.next_ts += 1;
    let n = inner.next_ts;
    format!("{}.{:06}", n / 1_000_000, n % 1_000_000)
}

fn slack_error(error: &str) -> Response {
    Json(json!({ "ok": false, "error": error })).into_response()
}

/// The text a streaming call adds: its `markdown_text`, then its `markdown_text` chunks.
fn streamed_text(body: &Value) -> String {
    let mut text = body["markdown_text"].as_str().unwrap_or("").to_owned();
    for chunk in body["chunks"].as_array().into_iter().flatten() {
        if chunk["type"] == "markdown_text" {
            text.push_str(chunk["text"].as_str().unwrap_or(""));
        }
    }
    text
}

fn opt(body: &Value, key: &str) -> Option<String> {
    body[key].as_str().map(str::to_owned)
}

/// `chat.startStream`: a streamed reply, which must be in a thread and, in a channel, name
/// its recipient.
async fn start_stream(State(inner): State<Arc<Mutex<Inner>>>, Json(body): Json<Value>) -> Response {
    let mut inner = inner.lock().unwrap();
    if inner.no_streams {
        return slack_error("unknown_method");
    }
    let channel = body["channel"].as_str().unwrap_or("").to_owned();
    if body["thread_ts"].as_str().is_none() {
        return slack_error("invalid_arguments");
    }
    if channel.starts_with('C') {
        if body["recipient_user_id"].as_str().is_none() {
            return slack_error("missing_recipient_user_id");
        }
        if body["recipient_team_id"].as_str().is_none() {
            return slack_error("missing_recipient_team_id");
        }
    }
    let ts = next_ts(&mut inner);
    let text = streamed_text(&body);
    inner.streams.insert(ts.clone(), (text.clone(), true));
    inner.seen.push(Seen::Post {
        id: ts.clone(),
        text: text.clone(),
    });
    inner.stream_calls.push(StreamCall {
        method: "chat.startStream",
        ts: ts.clone(),
        text,
        thread_ts: opt(&body, "thread_ts"),
        recipient_user_id: opt(&body, "recipient_user_id"),
        recipient_team_id: opt(&body, "recipient_team_id"),
    });
    Json(json!({ "ok": true, "channel": channel, "ts": ts })).into_response()
}

/// `chat.appendStream` and `chat.stopStream`: add to a live stream (and end it).
fn grow_stream(inner: &Mutex<Inner>, body: &Value, method: &'static str) -> Response {
    let mut inner = inner.lock().unwrap();
    let ts = body["ts"].as_str().unwrap_or("").to_owned();
    let added = streamed_text(body);
    let Some((text, live)) = inner.streams.get_mut(&ts) else {
        return slack_error("message_not_found");
    };
    if !*live {
        return slack_error("message_not_in_streaming_state");
    }
    text.push_str(&added);
    let now = text.clone();
    *live = method == "chat.appendStream";
    if !added.is_empty() {
        inner.seen.push(Seen::Edit {
            id: ts.clone(),
            text: now.clone(),
        });
    }
    inner.stream_calls.push(StreamCall {
        method,
        ts: ts.clone(),
        text: added,
        thread_ts: None,
        recipient_user_id: None,
        recipient_team_id: None,
    });
    let mut answer = json!({ "ok": true, "channel": body["channel"], "ts": ts });
    if method == "chat.stopStream" {
        answer["message"] =
            json!({ "type": "message", "text": now, "user": "U_BOT", "ts": ts, "bot_id": "B_BOT" });
    }
    Json(answer).into_response()
}

async fn append_stream(
    State(inner): State<Arc<Mutex<Inner>>>,
    Json(body): Json<Value>,
) -> Response {
    grow_stream(&inner, &body, "chat.appendStream")
}

async fn stop_stream(State(inner): State<Arc<Mutex<Inner>>>, Json(body): Json<Value>) -> Response {
    grow_stream(&inner, &body, "chat.stopStream")
}

async fn delete_message(
    State(inner): State<Arc<Mutex<Inner>>>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let ts = body["ts"].as_str().unwrap_or("").to_owned();
    inner
        .lock()
        .unwrap()
        .seen
        .push(Seen::Delete { id: ts.clone() });
    Json(json!({ "ok": true, "channel": body["channel"], "ts": ts }))
}

async fn set_status(
    State(inner): State<Arc<Mutex<Inner>>>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let mut inner = inner.lock().unwrap();
    if inner.no_status_scope {
        return Json(json!({ "ok": false, "error": "missing_scope", "needed": "assistant:write" }));
    }
    let at = body["thread_ts"].as_str().unwrap_or("").to_owned();
    let status = body["status"].as_str().unwrap_or("").to_owned();
    // A new status on a thread whose status shows already changes its words, not whether
    // the bot is seen working.
    let showing = inner
        .statuses
        .iter()
        .rev()
        .find(|(thread, _)| *thread == at)
        .is_some_and(|(_, status)| !status.is_empty());
    inner.statuses.push((at.clone(), status.clone()));
    match (status.is_empty(), showing) {
        (true, _) => inner.seen.push(Seen::TypingOff { at }),
        (false, false) => inner.seen.push(Seen::TypingOn { at }),
        (false, true) => {}
    }
    Json(json!({ "ok": true }))
}

async fn response_url(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> &'static str {
    let text = body["text"].as_str().unwrap_or("").to_owned();
    inner.lock().unwrap().responses.push((id, text));
    "ok"
}

async fn socket(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(app): Path<String>,
    upgrade: WebSocketUpgrade,
) -> Response {
    upgrade.on_upgrade(move |ws| serve_socket(inner, app, ws))
}

/// Offer every unacknowledged delivered envelope again once [`REDELIVER_AFTER`] has passed,
/// on its app's newest socket; ends with the fake.
async fn redeliver(inner: std::sync::Weak<Mutex<Inner>>) {
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let Some(inner) = inner.upgrade() else { return };
        let mut inner = inner.lock().unwrap();
        let Inner {
            outbox,
            sockets,
            acks,
            ..
        } = &mut *inner;
        let now = std::time::Instant::now();
        for offered in outbox.iter_mut() {
            let due = offered
                .last_sent
                .is_none_or(|at| now.duration_since(at) >= REDELIVER_AFTER);
            if !due || acks.contains(&offered.envelope_id) {
                continue;
            }
            let Some(live) = sockets.get(&offered.app).and_then(|open| open.last()) else {
                continue;
            };
            let frame = events_envelope(&offered.envelope_id, offered.sent, offered.body.clone());
            if live.tx.send(frame.to_string()).is_ok() {
                offered.sent += 1;
                offered.last_sent = Some(now);
            }
        }
    }
}

/// A websocket's end: no longer open for its app.
fn closed(inner: &Mutex<Inner>, app: &str, id: SpanId) {
    let mut inner = inner.lock().unwrap();
    if let Some(open) = inner.sockets.get_mut(app) {
        open.retain(|live| live.id != id);
    }
    inner.spans.close(id);
}

async fn serve_socket(inner: Arc<Mutex<Inner>>, app: String, mut ws: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let hello = json!({"type": "hello", "num_connections": 1,
        "debug_info": {"host": "fake", "approximate_connection_time": 18060}, "connection_info": {"app_id": "A1"}});
    if ws
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    let (id, silent_limit) = {
        let mut inner = inner.lock().unwrap();
        *inner.connects.entry(app.clone()).or_default() += 1;
        let id = inner.spans.open(&app);
        inner
            .sockets
            .entry(app.clone())
            .or_default()
            .push(Live { id, tx });
        (id, inner.silent_limit)
    };
    // Without a limit, an interval that is never polled.
    let every = silent_limit.map_or(Duration::from_secs(3600), |limit| limit / 4);
    let mut ping = tokio::time::interval(every);
    let mut heard = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = ping.tick(), if silent_limit.is_some() => {
                if silent_limit.is_some_and(|limit| heard.elapsed() >= limit) {
                    closed(&inner, &app, id);
                    return;
                }
                if ws.send(Message::Ping(Vec::new().into())).await.is_err() {
                    closed(&inner, &app, id);
                    return;
                }
            }
            out = rx.recv() => {
                let Some(out) = out else {
                    closed(&inner, &app, id);
                    return;
                };
                let is_disconnect = out.contains("\"disconnect\"");
                if ws.send(Message::Text(out.into())).await.is_err() {
                    closed(&inner, &app, id);
                    return;
                }
                if is_disconnect {
                    let _ = ws.send(Message::Close(None)).await;
                    closed(&inner, &app, id);
                    return;
                }
            }
            incoming = ws.recv() => {
                heard = std::time::Instant::now();
                let Some(Ok(Message::Text(text))) = incoming else {
                    if matches!(incoming, None | Some(Err(_)) | Some(Ok(Message::Close(_)))) {
                        closed(&inner, &app, id);
                        return;
                    }
                    continue;
                };
                if let Ok(v) = serde_json::from_str::<Value>(text.as_str())
                    && let Some(id) = v["envelope_id"].as_str()
                {
                    inner.lock().unwrap().acks.push(id.to_owned());
                }
            }
        }
    }
}

// ---- Files to chats: the external upload (getUploadURLExternal, the bytes, complete) ----------

async fn upload_url(
    State(inner): State<Arc<Mutex<Inner>>>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    inner.upload_calls += 1;
    if inner.upload_limits > 0 {
        inner.upload_limits -= 1;
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            Json(json!({ "ok": false, "error": "ratelimited" })),
        )
            .into_response();
    }
    let (Some(name), Some(_length)) = (query.get("filename"), query.get("length")) else {
        return Json(json!({ "ok": false, "error": "invalid_arguments" })).into_response();
    };
    inner.next_ts += 1;
    let file = format!("F{}", inner.next_ts);
    inner
        .pending_uploads
        .insert(file.clone(), (name.clone(), None));
    let url = format!("{}/upload/{file}", inner.base);
    Json(json!({ "ok": true, "upload_url": url, "file_id": file })).into_response()
}

async fn upload_bytes(
    State(inner): State<Arc<Mutex<Inner>>>,
    Path(file): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let mut inner = inner.lock().unwrap();
    match inner.pending_uploads.get_mut(&file) {
        Some(pending) => {
            pending.1 = Some(body.to_vec());
            (StatusCode::OK, format!("OK - {}", body.len())).into_response()
        }
        None => (StatusCode::NOT_FOUND, "no such upload").into_response(),
    }
}

async fn complete_upload(
    State(inner): State<Arc<Mutex<Inner>>>,
    Json(body): Json<Value>,
) -> Json<Value> {
    let mut inner = inner.lock().unwrap();
    let Some(file) = body["files"][0]["id"].as_str().map(str::to_owned) else {
        return Json(json!({ "ok": false, "error": "invalid_arguments" }));
    };
    let Some((name, Some(bytes))) = inner.pending_uploads.remove(&file) else {
        return Json(json!({ "ok": false, "error": "file_not_found" }));
    };
    inner.uploads.push(Upload {
        channel: body["channel_id"].as_str().unwrap_or("").to_owned(),
        thread: body["thread_ts"].as_str().map(str::to_owned),
        name: name.clone(),
        bytes,
        kind: "file".into(),
    });
    Json(
        json!({ "ok": true, "files": [{ "id": file, "title": body["files"][0]["title"], "name": name }] }),
    )
}
