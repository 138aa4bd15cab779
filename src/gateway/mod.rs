//! The running gateway: store, roster, dispatcher, adapters and the HTTP listener, started in
//! that order and stopped in reverse, with in-flight turns drained.
//!
//! `baton run`, `baton chat` and the end-to-end tests all start a [`Gateway`]; tests get the
//! same code path as production, on port 0 and a temporary database.

mod assemble;
mod build;
mod connections;
mod database;
mod retention;
mod runtime;

pub use build::AdapterOverride;
pub use database::Database;
pub use retention::RetentionError;
pub use runtime::runtime;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton_contract::{EventSink, Platform};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::backend::{KILL_AFTER, Reaper};
use crate::cluster::{Leases, connect_while_held};
use crate::config::{Config, resolve_secret};
use crate::dispatcher::Dispatcher;
use crate::engine::Engine;
use crate::http;
use crate::local::LocalHub;
use crate::relay::Relay;
use crate::schedule::{ScheduleError, Scheduler};
use crate::store::{Registered, Store, StoreError, StoreOptions};
use crate::timing::now_ms;

use assemble::Assembled;
use retention::Retention;

/// How the gateway starts, beyond the config file.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// Override `gateway.listen`.
    pub listen: Option<String>,
    /// Override `gateway.database`.
    pub database: Option<String>,
    /// Serve HTTP (off for `baton chat`).
    pub serve_http: bool,
    /// What drives heartbeats and cron entries.
    pub clock: ScheduleClock,
}

/// What drives the scheduler ([`Scheduler::tick`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ScheduleClock {
    /// The real time, once a second (`baton run`).
    #[default]
    Timer,
    /// Only explicit [`Scheduler::tick`] calls: tests drive the clock; `baton chat` runs no
    /// schedules.
    Manual,
}

/// Why the gateway could not start. Each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The store would not open.
    #[error("cannot open the database: {0}")]
    Store(#[from] StoreError),
    /// `gateway.database_url_env` names no usable URL.
    #[error("gateway.database_url_env: {0}")]
    DatabaseUrl(String),
    /// A system prompt file is unreadable.
    #[error("bot `{bot}`: cannot read system_prompt_file {}: {source}", .path.display())]
    PromptFile {
        /// The bot.
        bot: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A bot's id is not a bot name (the config check refuses it first).
    #[error(transparent)]
    BotName(#[from] crate::bot_id::NotABotId),
    /// A backend could not be built.
    #[error("bot `{bot}`: {message}")]
    Backend {
        /// The bot.
        bot: String,
        /// Why.
        message: String,
    },
    /// An account's platform adapter is not in this build.
    #[error(
        "account `{account}` is on {platform}, whose adapter is not part of this build yet; \
         remove the account or use the `local` platform"
    )]
    AdapterUnavailable {
        /// The platform.
        platform: Platform,
        /// The account.
        account: String,
    },
    /// An account's credentials or settings are unusable.
    #[error("account `{account}`: {message}")]
    AccountSetup {
        /// The account.
        account: String,
        /// What to fix.
        message: String,
    },
    /// A heartbeat or cron entry is unusable.
    #[error("{0}; run `baton check` for every problem with its line")]
    Schedule(#[from] ScheduleError),
    /// A `[retention]` value is unusable.
    #[error(transparent)]
    Retention(#[from] RetentionError),
    /// `store.wal_limit_mb` is out of range.
    #[error("store.wal_limit_mb = {0} is too large; run `baton check` for the range")]
    WalLimit(u64),
    /// The relay could not be built.
    #[error(transparent)]
    Relay(#[from] crate::relay::BuildError),
    /// A `[[chats]]` glob did not compile.
    #[error("bad glob in [[chats]]: {0}")]
    Glob(#[from] globset::Error),
    /// The `[[chats]]` entries could not be built.
    #[error(transparent)]
    ChatRules(#[from] crate::roster::ChatRulesError),
    /// Another live instance already runs under this instance's id.
    #[error(
        "another running instance uses cluster.instance_id `{id}` (it renewed its leases \
         {renewed_ago_ms} ms ago); give each instance its own `cluster.instance_id`, or remove \
         the key to use the host name and process id"
    )]
    InstanceTaken {
        /// The id.
        id: String,
        /// How long ago the other one renewed.
        renewed_ago_ms: i64,
    },
    /// The HTTP listener could not bind.
    #[error("cannot listen on {addr}: {source}; pick another address with --listen")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
}

/// A started gateway.
pub struct Gateway {
    dispatcher: Dispatcher,
    relay: Relay,
    scheduler: Arc<Scheduler>,
    hub: Arc<LocalHub>,
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
    /// Each account's run (kept apart: a clean shutdown waits for them, then frees the leases).
    accounts: JoinSet<()>,
    leases: Arc<Leases>,
    addr: Option<SocketAddr>,
    /// `gateway.drain_seconds`: how long a shutdown lets in-flight turns finish.
    drain: Duration,
    /// Ends the process groups of `command` turns; a shutdown waits for it.
    reaper: Reaper,
}

impl Gateway {
    /// Open the store, build the roster, connect every account, serve HTTP.
    pub async fn start(config: Config, options: StartOptions) -> Result<Gateway, StartError> {
        Self::start_with_env(config, options, &|name| std::env::var(name).ok()).await
    }

    /// [`Gateway::start`] with an injectable environment.
    pub async fn start_with_env(
        config: Config,
        options: StartOptions,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Gateway, StartError> {
        Self::start_with_adapters(config, options, env, &AdapterOverride::none()).await
    }

    /// [`Gateway::start_with_env`] where `adapters` may supply the adapter of any configured
    /// account in place of its platform's (see [`AdapterOverride`]).
    pub async fn start_with_adapters(
        mut config: Config,
        options: StartOptions,
        env: &dyn Fn(&str) -> Option<String>,
        adapters: &AdapterOverride,
    ) -> Result<Gateway, StartError> {
        if let Some(listen) = options.listen {
            config.gateway.listen = listen;
        }
        if let Some(database) = options.database {
            config.gateway.database = database;
        }
        let retention = Retention::from_config(&config.retention)?;
        let wal_limit = config
            .store
            .wal_limit_mb
            .checked_mul(1024 * 1024)
            .ok_or(StartError::WalLimit(config.store.wal_limit_mb))?;
        let database = Database::configured(&config, env)?;
        let sole_instance = matches!(database, Database::Sqlite(_));
        let store = database.open(StoreOptions { wal_limit }).await?;
        let lease = Duration::from_secs(config.cluster.lease_seconds);
        let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        // A configured id may be given to two live processes by mistake; the default one (host
        // and pid) can only be this process's own, left by a gateway it ran before: taken over.
        let twin_window = if config.cluster.instance_id.is_some() {
            lease_ms
        } else {
            0
        };
        let instance = config
            .cluster
            .instance_id
            .get_or_insert_with(crate::cluster::default_instance_id)
            .clone();
        let version = env!("CARGO_PKG_VERSION");
        if let Registered::LiveTwin { renewed_ago_ms } = store
            .instance_register(&instance, version, twin_window)
            .await?
        {
            return Err(StartError::InstanceTaken {
                id: instance,
                renewed_ago_ms,
            });
        }
        if sole_instance {
            store.instances_forget_others(&instance).await?;
        }
        let api_token = resolve_secret(config.gateway.api_token_env.as_deref(), env);
        let config = Arc::new(config);
        let Assembled {
            engine,
            dispatcher,
            relay,
            chains,
            scheduler,
            hub,
            reaper,
        } = assemble::assemble(Arc::clone(&config), store, env, adapters)?;
        // Read before anything below can start a turn (and put up an indicator of its own).
        let typing_left = crate::engine::typing_left_up(&engine).await?;
        let recovered = crate::relay::recover(&relay, true).await?;
        if recovered > 0 {
            tracing::info!(recovered, "picked up deliveries left open by the last run");
        }
        let picked = crate::chains::recover(&chains, true).await?;
        if picked > 0 {
            tracing::info!(
                chains = picked,
                "picked up chains left open by the last run"
            );
        }
        let shutdown = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let mut accounts = JoinSet::new();
        let leases = Arc::new(Leases::new(
            engine.store().clone(),
            instance,
            lease,
            crate::cluster::socket_leases(engine.roster().accounts()),
        ));
        tasks.spawn(Arc::clone(&leases).run(shutdown.clone()));
        tasks.spawn(crate::relay::serve(
            relay.clone(),
            leases.live(),
            shutdown.clone(),
        ));
        tasks.spawn(crate::chains::serve(
            chains,
            leases.live(),
            shutdown.clone(),
        ));
        tasks.spawn({
            let (store, stop) = (engine.store().clone(), shutdown.clone());
            async move {
                let follow = async {
                    tokio::join!(
                        store.follow_chat_settings(),
                        store.follow_escalation_chats()
                    )
                };
                tokio::select! {
                    _ = follow => {}
                    () = stop.cancelled() => {}
                }
            }
        });
        for (index, account) in engine.roster().accounts().iter().enumerate() {
            let (events, watched, stop) =
                (engine.events().clone(), engine.clone(), shutdown.clone());
            tasks.spawn(async move {
                let account = &watched.roster().accounts()[index];
                connections::announce(events, account, stop).await;
            });
            let holding = leases.watch(&crate::cluster::lease_key(account));
            let recover = dispatcher.clone();
            tasks.spawn(recover.recover_left_overs(index, holding.clone(), shutdown.clone()));
            let adapter = Arc::clone(&account.adapter);
            let sink = dispatcher.clone();
            let stop = shutdown.clone();
            let Some(holding) = holding else {
                accounts.spawn(async move {
                    if let Err(err) = adapter.run(&sink as &dyn EventSink, stop).await {
                        tracing::error!(platform = %adapter.platform(), account = %adapter.account(), %err, "account stopped");
                    }
                });
                continue;
            };
            accounts.spawn(async move {
                connect_while_held(adapter.as_ref(), &sink, holding, stop).await;
            });
        }
        tasks.spawn(crate::engine::take_down_typing(engine.clone(), typing_left));
        tasks.spawn(maintenance(
            dispatcher.clone(),
            relay.clone(),
            retention,
            shutdown.clone(),
        ));
        if options.clock == ScheduleClock::Timer && scheduler.has_jobs() {
            let timer = crate::schedule::run_timer(Arc::clone(&scheduler), shutdown.clone());
            tasks.spawn(timer);
        }
        let addr = if options.serve_http {
            open_file_limit(config.gateway.max_connections);
            let listener =
                http::bind(&config.gateway.listen)
                    .await
                    .map_err(|source| StartError::Listen {
                        addr: config.gateway.listen.clone(),
                        source,
                    })?;
            let addr = listener.local_addr().ok();
            if let Some(addr) = addr {
                engine.running().set_mcp_url(mcp_url(addr));
            }
            let state = http::AppState::new(
                dispatcher.clone(),
                relay.clone(),
                Arc::clone(&hub),
                api_token,
            );
            tasks.spawn(http::serve(listener, state, shutdown.clone()));
            addr
        } else {
            None
        };
        let drain = Duration::from_secs(config.gateway.drain_seconds);
        Ok(Gateway {
            dispatcher,
            relay,
            scheduler,
            hub,
            shutdown,
            tasks,
            accounts,
            leases,
            addr,
            drain,
            reaper,
        })
    }

    /// The HTTP address actually bound (port 0 resolved).
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The pipeline.
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    /// Heartbeats and cron entries: [`Scheduler::tick`] runs what is due,
    /// [`Scheduler::next_due`] says when each job runs next.
    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.scheduler
    }

    /// The local channel's rooms.
    pub fn hub(&self) -> &Arc<LocalHub> {
        &self.hub
    }

    /// Nothing left to do: no local event waiting for the pipeline, no pipeline run in flight.
    /// Replies cascade (a bot's reply is a new event) and each is counted before the run that
    /// posted it ends, so "idle" means the conversation has come to rest.
    pub fn is_idle(&self) -> bool {
        self.hub.pending() == 0 && self.dispatcher.in_flight() == 0
    }

    /// The turn kernel: store, roster, counters, lanes.
    pub fn engine(&self) -> &Engine {
        self.dispatcher.engine()
    }

    /// Bot-to-bot traffic: what agent tools send through.
    pub fn relay(&self) -> &Relay {
        &self.relay
    }

    /// The store.
    pub fn store(&self) -> &Store {
        self.dispatcher.engine().store()
    }

    /// Stop taking events, let in-flight turns finish (up to `gateway.drain_seconds`), stop the
    /// listener and adapters, and close the store. Returns whether every turn finished in time.
    pub async fn shutdown(mut self) -> bool {
        let grace = self.drain;
        self.shutdown.cancel();
        let mut accounts = std::mem::take(&mut self.accounts);
        let release = async {
            // Sockets closed first: another instance may connect an account once it is free.
            let closed = tokio::time::timeout(grace, async {
                while accounts.join_next().await.is_some() {}
            });
            if closed.await.is_err() {
                accounts.abort_all();
            }
            self.leases.release().await;
        };
        let (drained, ()) = tokio::join!(self.dispatcher.drain(grace), release);
        if !drained {
            // Stopped turns record themselves as interrupted, and their agents' processes get
            // SIGTERM, then SIGKILL after 5 s.
            let running = self.dispatcher.engine().running().interrupt_all();
            tracing::warn!(
                ?grace,
                running,
                "turns still running after the drain period; interrupting them"
            );
            let recorded = KILL_AFTER + Duration::from_secs(1);
            let _ = tokio::time::timeout(recorded, self.dispatcher.engine().tasks().wait()).await;
        }
        self.reaper.settled().await;
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        // Only now, its turns drained: from here on another instance takes over what is left.
        let engine = self.dispatcher.engine();
        if let Some(id) = &engine.config().cluster.instance_id
            && let Err(err) = engine.store().instance_deregister(id).await
        {
            tracing::warn!(%err, "could not remove this instance's row; the others take over what it left once it is a lease old");
        }
        if let Err(err) = self.store().close().await {
            tracing::error!(%err, "closing the store failed");
        }
        drained
    }
}

/// Where an agent on this machine reaches `/mcp` on `addr`: a wildcard address is reached on
/// loopback.
fn mcp_url(addr: SocketAddr) -> String {
    let host = match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => "127.0.0.1".to_owned(),
        ip if ip.is_unspecified() => "[::1]".to_owned(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        std::net::IpAddr::V4(ip) => ip.to_string(),
    };
    format!("http://{host}:{}/mcp", addr.port())
}

/// Raise the open-file limit as far as it goes, log it, and warn when it cannot hold the
/// connections the config allows plus the files the gateway needs besides.
fn open_file_limit(max_connections: usize) {
    /// The database, its WAL, the platforms' connections, the backends' HTTP clients.
    const OTHER_FILES: u64 = 128;
    let Some(limit) = http::raise_open_file_limit() else {
        return;
    };
    tracing::info!(open_files = limit, "open-file limit");
    let needed = (max_connections + http::SPARE_CONNECTIONS) as u64 + OTHER_FILES;
    if limit < needed {
        tracing::warn!(
            open_files = limit,
            needed,
            "the open-file limit is below gateway.max_connections plus what the gateway needs \
             besides; lower gateway.max_connections or raise the hard limit (ulimit -Hn, \
             LimitNOFILE= in a systemd unit)"
        );
    }
}

/// Forget idle guard state every minute; purge expired dedupe records and apply `[retention]`
/// at start and every hour.
async fn maintenance(
    dispatcher: Dispatcher,
    relay: Relay,
    retention: Retention,
    stop: CancellationToken,
) {
    let engine = dispatcher.engine();
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        dispatcher.retain_recent();
        relay.sends().retain_recent();
        crate::engine::sweep_typing(engine.clone()).await;
        if ticks.is_multiple_of(60) {
            if let Err(err) = engine.store().purge_expired(now_ms()).await {
                tracing::warn!(%err, "could not purge expired dedupe records");
            }
            retention.apply(engine.store(), now_ms()).await;
        }
        ticks += 1;
    }
}

#[cfg(test)]
pub(crate) mod testing;
