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
//! - `ws`: the long-connection loop (pings, watchdog, acks, reconnects).
//! - `webhook`: `/hooks/<feishu|lark>/<account>`.
//! - `outbound`: replies, with a `uuid` per chunk.

pub mod api;
pub mod crypto;
pub mod fragments;
pub mod frame;
pub mod normalize;
mod outbound;
pub mod signature;
pub mod webhook;
mod ws;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use baton_contract::{
    AccountId, Adapter, AdapterError, Backoff, Capabilities, ConnectionState, EditMessage,
    EventSink, InboundEvent, OutboundMessage, Platform, Secret, SendError, SentMessage, Typing,
    TypingTarget, UserId, WebhookRequest, WebhookResponse,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::api::{Api, ApiError, BotInfo};
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

/// The baton bots on one platform, by app name: each account adds itself once `bot/v3/info`
/// has answered. `open_id`s are per app, so an account cannot tell from an id alone that a
/// mention names another baton bot; the name can (see [`normalize`]). Clones share one table:
/// give every account of a platform the same one.
#[derive(Debug, Clone, Default)]
pub struct Siblings(Arc<RwLock<HashMap<String, String>>>);

impl Siblings {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    fn add(&self, app_name: &str, open_id: &str) {
        if !app_name.is_empty() {
            let mut table = self.0.write().expect("siblings lock poisoned");
            table.insert(app_name.to_owned(), open_id.to_owned());
        }
    }

    /// The own `open_id` of the bot whose app is named `app_name`.
    pub fn open_id_of(&self, app_name: &str) -> Option<String> {
        let table = self.0.read().expect("siblings lock poisoned");
        table.get(app_name).cloned()
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
    state: Mutex<ConnectionState>,
    posted: Posted,
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
            state: Mutex::new(ConnectionState::Connecting),
            posted: Posted::default(),
        }
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &FeishuSettings {
        &self.settings
    }

    fn set_state(&self, state: ConnectionState) {
        *self.state.lock().expect("state lock poisoned") = state;
    }

    fn identity(&self) -> Option<BotInfo> {
        self.identity
            .read()
            .expect("identity lock poisoned")
            .clone()
    }

    /// Normalize an event body for this account; `None` when it is not for the pipeline.
    fn normalize(&self, body: &Value) -> Option<InboundEvent> {
        let me = self.identity()?;
        let posted = |id: &str| self.posted.contains(id);
        let sibling = |name: &str| self.settings.siblings.open_id_of(name);
        let who = normalize::Me {
            platform: self.settings.platform,
            account: &self.settings.account,
            app_id: &self.settings.app_id,
            open_id: &me.open_id,
            posted: &posted,
            sibling: &sibling,
        };
        match normalize::message_receive(&who, body) {
            Ok(event) => Some(event),
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

    /// `bot/v3/info` until it answers: transient failures are retried with backoff, refused
    /// credentials stop the account. `false` when shut down first.
    async fn learn_identity(&self, shutdown: &CancellationToken) -> Result<bool, AdapterError> {
        let mut backoff = Backoff::new(self.settings.reconnect_min, self.settings.reconnect_max);
        loop {
            match self.api.bot_info().await {
                Ok(me) => {
                    tracing::info!(account = %self.settings.account, open_id = %me.open_id, app = %me.app_name, "Feishu bot identified");
                    self.settings.siblings.add(&me.app_name, &me.open_id);
                    *self.identity.write().expect("identity lock poisoned") = Some(me);
                    return Ok(true);
                }
                Err(ApiError::Auth(why)) => {
                    return Err(AdapterError::Auth(format!(
                        "{} refused the app credentials of account `{}` ({why}); check its \
                         app_id and app_secret_env, and that the app is published",
                        self.settings.platform, self.settings.account
                    )));
                }
                Err(err) => {
                    self.set_state(ConnectionState::Retrying {
                        attempt: backoff.attempt() + 1,
                    });
                    tracing::warn!(account = %self.settings.account, %err, "bot/v3/info failed; retrying");
                    if !backoff.wait(shutdown).await {
                        return Ok(false);
                    }
                }
            }
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
        }
    }

    fn self_id(&self) -> Option<UserId> {
        self.identity().map(|me| UserId(me.open_id))
    }

    fn connection_state(&self) -> ConnectionState {
        *self.state.lock().expect("state lock poisoned")
    }

    async fn run(
        &self,
        sink: &dyn EventSink,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        let result = async {
            if !self.learn_identity(&shutdown).await? {
                return Ok(());
            }
            match self.settings.mode {
                Mode::Websocket => ws::run(self, sink, &shutdown).await,
                Mode::Webhook => {
                    self.set_state(ConnectionState::Connected);
                    shutdown.cancelled().await;
                    Ok(())
                }
            }
        }
        .await;
        self.set_state(ConnectionState::Stopped);
        result
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, SendError> {
        outbound::send(&self.api, &self.posted, message).await
    }

    fn can_edit(&self) -> bool {
        true
    }

    fn max_edits(&self) -> Option<u32> {
        Some(outbound::MAX_EDITS)
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
