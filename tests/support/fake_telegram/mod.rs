//! A fake Telegram Bot API on 127.0.0.1: `getMe`, `getUpdates` long polling (updates confirmed
//! by a higher offset, as Telegram does), `setWebhook` (then updates are POSTed to the webhook
//! with the secret header), `sendMessage`, `sendMessageDraft` (private chats only), `editMessageText`, `deleteMessage`,
//! `sendChatAction`, `setMyCommands`, `deleteWebhook`, `getFile` and file downloads,
//! `sendDocument` and `sendPhoto` (multipart uploads, recorded as [`Upload`]s), answering
//! with Telegram's own error shapes: 401 `Unauthorized` for an unknown token, 429 with
//! `parameters.retry_after`, 400 "message is too long" over 4096 characters and 400 "message is
//! not modified" for an edit that changes nothing.
//!
//! Bots are registered with [`FakeTelegram::bot`]: token `tok-<name>`, a user id and a
//! `@username`. Every bot is in every group chat, with Group Privacy off (it gets every
//! message). With [`FakeTelegram::bot_to_bot`] on (Bot API 10's bot-to-bot mode), a bot's post in
//! a group is delivered to the other bots as an update.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::gateway::DEADLINE;
use super::seen::Timeline;
use super::uploads::Upload;

mod api;

/// One call that tried to post a message, as received.
#[derive(Debug, Clone)]
pub struct Post {
    /// The bot whose token it carried.
    pub bot: String,
    /// `chat_id`.
    pub chat: i64,
    /// `text`.
    pub text: String,
    /// `reply_parameters.message_id`.
    pub quotes: Option<i64>,
    /// `message_thread_id`.
    pub topic: Option<i64>,
    /// The new message id; `None` when it was refused (or never answered).
    pub message_id: Option<i64>,
    /// The error code answered, when refused.
    pub refused: Option<u16>,
}

/// One `sendChatAction`, and when it came.
#[derive(Debug, Clone)]
pub struct ChatAction {
    /// The bot.
    pub bot: String,
    /// `chat_id`.
    pub chat: i64,
    /// `action`.
    pub action: String,
    /// When.
    pub at: tokio::time::Instant,
}

/// One `sendMessageDraft`.
#[derive(Debug, Clone)]
pub struct Draft {
    /// `chat_id`.
    pub chat: i64,
    /// `draft_id`.
    pub draft_id: i64,
    /// `text`.
    pub text: String,
}

struct Bot {
    name: String,
    id: i64,
    username: String,
    /// Updates not yet confirmed, oldest first.
    queue: VecDeque<Value>,
    /// `(url, secret)` once `setWebhook` was called.
    webhook: Option<(String, String)>,
    get_updates: usize,
    commands: Option<Value>,
}

#[derive(Default)]
struct Inner {
    bots: Vec<Bot>,
    next_update: i64,
    /// The next message id per chat.
    next_message: HashMap<i64, i64>,
    /// The author (user id, first name, is_bot, username) of each message, by (chat, id).
    authors: HashMap<(i64, i64), Value>,
    texts: HashMap<(i64, i64), String>,
    posts: Vec<Post>,
    edits: Vec<(i64, i64, String)>,
    drafts: Vec<Draft>,
    /// `(chat, user)` pairs where the user is not a member.
    outside: std::collections::HashSet<(i64, i64)>,
    actions: Vec<ChatAction>,
    /// Answer the next posts 429 with this `retry_after`.
    rate_limits: VecDeque<u64>,
    /// Posts are recorded and never answered (a gateway killed mid-post).
    hold_posts: bool,
    bot_to_bot: bool,
    /// Files by file_id: (file_path, bytes).
    files: HashMap<String, (String, Vec<u8>)>,
    /// Files the bots sent, in order.
    uploads: Vec<Upload>,
    /// `sendDocument` and `sendPhoto` calls, refused ones included.
    upload_calls: usize,
    seen: Timeline,
    /// Every update delivered, to which bot, in order.
    delivered: Vec<(String, Value)>,
    webhook_answers: Vec<u16>,
}

/// A running fake Telegram.
#[derive(Clone)]
pub struct FakeTelegram {
    /// `http://127.0.0.1:PORT`: an account's `api_url`.
    pub api_url: String,
    inner: Arc<Mutex<Inner>>,
    arrived: Arc<Notify>,
}

impl FakeTelegram {
    /// Start on 127.0.0.1:0.
    pub async fn start() -> FakeTelegram {
        let inner = Arc::new(Mutex::new(Inner {
            next_update: 100,
            ..Inner::default()
        }));
        let arrived = Arc::new(Notify::new());
        let state = api::State {
            inner: Arc::clone(&inner),
            arrived: Arc::clone(&arrived),
        };
        let app = Router::new()
            .route("/{bot}/{method}", post(api::method))
            .route("/file/{bot}/{*path}", get(api::file))
            .with_state(state);
        let api_url = super::turns::serve(app).await;
        FakeTelegram {
            api_url,
            inner,
            arrived,
        }
    }

    /// Register bot `name` (token `tok-<name>`) with user `id` and `@username`.
    pub fn bot(&self, name: &str, id: i64, username: &str) {
        self.inner.lock().unwrap().bots.push(Bot {
            name: name.to_owned(),
            id,
            username: username.to_owned(),
            queue: VecDeque::new(),
            webhook: None,
            get_updates: 0,
            commands: None,
        });
    }

    /// Bot `name` is not in group `chat` (it gets none of its messages).
    pub fn not_in(&self, name: &str, chat: i64) {
        let mut inner = self.inner.lock().unwrap();
        let id = inner.bots.iter().find(|b| b.name == name).unwrap().id;
        inner.outside.insert((chat, id));
    }

    /// Bot-to-bot mode: from now on a bot's group posts reach the other bots as updates.
    pub fn bot_to_bot(&self) {
        self.inner.lock().unwrap().bot_to_bot = true;
    }

    /// The next `n` posts get 429 with `retry_after` seconds.
    pub fn rate_limit_posts(&self, n: usize, retry_after: u64) {
        let mut inner = self.inner.lock().unwrap();
        inner
            .rate_limits
            .extend(std::iter::repeat_n(retry_after, n));
    }

    /// From now on posts are recorded as made and never answered.
    pub fn hold_posts(&self) {
        self.inner.lock().unwrap().hold_posts = true;
    }

    /// Posts are answered again.
    pub fn release_posts(&self) {
        self.inner.lock().unwrap().hold_posts = false;
    }

    /// Serve `bytes` as file `file_id` at `file_path`.
    pub fn file(&self, file_id: &str, file_path: &str, bytes: &[u8]) {
        let mut inner = self.inner.lock().unwrap();
        inner
            .files
            .insert(file_id.into(), (file_path.into(), bytes.to_vec()));
    }

    /// A human (`from`: id, first name) says `text` in `chat` (negative: a supergroup;
    /// positive: the private chat with that person), with `entities`, optionally replying to
    /// message `reply_to` of the chat. Every bot gets it (in a private chat: only `to`).
    /// Returns the message id.
    pub fn say(
        &self,
        chat: i64,
        from: (i64, &str),
        text: &str,
        entities: Value,
        reply_to: Option<i64>,
        to: Option<&str>,
    ) -> i64 {
        let mut inner = self.inner.lock().unwrap();
        let author = json!({"id": from.0, "is_bot": false, "first_name": from.1});
        let message = api::new_message(&mut inner, chat, author, text, entities, reply_to);
        drop(inner);
        self.hand_out(chat, message, to)
    }

    /// A human (`from`) posts file `name` (`mime_type`, `bytes`) as a document in `chat`, with
    /// `caption` and its `entities`; every bot gets it. The file is served for `getFile` under
    /// file id `doc-<message id>`. Returns the message id.
    pub fn say_document(
        &self,
        chat: i64,
        from: (i64, &str),
        caption: &str,
        entities: Value,
        (name, mime_type, bytes): (&str, &str, &[u8]),
    ) -> i64 {
        let mut inner = self.inner.lock().unwrap();
        let author = json!({"id": from.0, "is_bot": false, "first_name": from.1});
        let mut message = api::new_message(&mut inner, chat, author, "", json!([]), None);
        let file_id = format!("doc-{}", message["message_id"]);
        inner.files.insert(
            file_id.clone(),
            (format!("documents/{name}"), bytes.to_vec()),
        );
        let object = message.as_object_mut().unwrap();
        object.remove("text");
        object.remove("entities");
        object.insert("caption".into(), json!(caption));
        object.insert("caption_entities".into(), entities);
        object.insert(
            "document".into(),
            json!({"file_id": file_id, "file_unique_id": file_id, "file_name": name,
                "mime_type": mime_type, "file_size": bytes.len()}),
        );
        drop(inner);
        self.hand_out(chat, message, None)
    }

    /// Deliver a person's `message` in `chat` to every bot there (in a private chat: only
    /// `to`); returns its id.
    fn hand_out(&self, chat: i64, message: Value, to: Option<&str>) -> i64 {
        let mut inner = self.inner.lock().unwrap();
        let id = message["message_id"].as_i64().unwrap();
        let receivers: Vec<String> = inner
            .bots
            .iter()
            .filter(|b| to.is_none_or(|to| to == b.name))
            .filter(|b| !inner.outside.contains(&(chat, b.id)))
            .map(|b| b.name.clone())
            .collect();
        for bot in receivers {
            api::deliver(&mut inner, &bot, &message);
        }
        drop(inner);
        self.arrived.notify_waiters();
        id
    }

    /// Deliver the update with `update_id` to `bot` again (Telegram redelivering it).
    pub fn redeliver(&self, bot: &str, update: &Value) {
        let mut inner = self.inner.lock().unwrap();
        let pos = inner.bots.iter().position(|b| b.name == bot).unwrap();
        inner.bots[pos].queue.push_back(update.clone());
        drop(inner);
        self.arrived.notify_waiters();
    }

    /// Every update delivered to `bot` that it has not confirmed yet.
    pub fn pending(&self, bot: &str) -> Vec<Value> {
        let inner = self.inner.lock().unwrap();
        let b = inner.bots.iter().find(|b| b.name == bot).unwrap();
        b.queue.iter().cloned().collect()
    }

    /// Every update delivered to `bot`, confirmed or not, in order.
    pub fn delivered(&self, bot: &str) -> Vec<Value> {
        let inner = self.inner.lock().unwrap();
        inner
            .delivered
            .iter()
            .filter(|(to, _)| to == bot)
            .map(|(_, u)| u.clone())
            .collect()
    }

    /// Every post call, refused ones included, in order.
    pub fn all_posts(&self) -> Vec<Post> {
        self.inner.lock().unwrap().posts.clone()
    }

    /// The posts that made a message.
    pub fn posts(&self) -> Vec<Post> {
        self.all_posts()
            .into_iter()
            .filter(|p| p.refused.is_none())
            .collect()
    }

    /// The posts `bot` made.
    pub fn posts_by(&self, bot: &str) -> Vec<Post> {
        self.posts().into_iter().filter(|p| p.bot == bot).collect()
    }

    /// The files bots sent (`sendDocument`: kind `document`; `sendPhoto`: `photo`), in order.
    pub fn uploads(&self) -> Vec<Upload> {
        self.inner.lock().unwrap().uploads.clone()
    }

    /// How many `sendDocument` and `sendPhoto` calls came, refused ones included.
    pub fn upload_calls(&self) -> usize {
        self.inner.lock().unwrap().upload_calls
    }

    /// `sendMessageDraft` calls, in order.
    pub fn drafts(&self) -> Vec<Draft> {
        self.inner.lock().unwrap().drafts.clone()
    }

    /// `sendChatAction` calls, in order.
    pub fn actions(&self) -> Vec<ChatAction> {
        self.inner.lock().unwrap().actions.clone()
    }

    /// Posts, edits and deletions, in order.
    pub fn seen(&self) -> Timeline {
        self.inner.lock().unwrap().seen.clone()
    }

    /// How many times `bot` called `getUpdates`.
    pub fn polls(&self, bot: &str) -> usize {
        let inner = self.inner.lock().unwrap();
        inner
            .bots
            .iter()
            .find(|b| b.name == bot)
            .map_or(0, |b| b.get_updates)
    }

    /// The webhook `bot` registered: (url, secret).
    pub fn webhook(&self, bot: &str) -> Option<(String, String)> {
        let inner = self.inner.lock().unwrap();
        inner
            .bots
            .iter()
            .find(|b| b.name == bot)
            .and_then(|b| b.webhook.clone())
    }

    /// The commands `bot` registered with `setMyCommands`.
    pub fn commands(&self, bot: &str) -> Option<Value> {
        let inner = self.inner.lock().unwrap();
        inner
            .bots
            .iter()
            .find(|b| b.name == bot)
            .and_then(|b| b.commands.clone())
    }

    /// The HTTP statuses baton's webhook answered the fake's posts with.
    pub fn webhook_answers(&self) -> Vec<u16> {
        self.inner.lock().unwrap().webhook_answers.clone()
    }

    /// POST every pending update of webhook bot `bot` to its webhook path on `base` (the
    /// registered host stands for a proxy in front of baton) with `secret` (the one registered
    /// when `None`; `Some("")`: no header), each once; returns the statuses.
    pub async fn push_webhook(&self, base: &str, bot: &str, secret: Option<&str>) -> Vec<u16> {
        let (url, registered, updates) = {
            let mut inner = self.inner.lock().unwrap();
            let b = inner.bots.iter_mut().find(|b| b.name == bot).unwrap();
            let (url, registered) = b.webhook.clone().expect("bot registered a webhook");
            (url, registered, b.queue.drain(..).collect::<Vec<_>>())
        };
        let http = reqwest::Client::new();
        let mut statuses = Vec::new();
        for update in updates {
            let path = url.splitn(4, '/').nth(3).unwrap_or_default();
            let mut request = http.post(format!("{base}/{path}")).json(&update);
            let secret = secret.unwrap_or(&registered);
            if !secret.is_empty() {
                request = request.header("X-Telegram-Bot-Api-Secret-Token", secret);
            }
            let status = request.send().await.unwrap().status().as_u16();
            statuses.push(status);
        }
        self.inner.lock().unwrap().webhook_answers.extend(&statuses);
        statuses
    }

    /// Wait, up to the test deadline, until `cond` holds.
    pub async fn wait_for(&self, cond: impl Fn(&FakeTelegram) -> bool) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        while !cond(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "fake Telegram: condition not reached in time"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Wait until `bot` has confirmed every update delivered to it (polled past them).
    pub async fn wait_confirmed(&self, bot: &str) {
        self.wait_for(|f| f.pending(bot).is_empty() && f.polls(bot) > 0)
            .await;
    }
}

/// A `mention` entity for `@username` at UTF-16 `offset`.
pub fn mention(offset: usize, username: &str) -> Value {
    json!({"type": "mention", "offset": offset, "length": username.encode_utf16().count() + 1})
}
