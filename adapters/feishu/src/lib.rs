//! baton's Feishu/Lark adapter: one Feishu (or Lark) app per account, over the long connection
//! or webhooks.
//!
//! Feishu and Lark are one protocol on two hosts, so one adapter serves both platforms; only the
//! default `api_url` differs ([`default_api_url`]). Several baton bots share a group as separate
//! apps, so everything here is per account: its own app credentials, its own tenant token, its
//! own bot `open_id` (from `bot/v3/info`), against which mentions are resolved. The adapter only
//! normalizes and posts; which bot wakes and what is a duplicate are the gateway's decisions.
//!
//! - [`api`]: the Open Platform calls and the cached tenant token.
//! - [`normalize`]: `im.message.receive_v1` to [`InboundEvent`](baton_contract::InboundEvent).
//! - [`crypto`]: `{"encrypt": ...}` bodies (AES-256-CBC).
//! - [`signature`]: `X-Lark-Signature` and the verification token.
//! - [`frame`]: the long connection's protobuf frames; [`fragments`]: split events rejoined.
//! - `ws`: one long connection (pings, watchdog, acks); the contract's connection skeleton
//!   identifies the bot and reconnects.
//! - `webhook`: `/hooks/<feishu|lark>/<account>`.
//! - `membership`: whether the bot is in a chat (asked before it is handed a sibling's post).
//! - `outbound`: replies, with a `uuid` per chunk.
//! - `resources`: the images and files messages carry, fetched with the tenant token.
//! - `sibling_post`: another baton bot's post as this account reads it (the gateway hands those
//!   over: Feishu does not deliver bot posts to bots).

pub mod api;
mod card_stream;
pub mod crypto;
pub mod fragments;
pub mod frame;
mod membership;
pub mod normalize;
mod outbound;
mod resources;
mod sibling_post;
pub mod signature;
pub mod webhook;
mod ws;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use baton_contract::{
    AccountId, Adapter, AdapterError, Backoff, Capabilities, ChatId, ConnectionCell, DeleteMessage,
    DownloadError, Downloaded, EditMessage, EventSink, FileRef, InboundEvent, LinkError,
    OutboundFile, OutboundMessage, Platform, Receive, Secret, SendError, SentMessage, SiblingPost,
    StreamFor, StreamStart, StreamText, Typing, TypingTarget, UserId, WebhookRequest,
    WebhookResponse, run_connection,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::api::{Api, ApiError, BotInfo};
use crate::membership::Membership;
use crate::outbound::Posted;

/// Feishu's limit as baton uses it: a text message may be 150 KB, but long posts are hard to
/// read, and baton splits Feishu replies at 4000 characters.
pub const FEISHU_MAX_MESSAGE_CHARS: usize = 4000;
/// Feishu's Open Platform (China).
pub const FEISHU_API_URL: &str = "https://open.feishu.cn";
/// Lark's Open Platform (international).
pub const LARK_API_URL: &str = "https://open.larksuite.com";

/// The Open Platform host a platform talks to unless the account's `api_url` says otherwise.
pub fn default_api_url(platform: Platform) -> &'static str {
    match platform {
        Platform::Lark => LARK_API_URL,
        _ => FEISHU_API_URL,
    }
}

/// How the account receives events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The long connection: baton dials out; no public URL needed (the default).
    Websocket,
    /// Feishu posts to `/hooks/<feishu|lark>/<account>`.
    Webhook,
}

/// The baton bots on one platform: each account adds itself once `bot/v3/info` has answered,
/// and every post it makes. `open_id`s are per app, so an account cannot tell from an id alone
/// that a mention or a message is another baton bot's; the app's name or id can, and so can the
/// id of a message a sibling posted (see [`normalize`]). Clones share one table: give every
/// account of a platform the same one.
#[derive(Debug, Clone, Default)]
pub struct Siblings(Arc<RwLock<SiblingTable>>);

#[derive(Debug, Default)]
struct SiblingTable {
    /// App name to the bot's own `open_id`.
    by_name: HashMap<String, String>,
    /// App id (`cli_…`) to the bot's own `open_id`.
    by_app: HashMap<String, String>,
    /// `(app id, open_id as that app sees a sibling)` to the sibling's own `open_id`, learned
    /// from mentions of the sibling by name.
    aliases: HashMap<(String, String), String>,
    /// Recent posts of baton bots: message id to the poster's own `open_id`.
    posts: HashMap<String, String>,
    /// The same message ids, oldest first, to bound `posts`.
    order: VecDeque<String>,
}

/// How many sibling posts (by message id), and aliases, are remembered.
const REMEMBERED_POSTS: usize = 4096;

impl Siblings {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    fn add(&self, app_name: &str, app_id: &str, open_id: &str) {
        let mut table = self.0.write().expect("siblings lock poisoned");
        if !app_name.is_empty() {
            table
                .by_name
                .insert(app_name.to_owned(), open_id.to_owned());
        }
        table.by_app.insert(app_id.to_owned(), open_id.to_owned());
    }

    fn posted(&self, message_id: &str, open_id: &str) {
        if message_id.is_empty() {
            return;
        }
        let mut table = self.0.write().expect("siblings lock poisoned");
        if table
            .posts
            .insert(message_id.to_owned(), open_id.to_owned())
            .is_none()
        {
            table.order.push_back(message_id.to_owned());
            if table.order.len() > REMEMBERED_POSTS
                && let Some(old) = table.order.pop_front()
            {
                table.posts.remove(&old);
            }
        }
    }

    fn alias(&self, app_id: &str, seen: &str, own: &str) {
        let mut table = self.0.write().expect("siblings lock poisoned");
        if table.aliases.len() >= REMEMBERED_POSTS {
            table.aliases.clear();
        }
        let key = (app_id.to_owned(), seen.to_owned());
        table.aliases.insert(key, own.to_owned());
    }

    /// The own `open_id` of the sibling that app `app_id` sees as `seen` (once a mention of it
    /// by name has shown it).
    pub fn alias_of(&self, app_id: &str, seen: &str) -> Option<String> {
        let table = self.0.read().expect("siblings lock poisoned");
        table
            .aliases
            .get(&(app_id.to_owned(), seen.to_owned()))
            .cloned()
    }

    /// The own `open_id` of the bot whose app is named `app_name`.
    pub fn open_id_of(&self, app_name: &str) -> Option<String> {
        let table = self.0.read().expect("siblings lock poisoned");
        table.by_name.get(app_name).cloned()
    }

    /// The own `open_id` of the bot of app `app_id`.
    pub fn open_id_of_app(&self, app_id: &str) -> Option<String> {
        let table = self.0.read().expect("siblings lock poisoned");
        table.by_app.get(app_id).cloned()
    }

    /// Whether `open_id` is a baton bot's own `open_id`.
    pub fn is_sibling(&self, open_id: &str) -> bool {
        let table = self.0.read().expect("siblings lock poisoned");
        table.by_app.values().any(|own| own == open_id)
    }

    /// The own `open_id` of the baton bot that posted `message_id` (recently).
    pub fn poster_of(&self, message_id: &str) -> Option<String> {
        let table = self.0.read().expect("siblings lock poisoned");
        table.posts.get(message_id).cloned()
    }
}

/// One account's settings, resolved from the config and the environment.
#[derive(Debug, Clone)]
pub struct FeishuSettings {
    /// `feishu` or `lark`.
    pub platform: Platform,
    /// The account's id (webhook path, session keys).
    pub account: AccountId,
    /// Long connection or webhook.
    pub mode: Mode,
    /// The app id (`cli_…`).
    pub app_id: String,
    /// The app secret: for the tenant token and the long connection's endpoint.
    pub app_secret: Secret,
    /// The verification token every webhook event must carry.
    pub verification_token: Option<Secret>,
    /// The Encrypt Key: webhook bodies are encrypted with it and signed.
    pub encrypt_key: Option<Secret>,
    /// The Open Platform base URL.
    pub api_url: String,
    /// First reconnect delay; doubles up to [`FeishuSettings::reconnect_max`].
    pub reconnect_min: Duration,
    /// Longest reconnect delay.
    pub reconnect_max: Duration,
    /// Ping interval until the server names one (the SDKs' default is 120 s).
    pub ping_interval: Duration,
    /// How long past a due ping a silent connection is given before it is replaced.
    pub pong_timeout: Duration,
    /// The other baton bots on this platform (shared by all its accounts).
    pub siblings: Siblings,
}

impl FeishuSettings {
    /// Settings with the platform's real host and default timings.
    pub fn new(
        platform: Platform,
        account: AccountId,
        mode: Mode,
        app_id: impl Into<String>,
        app_secret: Secret,
    ) -> Self {
        Self {
            platform,
            account,
            mode,
            app_id: app_id.into(),
            app_secret,
            verification_token: None,
            encrypt_key: None,
            api_url: default_api_url(platform).to_owned(),
            reconnect_min: Duration::from_millis(500),
            reconnect_max: Duration::from_secs(60),
            ping_interval: Duration::from_secs(120),
            pong_timeout: Duration::from_secs(10),
            siblings: Siblings::new(),
        }
    }
}

/// One Feishu or Lark app's connection.
pub struct FeishuAdapter {
    settings: FeishuSettings,
    api: Api,
    identity: RwLock<Option<BotInfo>>,
    state: ConnectionCell,
    posted: Posted,
    membership: Membership,
    cards: card_stream::CardStreams,
}

impl FeishuAdapter {
    /// An adapter for `settings`; nothing connects until [`Adapter::run`].
    pub fn new(settings: FeishuSettings) -> Self {
        let api = Api::new(
            &settings.api_url,
            &settings.app_id,
            settings.app_secret.clone(),
        );
        Self {
            settings,
            api,
            identity: RwLock::new(None),
            state: ConnectionCell::default(),
            posted: Posted::default(),
            membership: Membership::default(),
            cards: card_stream::CardStreams::default(),
        }
    }

    /// Remember `sent` as this bot's post, so it is known as such when Feishu delivers it to a
    /// sibling too.
    fn known_as_mine(&self, sent: &SentMessage) {
        if let Some(me) = self.identity() {
            self.settings
                .siblings
                .posted(sent.message_id.as_str(), &me.open_id);
        }
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &FeishuSettings {
        &self.settings
    }

    fn identity(&self) -> Option<BotInfo> {
        self.identity
            .read()
            .expect("identity lock poisoned")
            .clone()
    }

    /// Normalize an event body for this account; `None` when it is not for the pipeline.
    async fn normalize(&self, body: &Value) -> Option<InboundEvent> {
        let me = self.identity()?;
        let normalized = {
            let posted = |id: &str| self.posted.contains(id);
            let who = normalize::Me {
                platform: self.settings.platform,
                account: &self.settings.account,
                app_id: &self.settings.app_id,
                open_id: &me.open_id,
                posted: &posted,
                siblings: &self.settings.siblings,
            };
            normalize::message_receive(&who, body)
        };
        match normalized {
            Ok(mut event) => {
                self.name_app_sender(&mut event, &me.open_id).await;
                Some(event)
            }
            Err(normalize::Skip::OtherApp(app)) => {
                tracing::warn!(account = %self.settings.account, other_app = %app, "event for another Feishu app ignored; check the account's app_id");
                None
            }
            Err(skip) => {
                tracing::debug!(account = %self.settings.account, ?skip, "Feishu event skipped");
                None
            }
        }
    }

    /// Another app's message whose author the event alone does not name as a sibling (baton's
    /// post not answered yet, no app id in the event, no mention seen): the message itself says
    /// which app sent it (`GET /open-apis/im/v1/messages/<id>`). One call, only for app senders.
    async fn name_app_sender(&self, event: &mut InboundEvent, me: &str) {
        let siblings = &self.settings.siblings;
        if !event.sender.is_bot
            || event.sender.is_self
            || siblings.is_sibling(event.sender.id.as_str())
        {
            return;
        }
        match self.api.message_sender_app(event.message_id.as_str()).await {
            Ok(Some(app)) => {
                if let Some(own) = siblings.open_id_of_app(&app) {
                    event.sender.is_self = own == me;
                    event.sender.id = UserId(own);
                }
            }
            Ok(None) => {}
            Err(err) => {
                tracing::debug!(account = %self.settings.account, %err, "cannot tell which app sent a message; taken as the id the event gives")
            }
        }
    }

    /// `bot/v3/info`, once: refused credentials stop the account, anything else is worth
    /// retrying.
    async fn identify(&self) -> Result<(), LinkError> {
        match self.api.bot_info().await {
            Ok(me) => {
                tracing::info!(account = %self.settings.account, open_id = %me.open_id, app = %me.app_name, "Feishu bot identified");
                self.settings
                    .siblings
                    .add(&me.app_name, &self.settings.app_id, &me.open_id);
                *self.identity.write().expect("identity lock poisoned") = Some(me);
                Ok(())
            }
            Err(ApiError::Auth(why)) => Err(LinkError::Fatal(AdapterError::Auth(format!(
                "{} refused the app credentials of account `{}` ({why}); check its app_id and \
                 app_secret_env, and that the app is published",
                self.settings.platform, self.settings.account
            )))),
            Err(err) => Err(LinkError::Transient(format!("bot/v3/info failed: {err}"))),
        }
    }
}

#[async_trait]
impl Adapter for FeishuAdapter {
    fn platform(&self) -> Platform {
        self.settings.platform
    }

    fn account(&self) -> &AccountId {
        &self.settings.account
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_chars: FEISHU_MAX_MESSAGE_CHARS,
            threads: true,
            ephemeral_replies: false,
            // Feishu delivers another app's message only when it @mentions the bot (and the
            // app has the include_bot scope): the gateway hands baton bots' posts over.
            bot_posts_reach_bots: false,
        }
    }

    fn self_id(&self) -> Option<UserId> {
        self.identity().map(|me| UserId(me.open_id))
    }

    fn connection(&self) -> &ConnectionCell {
        &self.state
    }

    fn receive(&self) -> Receive {
        match self.settings.mode {
            Mode::Websocket => Receive::Socket,
            Mode::Webhook => Receive::Webhooks,
        }
    }

    async fn run(
        &self,
        sink: &dyn EventSink,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        let receive = self.receive();
        let backoff = Backoff::new(self.settings.reconnect_min, self.settings.reconnect_max);
        let mut link = ws::LongConnection(self);
        run_connection(self, &mut link, receive, backoff, sink, &shutdown).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, SendError> {
        let sent = outbound::send(&self.api, &self.posted, message).await?;
        self.known_as_mine(&sent);
        Ok(sent)
    }

    fn streams_in(&self, _chat: &ChatId) -> bool {
        self.cards.available()
    }

    async fn stream_start(
        &self,
        message: &OutboundMessage,
        _to: &StreamFor,
    ) -> Result<StreamStart, SendError> {
        let started = self.cards.start(&self.api, &self.posted, message).await?;
        let (StreamStart::Live(sent) | StreamStart::Posted(sent)) = &started;
        self.known_as_mine(sent);
        Ok(started)
    }

    async fn stream_update(&self, update: &StreamText) -> Result<(), SendError> {
        self.cards.update(&self.api, update).await
    }

    async fn stream_end(&self, end: &StreamText) -> Result<(), SendError> {
        self.cards.end(&self.api, end).await
    }

    fn max_upload_bytes(&self) -> Option<u64> {
        Some(outbound::MAX_UPLOAD_BYTES)
    }

    async fn upload(&self, file: &OutboundFile) -> Result<SentMessage, SendError> {
        outbound::upload(&self.api, &self.posted, file).await
    }

    async fn in_chat(&self, chat: &ChatId) -> Result<bool, SendError> {
        self.membership.in_chat(&self.api, chat.as_str()).await
    }

    fn read_sibling_post(&self, post: &OutboundMessage) -> SiblingPost {
        let Some(me) = self.identity() else {
            return SiblingPost::plain(&post.text);
        };
        let reader = sibling_post::Reader {
            open_id: &me.open_id,
            app_id: &self.settings.app_id,
            app_name: &me.app_name,
            siblings: &self.settings.siblings,
        };
        let mut read = reader.read(&post.text);
        // Like a person's reply to the bot's message (`normalize`).
        read.reply_to_author = post
            .reply_to
            .as_ref()
            .filter(|parent| self.posted.contains(parent.as_str()))
            .map(|_| UserId(me.open_id.clone()));
        read
    }

    fn can_edit(&self) -> bool {
        true
    }

    fn shows_typing(&self) -> bool {
        true
    }

    fn max_edits(&self) -> Option<u32> {
        Some(outbound::MAX_EDITS)
    }

    async fn delete(&self, message: &DeleteMessage) -> Result<(), SendError> {
        outbound::delete(&self.api, message).await
    }

    async fn edit(&self, edit: &EditMessage) -> Result<(), SendError> {
        outbound::edit(&self.api, edit).await
    }

    async fn typing_start(&self, at: &TypingTarget) -> Result<Option<Typing>, SendError> {
        outbound::typing_start(&self.api, at).await
    }

    async fn typing_stop(&self, at: &TypingTarget, typing: &Typing) -> Result<(), SendError> {
        outbound::typing_stop(&self.api, at, typing).await
    }

    async fn download(&self, file: &FileRef, limit: u64) -> Result<Downloaded, DownloadError> {
        resources::download(&self.api, file, limit).await
    }

    async fn webhook(&self, request: WebhookRequest, sink: &dyn EventSink) -> WebhookResponse {
        webhook::handle(self, request, sink).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lark_talks_to_the_lark_host_by_default() {
        let settings =
            |p| FeishuSettings::new(p, "a".into(), Mode::Websocket, "cli_x", Secret::new("s"));
        assert_eq!(settings(Platform::Feishu).api_url, "https://open.feishu.cn");
        assert_eq!(
            settings(Platform::Lark).api_url,
            "https://open.larksuite.com"
        );
    }
}
