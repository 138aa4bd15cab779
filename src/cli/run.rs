//! `baton run`: start the gateway and keep it up until SIGINT or SIGTERM, then drain.

use std::path::Path;

use clap::Args;

use crate::config::Config;
use crate::gateway::{Gateway, ScheduleClock, StartOptions};
use crate::store::{DatabaseLock, LockError};

/// Overrides for running several gateways (or tests) side by side.
#[derive(Debug, Args)]
pub(super) struct RunArgs {
    /// Listen on this address instead of `gateway.listen` (port 0 picks a free one).
    #[arg(long)]
    listen: Option<String>,
    /// Use this SQLite file instead of `gateway.database`.
    #[arg(long)]
    database: Option<String>,
}

pub(super) async fn run(config: &Path, args: RunArgs) -> anyhow::Result<()> {
    let config = super::load(config)?;
    let _lock = lock_database(&config, args.database.as_deref())?;
    let options = StartOptions {
        listen: args.listen,
        database: args.database,
        serve_http: true,
        clock: ScheduleClock::Timer,
    };
    let mut stop = StopSignals::install()?;
    #[cfg(unix)]
    survive_file_size_limit();
    let instance =
        (config.cluster.instance_id.clone()).unwrap_or_else(crate::cluster::default_instance_id);
    // Flushed when `run` returns, after the drain.
    let configured = config.telemetry.otlp_endpoint.as_deref();
    let _traces = crate::trace::start(configured, &instance)?;
    let gateway = Gateway::start(config, options).await?;
    if let Some(addr) = gateway.addr() {
        tracing::info!(%addr, "baton is listening");
        println!("baton listening on http://{addr}");
    }
    stop.received().await;
    tracing::info!("shutting down: draining turns in flight");
    gateway.shutdown().await;
    Ok(())
}

/// Takes the database's lock before anything else opens it (`store/lock.rs`): a second
/// gateway on the same file must stop here, not run beside the first. Not on PostgreSQL
/// (`gateway.database_url_env`), which several instances share by design, through leases.
pub(super) fn lock_database(
    config: &Config,
    database: Option<&str>,
) -> Result<Option<DatabaseLock>, LockError> {
    if config.gateway.database_url_env.is_some() {
        return Ok(None);
    }
    DatabaseLock::acquire(database.unwrap_or(&config.gateway.database))
}

/// SIGINT and SIGTERM, handled from before the gateway starts. A service manager (or a test)
/// may send SIGTERM the moment it reads `baton listening on`; a signal that arrives before its
/// handler exists kills the process on the spot, with no drain and no clean exit.
#[cfg(unix)]
struct StopSignals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl StopSignals {
    fn install() -> anyhow::Result<Self> {
        use anyhow::Context as _;
        use tokio::signal::unix::{SignalKind, signal};
        let handle = |kind| {
            signal(kind)
                .context("cannot handle SIGINT and SIGTERM, so baton could not drain on stop")
        };
        Ok(Self {
            interrupt: handle(SignalKind::interrupt())?,
            terminate: handle(SignalKind::terminate())?,
        })
    }

    async fn received(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

/// Ctrl-C, where there is no SIGTERM.
#[cfg(not(unix))]
struct StopSignals;

#[cfg(not(unix))]
impl StopSignals {
    fn install() -> anyhow::Result<Self> {
        Ok(Self)
    }

    async fn received(&mut self) {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A file size limit (`ulimit -f`) kills a process with SIGXFSZ at the first write past it.
/// Handling the signal turns that into a failed write instead, which the store reports like a
/// full disk: events are refused loudly and `/readyz` goes false, rather than the gateway
/// vanishing mid-turn.
#[cfg(unix)]
fn survive_file_size_limit() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::from_raw(libc::SIGXFSZ)) {
        Ok(mut xfsz) => {
            tokio::spawn(async move {
                while xfsz.recv().await.is_some() {
                    tracing::error!(
                        "a write went past the file size limit (ulimit -f); the store refuses \
                         new events until writes succeed again"
                    );
                }
            });
        }
        Err(err) => {
            tracing::warn!(%err, "cannot handle SIGXFSZ; a file size limit will stop baton")
        }
    }
}
