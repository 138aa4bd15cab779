//! baton's Slack adapter: one Slack app per account, over Socket Mode or the Events API.
//!
//! Several baton bots live in one workspace as separate Slack apps, so everything here is per
//! account: its own tokens, its own bot user (from `auth.test`), its own `api_app_id`. The
//! adapter only normalizes and posts; which bot wakes, what is a duplicate and who may run a
//! command are the gateway's decisions (see `baton_contract`).
//!
//! - [`api`]: the Web API calls, on slack-morphism.
//! - [`normalize`]: Slack payloads to [`InboundEvent`](baton_contract::InboundEvent).
//! - [`signature`]: the `v0` request signature.
//! - `socket`: one Socket Mode session (enqueue, then ack); the contract's connection skeleton
//!   identifies the bot and reconnects.
//! - `events_http`: the Events API endpoint and HTTP slash commands.
//! - `outbound`: `chat.postMessage` into the thread, ephemeral command answers.
//! - `download`: files posted in chats, fetched with the bot token.

pub mod api;
mod download;
mod events_http;
pub mod normalize;
mod outbound;
pub mod signature;
mod socket;
mod status;
mod stream;

use std::sync::{Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use baton_contract::{
    AccountId, Adapter, AdapterError, Backoff, Capabilities, ChatId, ConnectionCell, DeleteMessage,
    DownloadError, Downloaded, EditMessage, EventSink, FileRef, LinkError, OutboundFile,
    OutboundMessage, Platform, Receive, Secret, SendError, SentMessage, StreamFor, StreamStart,
    StreamText, Typing, TypingTarget, UserId, WebhookRequest, WebhookResponse, run_connection,
};
use tokio_util::sync::CancellationToken;

use crate::api::{Api, ApiError};
use crate::normalize::Identity;

/// Slack's message limit as baton uses it: Slack truncates `text` past 40 000 characters but
/// recommends 4 000, and long posts are hard to read.
pub const SLACK_MAX_MESSAGE_CHARS: usize = 4000;

/// How the account receives events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Socket Mode: baton dials out to Slack; no public URL needed (the default).
    Socket,
    /// The Events API: Slack posts to `/hooks/slack/<account>`, signed with the signing secret.
    Events,
}

/// One account's settings, resolved from the config and the environment.
#[derive(Debug, Clone)]
pub struct SlackSettings {
    /// The account's id (webhook path, session keys).
    pub account: AccountId,
    /// Socket Mode or Events API.
    pub mode: Mode,
    /// The bot token (`xoxb-…`), for posting and `auth.test`.
    pub bot_token: Secret,
    /// The app-level token (`xapp-…`), for Socket Mode.
    pub app_token: Option<Secret>,
    /// The signing secret, for the Events API and HTTP slash commands.
    pub signing_secret: Option<Secret>,
    /// The app id events must carry; `None`: learned from the first event.
    pub app_id: Option<String>,
    /// Web API base, ending in `/api`.
    pub api_url: String,
    /// First reconnect delay; doubles up to [`SlackSettings::reconnect_max`].
    pub reconnect_min: Duration,
    /// Longest reconnect delay.
    pub reconnect_max: Duration,
}

impl SlackSettings {
    /// Settings with Slack's real API and default reconnect delays.
    pub fn new(account: AccountId, mode: Mode, bot_token: Secret) -> Self {
        Self {
            account,
            mode,
            bot_token,
            app_token: None,
            signing_secret: None,
            app_id: None,
            api_url: "https://slack.com/api".into(),
            reconnect_min: Duration::from_millis(500),
            reconnect_max: Duration::from_secs(60),
        }
    }
}

/// One Slack app's connection.
pub struct SlackAdapter {
    settings: SlackSettings,
    api: Api,
    identity: RwLock<Option<Identity>>,
    app_id: Mutex<Option<String>>,
    state: ConnectionCell,
    status: status::Status,
    streams: stream::Streams,
    files: download::Files,
}

impl SlackAdapter {
    /// An adapter for `settings`; nothing connects until [`Adapter::run`].
    pub fn new(settings: SlackSettings) -> Self {
        let api = Api::new(
            &settings.api_url,
            &settings.bot_token,
            settings.app_token.as_ref(),
        );
        let files = download::Files::new(&settings.api_url, settings.bot_token.clone());
        Self {
            files,
            app_id: Mutex::new(settings.app_id.clone()),
            settings,
            api,
            identity: RwLock::new(None),
            state: ConnectionCell::default(),
            status: status::Status::default(),
            streams: stream::Streams::default(),
        }
    }

    fn identity(&self) -> Option<Identity> {
        self.identity
            .read()
            .expect("identity lock poisoned")
            .clone()
    }

    /// Normalize an Events API body for this account; `None` when it is not for the pipeline.
    fn normalize_event(&self, body: &serde_json::Value) -> Option<baton_contract::InboundEvent> {
        let me = self.identity()?;
        let checked = {
            let mut app = self.app_id.lock().expect("app id lock poisoned");
            normalize::check_app(&mut app, body)
        };
        let result =
            checked.and_then(|()| normalize::event_callback(&self.settings.account, &me, body));
        match result {
            Ok(event) => Some(event),
            Err(normalize::Skip::OtherApp(app)) => {
                tracing::warn!(account = %self.settings.account, other_app = %app, "event from another Slack app ignored; check the account's app_id and tokens");
                None
            }
            Err(skip) => {
                tracing::debug!(account = %self.settings.account, ?skip, "Slack event skipped");
                None
            }
        }
    }

    /// Normalize a slash command for this account, after the same app check.
    fn normalize_command(
        &self,
        fields: &serde_json::Value,
    ) -> Option<baton_contract::InboundEvent> {
        let checked = {
            let mut app = self.app_id.lock().expect("app id lock poisoned");
            normalize::check_app(&mut app, fields)
        };
        match checked.and_then(|()| normalize::slash_command(&self.settings.account, fields)) {
            Ok(event) => Some(event),
            Err(skip) => {
                tracing::warn!(account = %self.settings.account, ?skip, "slash command ignored");
                None
            }
        }
    }

    /// `auth.test`, once: a refused token stops the account, anything else is worth retrying.
    async fn identify(&self) -> Result<(), LinkError> {
        match self.api.auth_test().await {
            Ok(me) => {
                tracing::info!(account = %self.settings.account, user = %me.user_id, "Slack bot identified");
                *self.identity.write().expect("identity lock poisoned") = Some(me);
                Ok(())
            }
            Err(ApiError::Auth(code)) => Err(LinkError::Fatal(AdapterError::Auth(format!(
                "Slack refused the bot token of account `{}` ({code}); check its bot_token_env",
                self.settings.account
            )))),
            Err(err) => Err(LinkError::Transient(format!("auth.test failed: {err}"))),
        }
    }
}

#[async_trait]
impl Adapter for SlackAdapter {
    fn platform(&self) -> Platform {
        Platform::Slack
    }

    fn account(&self) -> &AccountId {
        &self.settings.account
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_chars: SLACK_MAX_MESSAGE_CHARS,
            threads: true,
            ephemeral_replies: true,
            bot_posts_reach_bots: true,
        }
    }

    fn self_id(&self) -> Option<UserId> {
        self.identity().map(|me| UserId(me.user_id))
    }

    fn connection(&self) -> &ConnectionCell {
        &self.state
    }

    fn receive(&self) -> Receive {
        match self.settings.mode {
            Mode::Socket => Receive::Socket,
            Mode::Events => Receive::Webhooks,
        }
    }

    async fn run(
        &self,
        sink: &dyn EventSink,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        let receive = self.receive();
        let backoff = Backoff::new(self.settings.reconnect_min, self.settings.reconnect_max);
        let mut link = socket::SocketMode(self);
        run_connection(self, &mut link, receive, backoff, sink, &shutdown).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, SendError> {
        outbound::send(&self.api, message).await
    }

    fn max_upload_bytes(&self) -> Option<u64> {
        Some(outbound::MAX_UPLOAD_BYTES)
    }

    async fn upload(&self, file: &OutboundFile) -> Result<SentMessage, SendError> {
        outbound::upload(&self.api, file).await
    }

    fn can_edit(&self) -> bool {
        true
    }

    fn shows_typing(&self) -> bool {
        true
    }

    async fn edit(&self, edit: &EditMessage) -> Result<(), SendError> {
        outbound::edit(&self.api, edit).await
    }

    async fn delete(&self, message: &DeleteMessage) -> Result<(), SendError> {
        outbound::delete(&self.api, message).await
    }

    fn streams_in(&self, _chat: &ChatId) -> bool {
        self.streams.available()
    }

    async fn stream_start(
        &self,
        message: &OutboundMessage,
        to: &StreamFor,
    ) -> Result<StreamStart, SendError> {
        let team = self.identity().map(|me| me.team_id);
        self.streams
            .start(&self.api, team.as_deref(), message, to)
            .await
    }

    async fn stream_update(&self, update: &StreamText) -> Result<(), SendError> {
        self.streams.update(&self.api, update).await
    }

    async fn stream_end(&self, end: &StreamText) -> Result<(), SendError> {
        self.streams.end(&self.api, end).await
    }

    async fn typing_start(&self, at: &TypingTarget) -> Result<Option<Typing>, SendError> {
        self.status.start(&self.api, at).await
    }

    async fn typing_stop(&self, at: &TypingTarget, _typing: &Typing) -> Result<(), SendError> {
        self.status.stop(&self.api, at).await
    }

    fn typing_shows_text(&self) -> bool {
        true
    }

    async fn typing_says(
        &self,
        at: &TypingTarget,
        _typing: &Typing,
        line: &str,
    ) -> Result<(), SendError> {
        self.status.say(&self.api, at, line).await
    }

    async fn download(&self, file: &FileRef, limit: u64) -> Result<Downloaded, DownloadError> {
        self.files.download(file, limit).await
    }

    async fn webhook(&self, request: WebhookRequest, sink: &dyn EventSink) -> WebhookResponse {
        events_http::handle(self, request, sink).await
    }
}
