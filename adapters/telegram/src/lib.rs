//! baton's Telegram adapter: one bot (a @BotFather token) per account, over long polling or a
//! webhook, by hand over reqwest (the Bot API is plain JSON over HTTPS; docs/platforms/telegram.md
//! says why no client crate).
//!
//! - [`api`]: the calls, and Telegram's error shapes (401, 429 `retry_after`, 400 refusals).
//! - `normalize`: an `Update` to an [`InboundEvent`](baton_contract::InboundEvent).
//! - `polling`: identity (`getMe`, `setMyCommands`, the webhook registered or removed) and
//!   `getUpdates`, with the offset confirmed only after the gateway took each update.
//! - [`webhook`]: `/hooks/telegram/<account>`, checked by its secret header.
//! - `outbound`: replies quoting the message answered, edits, typing, files.
//! - `sibling_post`: another baton bot's post as this account reads it.
//! - [`setup`]: the identity check and the @BotFather steps, for `baton setup` and `baton doctor`.

pub mod api;
mod directory;
mod ids;
mod normalize;
mod outbound;
mod polling;
pub mod setup;
mod sibling_post;
pub mod webhook;

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use baton_contract::{
    AccountId, Adapter, AdapterError, Backoff, Capabilities, ChatId, ConnectionCell, DeleteMessage,
    DownloadError, Downloaded, EditMessage, EventSink, FileRef, LinkError, NotTaken, OutboundFile,
    OutboundMessage, Platform, Preview, Receive, Secret, SendError, SentMessage, SiblingPost,
    Typing, TypingTarget, UserId, WebhookRequest, WebhookResponse, run_connection,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub use crate::api::TELEGRAM_API_URL;
use crate::api::{Api, Me};
pub use crate::directory::Directory;

/// Telegram's limit on one message's text.
pub const TELEGRAM_MAX_MESSAGE_CHARS: usize = 4096;
/// How many of its own posts an account remembers, to know a sibling's reply is to it.
const REMEMBERED_POSTS: usize = 4096;

/// How the account receives updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `getUpdates` long polling: baton dials out; no public URL needed (the default).
    Polling,
    /// Telegram posts to `/hooks/telegram/<account>`; baton registers it with `setWebhook`.
    Webhook,
}

/// One account's settings, resolved from the config and the environment.
#[derive(Debug, Clone)]
pub struct TelegramSettings {
    /// The account's id (webhook path, session keys).
    pub account: AccountId,
    /// Polling or webhook.
    pub mode: Mode,
    /// The bot token from @BotFather.
    pub bot_token: Secret,
    /// The webhook's secret (`X-Telegram-Bot-Api-Secret-Token`).
    pub secret_token: Option<Secret>,
    /// Where baton is reached (`[gateway] public_url`): the webhook is registered under it.
    pub public_url: Option<String>,
    /// The Bot API base URL.
    pub api_url: String,
    /// How long one `getUpdates` waits for updates (Telegram's `timeout`).
    pub poll_timeout: Duration,
    /// First reconnect delay; doubles up to [`TelegramSettings::reconnect_max`].
    pub reconnect_min: Duration,
    /// Longest reconnect delay.
    pub reconnect_max: Duration,
    /// The baton bots on Telegram (shared by all its accounts).
    pub directory: Directory,
}

impl TelegramSettings {
    /// Settings with Telegram's real host and default timings.
    pub fn new(account: AccountId, mode: Mode, bot_token: Secret) -> Self {
        Self {
            account,
            mode,
            bot_token,
            secret_token: None,
            public_url: None,
            api_url: TELEGRAM_API_URL.to_owned(),
            poll_timeout: Duration::from_secs(25),
            reconnect_min: Duration::from_millis(500),
            reconnect_max: Duration::from_secs(60),
            directory: Directory::new(),
        }
    }
}

/// One Telegram bot's connection.
pub struct TelegramAdapter {
    settings: TelegramSettings,
    api: Api,
    identity: RwLock<Option<Me>>,
    connection: ConnectionCell,
    /// The next `getUpdates` offset (the update after the last one the gateway took).
    offset: Mutex<Option<i64>>,
    /// This account's recent posts (message ids), oldest first.
    posted: Mutex<(HashSet<String>, VecDeque<String>)>,
}

impl TelegramAdapter {
    /// An adapter for `settings`; nothing connects until [`Adapter::run`].
    pub fn new(settings: TelegramSettings) -> Self {
        let api = Api::new(&settings.api_url, settings.bot_token.clone());
        Self {
            settings,
            api,
            identity: RwLock::new(None),
            connection: ConnectionCell::default(),
            offset: Mutex::new(None),
            posted: Mutex::default(),
        }
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &TelegramSettings {
        &self.settings
    }

    fn identity(&self) -> Option<Me> {
        self.identity
            .read()
            .expect("identity lock poisoned")
            .clone()
    }

    /// Normalize one update and hand it to the gateway; an update that is no event is taken.
    async fn take(&self, update: &Value, sink: &dyn EventSink) -> Result<(), NotTaken> {
        let Some(me) = self.identity() else {
            return Ok(());
        };
        let who = normalize::Me {
            account: &self.settings.account,
            id: me.id,
            username: &me.username,
            directory: &self.settings.directory,
        };
        match normalize::update(&who, update) {
            Ok(event) => sink.accept(event).await,
            Err(skip) => {
                tracing::debug!(account = %self.settings.account, ?skip, "Telegram update skipped");
                Ok(())
            }
        }
    }

    /// `setWebhook` at `<public_url>/hooks/telegram/<account>` with the secret.
    async fn register_webhook(&self) -> Result<(), LinkError> {
        let settings = &self.settings;
        let fatal = |why: &str| {
            LinkError::Fatal(AdapterError::Fatal(format!(
                "Telegram account `{}` is in webhook mode but {why}",
                settings.account
            )))
        };
        let base = settings
            .public_url
            .as_deref()
            .ok_or_else(|| fatal("`[gateway] public_url` is not set"))?;
        let secret = settings
            .secret_token
            .as_ref()
            .ok_or_else(|| fatal("`secret_token_env` names no secret"))?;
        let url = format!(
            "{}/hooks/telegram/{}",
            base.trim_end_matches('/'),
            settings.account
        );
        let body = json!({
            "url": url,
            "secret_token": secret.expose(),
            "allowed_updates": ["message"],
        });
        self.api
            .call("setWebhook", &body)
            .await
            .map(|_| ())
            .map_err(|err| match err {
                api::ApiError::Refused { description, .. } => fatal(&format!(
                    "Telegram refused the webhook URL {url} ({description}); it must be HTTPS \
                     on port 443, 80, 88 or 8443"
                )),
                other => LinkError::Transient(other.to_string()),
            })
    }

    fn remember_post(&self, sent: &SentMessage) {
        let mut posted = self.posted.lock().expect("posted lock poisoned");
        let id = sent.message_id.as_str().to_owned();
        if posted.0.insert(id.clone()) {
            posted.1.push_back(id);
            if posted.1.len() > REMEMBERED_POSTS
                && let Some(old) = posted.1.pop_front()
            {
                posted.0.remove(&old);
            }
        }
    }
}

#[async_trait]
impl Adapter for TelegramAdapter {
    fn platform(&self) -> Platform {
        Platform::Telegram
    }

    fn account(&self) -> &AccountId {
        &self.settings.account
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_chars: TELEGRAM_MAX_MESSAGE_CHARS,
            threads: true,
            ephemeral_replies: false,
            // Telegram delivers bot posts to bots only in bot-to-bot mode; baton hands its bots'
            // posts over itself, and a copy Telegram delivers too is the same event.
            bot_posts_reach_bots: false,
        }
    }

    fn self_id(&self) -> Option<UserId> {
        self.identity().map(|me| UserId(me.id.to_string()))
    }

    fn connection(&self) -> &ConnectionCell {
        &self.connection
    }

    fn receive(&self) -> Receive {
        match self.settings.mode {
            Mode::Polling => Receive::Socket,
            Mode::Webhook => Receive::Webhooks,
        }
    }

    async fn run(
        &self,
        sink: &dyn EventSink,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        let backoff = Backoff::new(self.settings.reconnect_min, self.settings.reconnect_max);
        let mut link = polling::Polling(self);
        run_connection(self, &mut link, self.receive(), backoff, sink, &shutdown).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, SendError> {
        let sent = outbound::send(&self.api, message).await?;
        self.remember_post(&sent);
        Ok(sent)
    }

    /// A private chat (a positive id, the person's) is that person's conversation with one
    /// bot: never another bot's. In a group, `getChatMember` says whether this bot is in it.
    async fn in_chat(&self, chat: &ChatId) -> Result<bool, SendError> {
        let Some(me) = self.identity() else {
            return Ok(false);
        };
        match chat.as_str().parse::<i64>() {
            Ok(id) if id < 0 => {
                let body = json!({ "chat_id": id, "user_id": me.id });
                let member = self.api.call("getChatMember", &body).await?;
                let status = member.get("status").and_then(Value::as_str);
                Ok(!matches!(status, Some("left" | "kicked") | None))
            }
            _ => Ok(false),
        }
    }

    fn read_sibling_post(&self, post: &OutboundMessage) -> SiblingPost {
        let Some(me) = self.identity() else {
            return SiblingPost::plain(&post.text);
        };
        let mut read =
            sibling_post::read(&post.text, (me.id, &me.username), &self.settings.directory);
        let posted = self.posted.lock().expect("posted lock poisoned");
        read.reply_to_author = post
            .reply_to
            .as_ref()
            .filter(|parent| posted.0.contains(parent.as_str()))
            .map(|_| UserId(me.id.to_string()));
        read
    }

    fn can_edit(&self) -> bool {
        true
    }

    async fn edit(&self, edit: &EditMessage) -> Result<(), SendError> {
        outbound::edit(&self.api, edit).await
    }

    async fn delete(&self, message: &DeleteMessage) -> Result<(), SendError> {
        outbound::delete(&self.api, message).await
    }

    /// Drafts (`sendMessageDraft`) exist in private chats only, whose id is the person's
    /// (positive); groups and supergroups have negative ids and stream by edits.
    fn previews_in(&self, chat: &ChatId) -> bool {
        chat.as_str().parse::<i64>().is_ok_and(|id| id > 0)
    }

    async fn preview(&self, preview: &Preview) -> Result<(), SendError> {
        outbound::draft(&self.api, preview).await
    }

    fn shows_typing(&self) -> bool {
        true
    }

    async fn typing_start(&self, at: &TypingTarget) -> Result<Option<Typing>, SendError> {
        outbound::typing(&self.api, at).await
    }

    fn max_upload_bytes(&self) -> Option<u64> {
        Some(outbound::MAX_UPLOAD_BYTES)
    }

    async fn upload(&self, file: &OutboundFile) -> Result<SentMessage, SendError> {
        let sent = outbound::upload(&self.api, file).await?;
        self.remember_post(&sent);
        Ok(sent)
    }

    async fn download(&self, file: &FileRef, limit: u64) -> Result<Downloaded, DownloadError> {
        self.api.download(&file.0, limit).await
    }

    async fn webhook(&self, request: WebhookRequest, sink: &dyn EventSink) -> WebhookResponse {
        webhook::handle(self, request, sink).await
    }
}
