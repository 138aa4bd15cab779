//! baton's Discord adapter: one Discord application per account, over the gateway and REST.
//!
//! Several baton bots sit in one guild as separate applications, so everything here is per
//! account: its own token, its own bot user (from READY), its own `/baton` command. The adapter
//! only normalizes and posts; which bot wakes, what is a duplicate and who may run a command are
//! the gateway's decisions (see `baton_contract`).
//!
//! - [`normalize`]: Discord messages and interactions to [`InboundEvent`](baton_contract::InboundEvent).
//! - [`rest`]: the REST calls, with baton's own 429 handling.
//! - [`command`]: the `/baton` application command and its registration.
//! - [`interactions`]: answering `/baton` privately inside the 3 s window.
//! - `gateway`: one run of the websocket, on serenity's client; the contract's connection
//!   skeleton reconnects.
//! - `endpoint`: the Ed25519-verified HTTP interactions endpoint.
//! - `outbound`: replies with `message_reference`, safe `allowed_mentions`, nonces.

pub mod command;
mod endpoint;
mod gateway;
pub mod interactions;
pub mod normalize;
mod outbound;
pub mod rest;

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use baton_contract::{
    AccountId, Adapter, AdapterError, Backoff, Capabilities, ConnectionCell, DeleteMessage,
    DownloadError, Downloaded, EditMessage, EventSink, FileRef, OutboundFile, OutboundMessage,
    Platform, Receive, Secret, SendError, SentMessage, Typing, TypingTarget, UserId,
    WebhookRequest, WebhookResponse, run_connection,
};
use serenity::interactions_endpoint::Verifier;
use serenity::model::id::ChannelId;
use tokio_util::sync::CancellationToken;

use crate::interactions::Interactions;
use crate::normalize::{Directory, Identity};
use crate::rest::Rest;

pub use gateway::intents;

/// Discord's message limit for bots, in characters.
pub const DISCORD_MAX_MESSAGE_CHARS: usize = 2000;

/// One account's settings, resolved from the config and the environment.
#[derive(Debug, Clone)]
pub struct DiscordSettings {
    /// The account's id (webhook path, session keys).
    pub account: AccountId,
    /// The bot token (from the application's Bot page).
    pub bot_token: Secret,
    /// The application id; `None`: taken from READY.
    pub application_id: Option<String>,
    /// The application's public key (64 hex digits): enables the HTTP interactions endpoint.
    pub public_key: Option<String>,
    /// Guilds to register `/baton` in; empty: register it globally.
    pub command_guilds: Vec<String>,
    /// Base URL: `https://discord.com`, or a proxy or fake. REST is under `/api/v10`.
    pub api_url: String,
    /// First reconnect delay; doubles up to [`DiscordSettings::reconnect_max`].
    pub reconnect_min: Duration,
    /// Longest reconnect delay.
    pub reconnect_max: Duration,
}

impl DiscordSettings {
    /// Settings with Discord's real API and default reconnect delays.
    pub fn new(account: AccountId, bot_token: Secret) -> Self {
        Self {
            account,
            bot_token,
            application_id: None,
            public_key: None,
            command_guilds: Vec::new(),
            api_url: "https://discord.com".into(),
            reconnect_min: Duration::from_secs(1),
            reconnect_max: Duration::from_secs(60),
        }
    }
}

/// A `public_key` that is not an Ed25519 key.
#[derive(Debug, thiserror::Error)]
#[error(
    "public_key of Discord account `{0}` is not a valid Ed25519 key; copy \"Public Key\" from \
     the application's General Information page"
)]
pub struct BadPublicKey(pub AccountId);

/// State shared by the adapter and serenity's event handler.
pub(crate) struct Shared {
    settings: DiscordSettings,
    rest: Rest,
    verifier: Option<Verifier>,
    identity: RwLock<Option<Identity>>,
    application_id: RwLock<Option<String>>,
    directory: RwLock<Directory>,
    interactions: Interactions,
    state: ConnectionCell,
    commands_registered: AtomicBool,
}

impl Shared {
    fn identity(&self) -> Option<Identity> {
        self.identity
            .read()
            .expect("identity lock poisoned")
            .clone()
    }

    fn application_id(&self) -> Option<String> {
        self.application_id
            .read()
            .expect("app id lock poisoned")
            .clone()
    }

    fn note_role(&self, role: &serenity::model::guild::Role) {
        if let Some(me) = self.identity() {
            self.directory
                .write()
                .expect("directory lock poisoned")
                .role(role.guild_id, role, &me.user_id);
        }
    }

    /// Make sure the directory knows whether `channel` is a thread: ask Discord when no
    /// event has named it. A refusal (no access) is remembered as "not a thread"; a transport
    /// failure or a 429 is not remembered, so the next message asks again.
    async fn learn_channel(&self, channel: ChannelId) {
        if self
            .directory
            .read()
            .expect("directory lock poisoned")
            .knows(channel)
        {
            return;
        }
        let parent = match self.rest.thread_parent(channel.get()).await {
            Ok(parent) => parent.map(ChannelId::new),
            Err(SendError::Rejected { .. }) => None,
            Err(err) => {
                tracing::debug!(%err, "channel lookup failed; the message is placed without it");
                return;
            }
        };
        self.directory
            .write()
            .expect("directory lock poisoned")
            .note(channel, parent);
    }

    fn note_channel(&self, channel: &serenity::model::channel::GuildChannel) {
        self.directory
            .write()
            .expect("directory lock poisoned")
            .channel(channel);
    }
}

/// One Discord application's connection.
pub struct DiscordAdapter {
    shared: Arc<Shared>,
}

impl DiscordAdapter {
    /// An adapter for `settings`; nothing connects until [`Adapter::run`].
    pub fn new(settings: DiscordSettings) -> Result<Self, BadPublicKey> {
        let verifier = match &settings.public_key {
            Some(key) => {
                Some(parse_key(key).ok_or_else(|| BadPublicKey(settings.account.clone()))?)
            }
            None => None,
        };
        let rest = Rest::new(&settings.api_url, settings.bot_token.clone());
        Ok(Self {
            shared: Arc::new(Shared {
                application_id: RwLock::new(settings.application_id.clone()),
                settings,
                rest,
                verifier,
                identity: RwLock::new(None),
                directory: RwLock::new(Directory::default()),
                interactions: Interactions::default(),
                state: ConnectionCell::default(),
                commands_registered: AtomicBool::new(false),
            }),
        })
    }
}

fn parse_key(hex: &str) -> Option<Verifier> {
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut key = [0u8; 32];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Verifier::try_new(key).ok()
}

#[async_trait]
impl Adapter for DiscordAdapter {
    fn platform(&self) -> Platform {
        Platform::Discord
    }

    fn account(&self) -> &AccountId {
        &self.shared.settings.account
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_chars: DISCORD_MAX_MESSAGE_CHARS,
            threads: true,
            ephemeral_replies: true,
            bot_posts_reach_bots: true,
        }
    }

    fn self_id(&self) -> Option<UserId> {
        self.shared.identity().map(|me| UserId(me.user_id))
    }

    fn connection(&self) -> &ConnectionCell {
        &self.shared.state
    }

    fn receive(&self) -> Receive {
        Receive::Socket
    }

    async fn run(
        &self,
        sink: &dyn EventSink,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        let settings = &self.shared.settings;
        let backoff = Backoff::new(settings.reconnect_min, settings.reconnect_max);
        let mut link = gateway::Gateway::new(&self.shared);
        run_connection(self, &mut link, self.receive(), backoff, sink, &shutdown).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, SendError> {
        let shared = &self.shared;
        match &message.ephemeral {
            Some((_user, reply)) => {
                let Some(app) = shared.application_id() else {
                    return Err(SendError::Rejected {
                        code: "no_application_id".into(),
                        message: "the account's application_id is not known yet; set it in \
                                  the config"
                            .into(),
                    });
                };
                shared
                    .interactions
                    .answer(&shared.rest, &app, &reply.token, &message.text)
                    .await
            }
            None => outbound::post(&shared.rest, message).await,
        }
    }

    fn max_upload_bytes(&self) -> Option<u64> {
        Some(outbound::MAX_UPLOAD_BYTES)
    }

    async fn upload(&self, file: &OutboundFile) -> Result<SentMessage, SendError> {
        outbound::upload(&self.shared.rest, file).await
    }

    fn can_edit(&self) -> bool {
        true
    }

    fn shows_typing(&self) -> bool {
        true
    }

    async fn edit(&self, edit: &EditMessage) -> Result<(), SendError> {
        outbound::edit(&self.shared.rest, edit).await
    }

    async fn delete(&self, message: &DeleteMessage) -> Result<(), SendError> {
        outbound::delete(&self.shared.rest, message).await
    }

    async fn typing_start(&self, at: &TypingTarget) -> Result<Option<Typing>, SendError> {
        outbound::typing(&self.shared.rest, at).await
    }

    async fn download(&self, file: &FileRef, limit: u64) -> Result<Downloaded, DownloadError> {
        self.shared.rest.attachment(file, limit).await
    }

    async fn webhook(&self, request: WebhookRequest, sink: &dyn EventSink) -> WebhookResponse {
        endpoint::handle(&self.shared, request, sink).await
    }
}
