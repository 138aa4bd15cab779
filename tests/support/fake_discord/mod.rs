//! A fake Discord on 127.0.0.1: `GET /api/v10/gateway`, the gateway websocket (HELLO,
//! IDENTIFY/READY, heartbeat ACK, RESUME with replay, RECONNECT, INVALID_SESSION), Create
//! Message, interaction callbacks and webhook edits, and command registration — recording every
//! call with the token it carried, with scriptable 429s.
//!
//! Like the real one, it shows every message posted in its one guild to every bot connected:
//! a bot sees its own replies and the other bots' replies as MESSAGE_CREATE. Each bot has a
//! session with a sequence log; a dispatch made while the bot is disconnected waits in the log
//! and is replayed when the bot RESUMEs, as Discord does.
//!
//! Payloads are built on the official samples in `adapters/discord/fixtures/`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::gateway::DEADLINE;
use super::multipart;
use super::seen::{Seen, Timeline};
use super::shelf::Shelf;
use super::spans::{SpanId, Spans};
use super::uploads::Upload;

mod api;
mod socket;

use self::api::{
    attachment_download, create_message_or_upload, current_user, delete_message, edit_message,
    edit_original, followup, gateway_bot, gateway_url, get_channel, interaction_callback,
    register_global, register_guild, trigger_typing,
};
use self::socket::socket;

/// The one guild every bot is in.
pub const GUILD: &str = "290926798626357999";
/// How often the fake asks for heartbeats, short so tests see them answered.
const HEARTBEAT_MS: u64 = 1000;

/// One Create Message call as received.
#[derive(Debug, Clone)]
pub struct Post {
    /// The bot token it carried (`Authorization: Bot <token>`).
    pub token: String,
    /// The channel in the path.
    pub channel: String,
    /// The JSON body.
    pub body: Value,
    /// Whether the fake answered 429 to it.
    pub rate_limited: bool,
}

impl Post {
    /// `content`.
    pub fn text(&self) -> &str {
        self.body["content"].as_str().unwrap_or("")
    }

    /// `message_reference.message_id`.
    pub fn replies_to(&self) -> Option<&str> {
        self.body["message_reference"]["message_id"].as_str()
    }
}

/// One call to an interaction endpoint: the callback, or a webhook edit or follow-up.
#[derive(Debug, Clone)]
pub struct InteractionCall {
    /// `callback`, `edit` or `followup`.
    pub kind: &'static str,
    /// The interaction id (callback) or application id (webhooks).
    pub id: String,
    /// The interaction token in the path.
    pub token: String,
    /// Whether it carried an `Authorization` header (it should not need one).
    pub authorized: bool,
    /// The JSON body.
    pub body: Value,
}

#[derive(Clone)]
struct Bot {
    name: String,
    user_id: String,
}

#[derive(Default)]
struct Session {
    id: String,
    seq: u64,
    log: Vec<(u64, String)>,
    socket: Option<mpsc::UnboundedSender<Outgoing>>,
    generation: u64,
}

enum Outgoing {
    Frame(String),
    Close(u16),
}

#[derive(Default)]
struct Inner {
    base: String,
    /// token -> bot
    bots: HashMap<String, Bot>,
    /// user id -> session
    sessions: HashMap<String, Session>,
    gateway_requests: usize,
    identifies: HashMap<String, usize>,
    resumes: HashMap<String, usize>,
    heartbeats: usize,
    posts: Vec<Post>,
    interaction_calls: Vec<InteractionCall>,
    registrations: Vec<(String, String, Value)>,
    messages: HashMap<String, Value>,
    /// author id -> the last message id it posted
    last_by: HashMap<String, String>,
    /// thread -> parent channel
    threads: HashMap<String, String>,
    /// `GET /channels/<id>` calls
    channel_lookups: usize,
    /// DM channel -> the bot in it
    dm_channels: HashMap<String, String>,
    rate_limits: VecDeque<(f64, bool)>,
    /// The next edits answered 429 with `retry_after` 1 s.
    edit_limits: u32,
    next_id: u64,
    seen: Timeline,
    // Files to chats: Create Message calls with files (multipart), and how many of the next
    // get 429.
    uploads: Vec<Upload>,
    upload_limits: u32,
    upload_calls: usize,
    /// Attachments served at `/attachments/...` (signed CDN links: no token needed).
    files: Shelf,
    /// When each bot (by user id) had a gateway socket that identified or resumed.
    spans: Spans,
}

impl Inner {
    fn snowflake(&mut self) -> String {
        self.next_id += 1;
        // Ids made "now", so their timestamps are sensible.
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        (((ms - 1_420_070_400_000) << 22) | (self.next_id & 0x3f_ffff)).to_string()
    }

    fn bot_by_user(&self, user: &str) -> Option<Bot> {
        self.bots.values().find(|b| b.user_id == user).cloned()
    }

    /// Log a dispatch for `user`'s session and send it if the bot is connected.
    fn dispatch(&mut self, user: &str, t: &str, d: &Value) {
        let Some(session) = self.sessions.get_mut(user) else {
            return;
        };
        session.seq += 1;
        let frame = json!({ "op": 0, "s": session.seq, "t": t, "d": d }).to_string();
        session.log.push((session.seq, frame.clone()));
        if let Some(tx) = &session.socket {
            let _ = tx.send(Outgoing::Frame(frame));
        }
    }

    /// Show a message to every bot (guild) or one bot (DM).
    fn broadcast(&mut self, message: &Value, only: Option<&str>) {
        let users: Vec<String> = match only {
            Some(u) => vec![u.to_owned()],
            None => self.sessions.keys().cloned().collect(),
        };
        for user in users {
            self.dispatch(&user, "MESSAGE_CREATE", message);
        }
    }
}

/// A running fake Discord.
#[derive(Clone)]
pub struct FakeDiscord {
    /// `http://127.0.0.1:PORT`: an account's `api_url`.
    pub api_url: String,
    inner: Arc<Mutex<Inner>>,
}

/// A user object.
fn user(id: &str, name: &str, bot: bool) -> Value {
    json!({ "id": id, "username": name, "global_name": name, "discriminator": "0",
            "avatar": null, "bot": bot, "public_flags": 0 })
}

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/adapters/discord/fixtures/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Parse `<@id>` / `<@!id>` out of content, as Discord fills `mentions`.
fn mentioned_ids(content: &str) -> Vec<String> {
    let mut ids = Vec::new();
    let mut rest = content;
    while let Some(start) = rest.find("<@") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('>') else { break };
        let id = after[..end].trim_start_matches('!');
        if !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) {
            ids.push(id.to_owned());
        }
        rest = &after[end + 1..];
    }
    ids
}

impl FakeDiscord {
    /// Start on 127.0.0.1:0.
    pub async fn start() -> FakeDiscord {
        let inner = Arc::new(Mutex::new(Inner {
            next_id: 1,
            ..Inner::default()
        }));
        let app = Router::new()
            .route("/api/v10/gateway", get(gateway_url))
            .route("/api/v10/gateway/bot", get(gateway_bot))
            .route("/api/v10/users/@me", get(current_user))
            .route("/gateway", get(socket))
            .route("/api/v10/channels/{channel}", get(get_channel))
            .route(
                "/api/v10/channels/{channel}/messages",
                post(create_message_or_upload),
            )
            .route(
                "/api/v10/channels/{channel}/messages/{id}",
                patch(edit_message).delete(delete_message),
            )
            .route("/api/v10/channels/{channel}/typing", post(trigger_typing))
            .route(
                "/api/v10/interactions/{id}/{token}/callback",
                post(interaction_callback),
            )
            .route(
                "/api/v10/webhooks/{app}/{token}/messages/@original",
                patch(edit_original),
            )
            .route("/api/v10/webhooks/{app}/{token}", post(followup))
            .route("/attachments/{*path}", get(attachment_download))
            .route("/api/v10/applications/{app}/commands", put(register_global))
            .route(
                "/api/v10/applications/{app}/guilds/{guild}/commands",
                put(register_guild),
            )
            .with_state(Arc::clone(&inner));
        let base = super::turns::serve(app).await;
        inner.lock().unwrap().base = base.clone();
        FakeDiscord {
            api_url: base,
            inner,
        }
    }

    /// Register a bot application: its token, its bot user's id and name.
    pub fn bot(&self, token: &str, user_id: &str, name: &str) {
        self.inner.lock().unwrap().bots.insert(
            token.to_owned(),
            Bot {
                name: name.to_owned(),
                user_id: user_id.to_owned(),
            },
        );
    }

    /// How many times `GET /api/v10/gateway` was asked.
    pub fn gateway_requests(&self) -> usize {
        self.inner.lock().unwrap().gateway_requests
    }

    /// How many IDENTIFYs the bot `user` sent.
    pub fn identifies(&self, user: &str) -> usize {
        let inner = self.inner.lock().unwrap();
        inner.identifies.get(user).copied().unwrap_or(0)
    }

    /// How many RESUMEs the bot `user` sent.
    pub fn resumes(&self, user: &str) -> usize {
        let inner = self.inner.lock().unwrap();
        inner.resumes.get(user).copied().unwrap_or(0)
    }

    /// Heartbeats received (each answered with op 11).
    pub fn heartbeats(&self) -> usize {
        self.inner.lock().unwrap().heartbeats
    }

    /// Whether `user` has a live, identified (or resumed) socket.
    pub fn connected(&self, user: &str) -> bool {
        let inner = self.inner.lock().unwrap();
        inner
            .sessions
            .get(user)
            .and_then(|s| s.socket.as_ref())
            .is_some_and(|tx| !tx.is_closed())
    }

    /// When each bot (by user id) had a gateway socket open, from its IDENTIFY or RESUME.
    pub fn spans(&self) -> Spans {
        self.inner.lock().unwrap().spans.clone()
    }

    /// Every Create Message call, 429s included, in order.
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

    /// The id of the last message `user` posted.
    pub fn last_message_by(&self, user: &str) -> Option<String> {
        self.inner.lock().unwrap().last_by.get(user).cloned()
    }

    /// Every interaction callback, edit and follow-up, in order.
    pub fn interaction_calls(&self) -> Vec<InteractionCall> {
        self.inner.lock().unwrap().interaction_calls.clone()
    }

    /// Every command registration: (token, path, body).
    pub fn registrations(&self) -> Vec<(String, String, Value)> {
        self.inner.lock().unwrap().registrations.clone()
    }

    /// Posts, edits and typing (`TypingOn` per trigger, at the channel), in order.
    pub fn seen(&self) -> Timeline {
        self.inner.lock().unwrap().seen.clone()
    }

    /// The next `n` Create Message calls with files get 429 with `retry_after` 1 s.
    pub fn rate_limit_uploads(&self, n: u32) {
        self.inner.lock().unwrap().upload_limits = n;
    }

    /// The files posted (multipart Create Message), in order.
    pub fn uploads(&self) -> Vec<Upload> {
        self.inner.lock().unwrap().uploads.clone()
    }

    /// How many Create Message calls with files came, 429s included.
    pub fn upload_calls(&self) -> usize {
        self.inner.lock().unwrap().upload_calls
    }

    /// The next `n` message edits get 429 with `retry_after` 1 s.
    pub fn rate_limit_edits(&self, n: u32) {
        self.inner.lock().unwrap().edit_limits = n;
    }

    /// The next `n` Create Message calls get 429 with this `retry_after` (seconds).
    pub fn rate_limit_next(&self, n: usize, retry_after: f64, global: bool) {
        let mut inner = self.inner.lock().unwrap();
        for _ in 0..n {
            inner.rate_limits.push_back((retry_after, global));
        }
    }

    /// A human (or any user) says `content` in guild channel `channel`; every bot sees it.
    /// `reply_to` makes it a reply (type 19) to that message. Returns the message id.
    pub fn say(
        &self,
        author: (&str, &str),
        channel: &str,
        content: &str,
        reply_to: Option<&str>,
    ) -> String {
        let mut inner = self.inner.lock().unwrap();
        let message = build_message(
            &mut inner,
            user(author.0, author.1, false),
            channel,
            content,
            reply_to,
            true,
        );
        inner.broadcast(&message, None);
        message["id"].as_str().unwrap().to_owned()
    }

    /// A message from a webhook or an outside bot (`author.bot`), shown to every bot.
    pub fn say_as_bot(&self, author: (&str, &str), channel: &str, content: &str) -> String {
        let mut inner = self.inner.lock().unwrap();
        let message = build_message(
            &mut inner,
            user(author.0, author.1, true),
            channel,
            content,
            None,
            true,
        );
        inner.broadcast(&message, None);
        message["id"].as_str().unwrap().to_owned()
    }

    /// A direct message from `author` to the bot `to` in DM channel `channel`.
    pub fn dm(&self, author: (&str, &str), to: &str, channel: &str, content: &str) -> String {
        let mut inner = self.inner.lock().unwrap();
        inner.dm_channels.insert(channel.to_owned(), to.to_owned());
        let message = build_message(
            &mut inner,
            user(author.0, author.1, false),
            channel,
            content,
            None,
            false,
        );
        inner.broadcast(&message, Some(to));
        message["id"].as_str().unwrap().to_owned()
    }

    /// `user` runs `/baton` with `options` in `channel`; only the bot `to` gets the interaction.
    /// Returns (interaction id, token).
    pub fn command(
        &self,
        to: &str,
        user_id: &str,
        channel: &str,
        options: Value,
    ) -> (String, String) {
        let mut inner = self.inner.lock().unwrap();
        let id = inner.snowflake();
        let token = format!("itoken-{id}");
        let mut d = fixture("gw_dispatch_interaction_create_baton")["d"].clone();
        d["id"] = id.clone().into();
        d["token"] = token.clone().into();
        // The fake's applications have the id of their bot user.
        d["application_id"] = to.into();
        d["guild_id"] = GUILD.into();
        d["channel_id"] = channel.into();
        d["channel"]["id"] = channel.into();
        d["channel"]["guild_id"] = GUILD.into();
        d["member"]["user"] = user(user_id, user_id, false);
        d["data"]["options"] = options;
        inner.dispatch(to, "INTERACTION_CREATE", &d);
        (id, token)
    }

    /// A public thread `thread` is created under `parent`: every bot gets THREAD_CREATE.
    pub fn thread(&self, thread: &str, parent: &str) {
        let mut inner = self.inner.lock().unwrap();
        let d = json!({
            "id": thread, "type": 11, "guild_id": GUILD, "parent_id": parent,
            "name": "a thread", "owner_id": "1", "message_count": 0, "member_count": 1,
            "rate_limit_per_user": 0, "flags": 0, "total_message_sent": 0,
            "thread_metadata": { "archived": false, "auto_archive_duration": 1440,
                "archive_timestamp": "2025-01-01T00:00:00.000000+00:00", "locked": false },
            "newly_created": true
        });
        inner.threads.insert(thread.to_owned(), parent.to_owned());
        let users: Vec<String> = inner.sessions.keys().cloned().collect();
        for user in users {
            inner.dispatch(&user, "THREAD_CREATE", &d);
        }
    }

    /// How many `GET /channels/<id>` calls were made.
    pub fn channel_lookups(&self) -> usize {
        self.inner.lock().unwrap().channel_lookups
    }

    /// Send op 7 RECONNECT to `user` and close its socket, as Discord does.
    pub fn reconnect(&self, user: &str) {
        let inner = self.inner.lock().unwrap();
        if let Some(tx) = inner.sessions.get(user).and_then(|s| s.socket.as_ref()) {
            let _ = tx.send(Outgoing::Frame(json!({ "op": 7, "d": null }).to_string()));
            let _ = tx.send(Outgoing::Close(4000));
        }
    }

    /// Send op 9 INVALID_SESSION (`d` = `resumable`) to `user`.
    pub fn invalid_session(&self, user: &str, resumable: bool) {
        let mut inner = self.inner.lock().unwrap();
        if let Some(session) = inner.sessions.get_mut(user) {
            if !resumable {
                session.id = String::new();
            }
            if let Some(tx) = &session.socket {
                let _ = tx.send(Outgoing::Frame(
                    json!({ "op": 9, "d": resumable }).to_string(),
                ));
            }
        }
    }

    /// Wait, up to the test deadline, until `cond` holds.
    pub async fn wait_for(&self, what: &str, cond: impl Fn(&FakeDiscord) -> bool) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while !cond(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "fake Discord: {what} not reached in time"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

// ---- Files posted in chats ------------------------------------------------------------------

impl FakeDiscord {
    /// [`FakeDiscord::say`] with attachments `(filename, content_type, bytes)`, each served at
    /// its `url` on this fake. Returns the message id.
    pub fn say_with_files(
        &self,
        author: (&str, &str),
        channel: &str,
        content: &str,
        files: &[(&str, &str, &[u8])],
    ) -> String {
        let mut inner = self.inner.lock().unwrap();
        let mut message = build_message(
            &mut inner,
            user(author.0, author.1, false),
            channel,
            content,
            None,
            true,
        );
        let mut attachments = Vec::new();
        for (filename, content_type, bytes) in files {
            let id = inner.snowflake();
            let path = format!("{channel}/{id}/{filename}");
            inner.files.put(&path, bytes, content_type);
            // Discord's CDN links are signed in their query (`ex`, `is`, `hm`).
            let url = format!("{}/attachments/{path}?ex=1&is=2&hm=3", inner.base);
            attachments.push(json!({
                "id": id, "filename": filename, "size": bytes.len(), "url": url,
                "proxy_url": url, "content_type": content_type,
            }));
        }
        message["attachments"] = Value::Array(attachments);
        inner.broadcast(&message, None);
        message["id"].as_str().unwrap().to_owned()
    }

    /// The attachments this fake serves, their fetches and failures (paths under
    /// `/attachments/`).
    pub fn shelf(&self) -> Shelf {
        self.inner.lock().unwrap().files.clone()
    }
}
/// A MESSAGE_CREATE payload on the official sample, stored so replies can reference it.
fn build_message(
    inner: &mut Inner,
    author: Value,
    channel: &str,
    content: &str,
    reply_to: Option<&str>,
    in_guild: bool,
) -> Value {
    let id = inner.snowflake();
    if let Some(author_id) = author["id"].as_str() {
        inner.last_by.insert(author_id.to_owned(), id.clone());
    }
    let mut m = fixture("gw_dispatch_message_create_guild_mention")["d"].clone();
    m["id"] = id.clone().into();
    m["channel_id"] = channel.into();
    m["content"] = content.into();
    m["author"] = author;
    m["nonce"] = Value::Null;
    m["timestamp"] = "2025-01-01T00:00:00.000000+00:00".into();
    m["mentions"] = Value::Array(
        mentioned_ids(content)
            .iter()
            .map(|u| match inner.bot_by_user(u) {
                Some(bot) => user(&bot.user_id, &bot.name, true),
                None => user(u, u, false),
            })
            .collect(),
    );
    let obj = m.as_object_mut().unwrap();
    if in_guild {
        obj.insert("guild_id".into(), GUILD.into());
    } else {
        obj.remove("guild_id");
        obj.remove("member");
        obj.insert("channel_type".into(), 1.into());
    }
    if let Some(parent) = reply_to {
        obj.insert("type".into(), 19.into());
        obj.insert(
            "message_reference".into(),
            json!({ "type": 0, "channel_id": channel, "guild_id": GUILD, "message_id": parent }),
        );
        let referenced = inner.messages.get(parent).cloned().unwrap_or(Value::Null);
        obj.insert("referenced_message".into(), referenced);
    }
    // Stored without its own referenced message, as Discord nests only one level.
    let mut stored = m.clone();
    stored.as_object_mut().unwrap().remove("referenced_message");
    inner.messages.insert(id, stored);
    m
}
