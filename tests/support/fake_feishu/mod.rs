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
use super::spans::Spans;
use super::uploads::Upload;

mod api;
mod cards;
mod events;
mod socket;

use self::api::{
    Shared, add_reaction, bot_info, create, delete_reaction, get_message, is_in_chat, recall,
    reply, resource_download, token, update, upload_file, upload_image,
};
// Each test binary uses some of the builders.
#[allow(unused_imports)]
pub use self::events::{file_event, message_event, signed_headers, webhook_body};
use self::socket::{endpoint, push, socket};

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
    /// When each app had a websocket open.
    spans: Spans,
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
    /// CardKit card entities by id, and how many times a posted one's text changed.
    cards: HashMap<String, cards::Card>,
    card_updates: usize,
    /// Creating a card is refused (no CardKit scope).
    no_cards: bool,
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
            .route("/open-apis/cardkit/v1/cards", post(cards::create_card))
            .route(
                "/open-apis/cardkit/v1/cards/id_convert",
                post(cards::id_convert),
            )
            .route(
                "/open-apis/cardkit/v1/cards/{card}/elements/{element}/content",
                put(cards::card_text),
            )
            .route(
                "/open-apis/cardkit/v1/cards/{card}/settings",
                axum::routing::patch(cards::card_settings),
            )
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

    /// When each app (by name) had a websocket open.
    pub fn spans(&self) -> Spans {
        self.inner.lock().unwrap().spans.clone()
    }

    /// Whether `name` has a websocket open.
    pub fn socket_open(&self, name: &str) -> bool {
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

    /// [`FakeFeishu::push_event`] when `name` has a websocket open, returning whether it had:
    /// like Feishu, the fake keeps nothing for a long connection that is gone.
    pub fn offer_event(&self, name: &str, event: &Value) -> bool {
        let mut inner = self.inner.lock().unwrap();
        let open = inner
            .sockets
            .get(name)
            .is_some_and(|(_, tx)| !tx.is_closed());
        if open {
            push(&mut inner, name, event, 1);
        }
        open
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

fn count(map: &HashMap<String, usize>, name: &str) -> usize {
    map.get(name).copied().unwrap_or(0)
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
