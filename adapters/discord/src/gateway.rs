//! The gateway connection, on serenity's client: HELLO, IDENTIFY, heartbeats, RESUME after
//! RECONNECT or a dropped socket, re-IDENTIFY after INVALID_SESSION, zlib — all serenity's.
//!
//! What baton adds around it:
//!
//! - **No silent fallback to the real host.** serenity's client asks `GET /api/v10/gateway`
//!   while it is built and, if that fails, quietly uses `wss://gateway.discord.gg`. baton asks
//!   first (retrying with the contract's [`Backoff`]) and overwrites the client's URL with the
//!   answer, so an account pointed at a proxy or a fake never talks to Discord behind its back.
//! - **Rate limiter off, `api_url` as serenity's proxy**, as ARCHITECTURE.md requires; baton's own
//!   REST client ([`crate::rest`]) owns 429s.
//! - **One event at a time to the sink.** The handler only normalizes and queues; a session hands
//!   the queue to the sink one event at a time, awaiting each `accept` (Discord has no acks: the
//!   gateway's durable dedupe is what makes a replayed event harmless). serenity runs each
//!   handler call on a task of its own, so two events that arrive within microseconds of each
//!   other can reach the queue swapped; nothing here depends on their order (a thread's parent
//!   is looked up when THREAD_CREATE has not been seen yet).
//! - **Fatal close codes stop the account** (4004 bad token, 4013/4014 intents) with a message
//!   saying what to fix; anything else reconnects with backoff (the contract's
//!   [`run_connection`](baton_contract::run_connection) loop, driving the [`Gateway`] link).

use std::sync::Arc;

use async_trait::async_trait;
use baton_contract::{
    AdapterError, Backoff, ConnectionState, EventSink, InboundEvent, Link, LinkError, NotTaken,
    SendError, SessionEnd,
};
use serenity::all::{Context, EventHandler, RawEventHandler};
use serenity::client::ClientBuilder;
use serenity::gateway::{ConnectionStage, GatewayError, ShardStageUpdateEvent};
use serenity::http::HttpBuilder;
use serenity::model::application::Interaction;
use serenity::model::event::Event;
use serenity::model::gateway::GatewayIntents;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::interactions::{DEFER_AFTER, Phase};
use crate::normalize::{self, Identity};
use crate::{Shared, command};

/// What baton asks Discord for. MESSAGE_CONTENT is privileged (enable it on the Bot page), or
/// `content` arrives empty except in DMs and messages that mention the bot. GUILDS brings the
/// bot's role and the guild's threads (see [`normalize::Directory`]).
pub fn intents() -> GatewayIntents {
    GatewayIntents::GUILDS
        | GatewayIntents::GUILD_MESSAGES
        | GatewayIntents::DIRECT_MESSAGES
        | GatewayIntents::MESSAGE_CONTENT
}

/// One normalized event on its way to the sink, with the interaction to defer once taken.
struct Queued {
    event: InboundEvent,
    interaction: Option<String>,
}

/// The account's [`Link`]: one serenity client after another, all feeding one queue. Discord
/// names the bot in READY, so there is nothing to ask before connecting.
pub(crate) struct Gateway<'a> {
    shared: &'a Arc<Shared>,
    tx: mpsc::Sender<Queued>,
    rx: mpsc::Receiver<Queued>,
}

impl<'a> Gateway<'a> {
    pub(crate) fn new(shared: &'a Arc<Shared>) -> Self {
        let (tx, rx) = mpsc::channel::<Queued>(256);
        Self { shared, tx, rx }
    }
}

#[async_trait]
impl Link for Gateway<'_> {
    async fn session(
        &mut self,
        sink: &dyn EventSink,
        shutdown: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<SessionEnd, LinkError> {
        session(self.shared, sink, shutdown, &self.tx, &mut self.rx, backoff).await
    }
}

/// One serenity client, from `GET /gateway` until it stops.
async fn session(
    shared: &Arc<Shared>,
    sink: &dyn EventSink,
    shutdown: &CancellationToken,
    tx: &mpsc::Sender<Queued>,
    rx: &mut mpsc::Receiver<Queued>,
    backoff: &mut Backoff,
) -> Result<SessionEnd, LinkError> {
    let settings = &shared.settings;
    let url = match shared.rest.gateway_url().await {
        Ok(url) => url,
        Err(SendError::Rejected { code, message }) if code == "http_401" => {
            return Err(LinkError::Fatal(AdapterError::Auth(format!(
                "Discord refused the bot token of account `{}` ({message})",
                settings.account
            ))));
        }
        Err(err) => return Err(LinkError::Transient(format!("GET /gateway failed: {err}"))),
    };
    let http = HttpBuilder::new(settings.bot_token.expose())
        .proxy(settings.api_url.trim_end_matches('/'))
        .ratelimiter_disabled(true)
        .build();
    let handler = Handler {
        shared: Arc::clone(shared),
        tx: tx.clone(),
    };
    let mut client = ClientBuilder::new_with_http(http, intents())
        .raw_event_handler(handler.clone())
        .event_handler(handler)
        .await
        .map_err(|e| {
            LinkError::Fatal(AdapterError::Fatal(format!(
                "could not build the Discord client: {e}"
            )))
        })?;
    *client.ws_url.lock().await = url;
    let manager = Arc::clone(&client.shard_manager);
    let start = client.start();
    tokio::pin!(start);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                manager.shutdown_all().await;
                let _ = tokio::time::timeout(std::time::Duration::from_secs(5), &mut start).await;
                return Ok(SessionEnd::Shutdown);
            }
            queued = rx.recv() => {
                let Some(queued) = queued else { return Ok(SessionEnd::Shutdown) };
                backoff.reset();
                match sink.accept(queued.event).await {
                    Ok(()) => {}
                    Err(NotTaken::ShuttingDown) => {
                        manager.shutdown_all().await;
                        return Ok(SessionEnd::Shutdown);
                    }
                    // Discord never redelivers a dispatch: the gateway has logged the refused
                    // message (with its id); the connection stays up for the next one.
                    Err(NotTaken::StoreFailing) => continue,
                }
                if let Some(handle) = queued.interaction {
                    defer_later(shared, handle);
                }
            }
            ended = &mut start => {
                return match ended {
                    Err(serenity::Error::Gateway(GatewayError::InvalidAuthentication)) => {
                        Err(LinkError::Fatal(AdapterError::Auth(format!(
                            "Discord closed the gateway with 4004 (authentication failed) for \
                             account `{}`; check its bot_token_env",
                            settings.account
                        ))))
                    }
                    Err(serenity::Error::Gateway(
                        GatewayError::InvalidGatewayIntents | GatewayError::DisallowedGatewayIntents,
                    )) => Err(LinkError::Fatal(AdapterError::Permission(format!(
                        "Discord refused the gateway intents of account `{}`: enable the Message \
                         Content privileged intent on the application's Bot page",
                        settings.account
                    )))),
                    Err(err) => Err(LinkError::Transient(format!("Discord gateway stopped: {err}"))),
                    Ok(()) => Ok(SessionEnd::Reconnect("Discord gateway stopped".into())),
                };
            }
        }
    }
}

/// Defer the interaction if it is still unanswered after [`DEFER_AFTER`].
fn defer_later(shared: &Arc<Shared>, handle: String) {
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        tokio::time::sleep(DEFER_AFTER).await;
        shared
            .interactions
            .defer_if_pending(&shared.rest, &handle)
            .await;
    });
}

/// serenity's callbacks: keep the directory current, normalize, queue.
#[derive(Clone)]
struct Handler {
    shared: Arc<Shared>,
    tx: mpsc::Sender<Queued>,
}

impl Handler {
    async fn queue(&self, event: InboundEvent, interaction: Option<String>) {
        // A full queue means the sink is slow; waiting here slows serenity's reading, which is
        // the backpressure we want. A closed queue means the account is stopping.
        let _ = self.tx.send(Queued { event, interaction }).await;
    }

    fn ready(&self, me: Identity, application_id: u64) {
        let shared = &self.shared;
        tracing::info!(account = %shared.settings.account, user = %me.user_id, "Discord bot identified");
        *shared.identity.write().expect("identity lock poisoned") = Some(me);
        shared.state.set(ConnectionState::Connected);
        let mut app = shared.application_id.write().expect("app id lock poisoned");
        if app.is_none() {
            *app = Some(application_id.to_string());
        }
        drop(app);
        if !shared
            .commands_registered
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let shared = Arc::clone(shared);
            tokio::spawn(async move {
                let Some(app) = shared.application_id() else {
                    return;
                };
                match command::register(&shared.rest, &app, &shared.settings.command_guilds).await {
                    Ok(()) => {
                        tracing::info!(account = %shared.settings.account, "/baton registered")
                    }
                    Err(err) => tracing::warn!(account = %shared.settings.account, %err),
                }
            });
        }
    }
}

#[async_trait]
impl RawEventHandler for Handler {
    async fn raw_event(&self, _ctx: Context, event: Event) {
        let shared = &self.shared;
        let account = &shared.settings.account;
        match event {
            Event::Ready(ready) => {
                let user = &ready.ready.user;
                let me = Identity {
                    user_id: user.id.to_string(),
                    name: user.name.clone(),
                };
                self.ready(me, ready.ready.application.id.get());
            }
            Event::Resumed(_) => shared.state.set(ConnectionState::Connected),
            Event::GuildCreate(created) => {
                let Some(me) = shared.identity() else { return };
                let mut dir = shared.directory.write().expect("directory lock poisoned");
                for role in created.guild.roles.values() {
                    dir.role(created.guild.id, role, &me.user_id);
                }
                for channel in created.guild.channels.values() {
                    dir.channel(channel);
                }
                for thread in &created.guild.threads {
                    dir.channel(thread);
                }
            }
            Event::GuildRoleCreate(e) => shared.note_role(&e.role),
            Event::GuildRoleUpdate(e) => shared.note_role(&e.role),
            Event::ThreadCreate(e) => shared.note_channel(&e.thread),
            Event::ThreadUpdate(e) => shared.note_channel(&e.thread),
            Event::ThreadListSync(e) => {
                for thread in &e.threads {
                    shared.note_channel(thread);
                }
            }
            Event::ThreadDelete(e) => shared
                .directory
                .write()
                .expect("directory lock poisoned")
                .forget_thread(e.thread.id),
            Event::MessageCreate(created) => {
                let Some(me) = shared.identity() else { return };
                if created.message.guild_id.is_some() {
                    shared.learn_channel(created.message.channel_id).await;
                }
                let normalized = {
                    let dir = shared.directory.read().expect("directory lock poisoned");
                    normalize::message(account, &me, &dir, &created.message)
                };
                match normalized {
                    Ok(event) => self.queue(event, None).await,
                    Err(skip) => tracing::debug!(%account, ?skip, "Discord message skipped"),
                }
            }
            Event::InteractionCreate(created) => {
                let Interaction::Command(command) = created.interaction else {
                    return;
                };
                let normalized = {
                    let dir = shared.directory.read().expect("directory lock poisoned");
                    normalize::interaction(account, &dir, &command)
                };
                match normalized {
                    Ok(event) => {
                        let handle = normalize::reply_token(command.id.get(), &command.token);
                        shared
                            .interactions
                            .register(&command.id.to_string(), Phase::Pending);
                        self.queue(event, Some(handle)).await;
                    }
                    Err(skip) => tracing::debug!(%account, ?skip, "interaction skipped"),
                }
            }
            _ => {}
        }
    }
}

#[async_trait]
impl EventHandler for Handler {
    async fn shard_stage_update(&self, _ctx: Context, event: ShardStageUpdateEvent) {
        if event.new == ConnectionStage::Connected {
            self.shared.state.set(ConnectionState::Connected);
        } else if event.old == ConnectionStage::Connected {
            self.shared
                .state
                .set(ConnectionState::Retrying { attempt: 1 });
        }
    }
}
