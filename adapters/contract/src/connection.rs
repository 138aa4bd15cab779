//! An account's connection: the state it is in ([`ConnectionCell`], which the gateway watches)
//! and the skeleton of every adapter's [`Adapter::run`] ([`run_connection`]), so Slack,
//! Discord, Feishu and the local channel connect, retry, report their state and stop alike.
//!
//! The run's shape is always the same: learn who the account is (retrying transient failures
//! with the contract's [`Backoff`], stopping on refused credentials), then either keep a socket
//! up (session after session, with backoff between them) or, in webhook mode, stand ready until
//! shutdown; and whatever happens, end [`ConnectionState::Stopped`]. An adapter supplies only
//! what is its own through a [`Link`]: how it asks who it is, and one session of its socket.

use async_trait::async_trait;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::adapter::{Adapter, AdapterError, EventSink};
use crate::backoff::Backoff;

/// How an account's connection is doing, for `/readyz` and `/baton status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// Not started yet, or starting.
    Connecting,
    /// Connected and receiving events (or webhook mode, ready to receive).
    Connected,
    /// Lost the connection; reconnecting with backoff. `attempt` counts from 1.
    Retrying {
        /// How many reconnect attempts so far.
        attempt: u32,
    },
    /// Another instance sharing the database holds this account's lease and connects it; this
    /// one takes over if that one stops renewing.
    Standby,
    /// Stopped for good (shutdown, or a fatal error such as a revoked token).
    Stopped,
}

impl ConnectionState {
    /// The state's name: `connecting`, `connected`, `retrying`, `stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Connecting => "connecting",
            ConnectionState::Connected => "connected",
            ConnectionState::Retrying { .. } => "retrying",
            ConnectionState::Standby => "standby",
            ConnectionState::Stopped => "stopped",
        }
    }

    /// Reconnect attempts so far, while retrying.
    pub fn attempt(self) -> Option<u32> {
        match self {
            ConnectionState::Retrying { attempt } => Some(attempt),
            _ => None,
        }
    }

    /// Ready means the account can receive: connected, on its way back with backoff after a
    /// few attempts at most, or connected by another instance (standby). An account still
    /// failing after [`Self::READY_RETRIES`] attempts is not ready: it is not coming back by
    /// itself.
    pub fn is_ready(self) -> bool {
        match self {
            ConnectionState::Connected | ConnectionState::Standby => true,
            ConnectionState::Retrying { attempt } => attempt <= Self::READY_RETRIES,
            ConnectionState::Connecting | ConnectionState::Stopped => false,
        }
    }

    /// Reconnect attempts an account may make and still count as ready (a blip, a platform's
    /// restart); with the contract's backoff that is about the first 7 seconds.
    pub const READY_RETRIES: u32 = 3;
}

/// Why an account is not connected, as far as the platform said: what `/readyz`, the dashboard
/// and `/baton status` show beside its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trouble {
    /// The platform refused the credentials (a wrong, revoked or expired token or secret).
    InvalidToken,
    /// The credentials work but lack a scope or intent the account needs.
    MissingScope,
    /// The platform did not answer, or the connection failed on the way.
    Unreachable,
}

impl Trouble {
    /// How it is shown: `invalid token`, `missing scope`, `unreachable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Trouble::InvalidToken => "invalid token",
            Trouble::MissingScope => "missing scope",
            Trouble::Unreachable => "unreachable",
        }
    }

    /// The trouble a fatal error is: refused credentials or a missing permission; `None` for
    /// the other fatal errors (a setting the adapter cannot use).
    pub fn of(err: &AdapterError) -> Option<Trouble> {
        match err {
            AdapterError::Auth(_) => Some(Trouble::InvalidToken),
            AdapterError::Permission(_) => Some(Trouble::MissingScope),
            AdapterError::Fatal(_) => None,
        }
    }
}

impl std::fmt::Display for Trouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// An account's connection state, set by its adapter (through [`run_connection`], and from
/// inside its sessions: Slack's `hello`, Discord's READY) and watched by the gateway: `/readyz`
/// reads it, and each change is announced on the gateway's event stream as it happens (a watch
/// channel, so nobody polls).
#[derive(Debug)]
pub struct ConnectionCell {
    state: watch::Sender<ConnectionState>,
    /// Why the last attempt failed, until the account connects again.
    trouble: std::sync::Mutex<Option<Trouble>>,
}

impl Default for ConnectionCell {
    /// [`ConnectionState::Connecting`].
    fn default() -> Self {
        Self::new(ConnectionState::Connecting)
    }
}

impl ConnectionCell {
    /// A cell holding `state`.
    pub fn new(state: ConnectionState) -> Self {
        Self {
            state: watch::channel(state).0,
            trouble: std::sync::Mutex::new(None),
        }
    }

    /// Move to `state`; watchers are woken when it differs from the last one. Connected (here
    /// or by another instance) clears the trouble.
    pub fn set(&self, state: ConnectionState) {
        if matches!(state, ConnectionState::Connected | ConnectionState::Standby) {
            *self.trouble_slot() = None;
        }
        self.state.send_if_modified(|now| {
            let changed = *now != state;
            *now = state;
            changed
        });
    }

    /// The state now.
    pub fn get(&self) -> ConnectionState {
        *self.state.borrow()
    }

    /// A receiver woken on every change.
    pub fn watch(&self) -> watch::Receiver<ConnectionState> {
        self.state.subscribe()
    }

    /// Say why the last attempt to connect failed.
    pub fn set_trouble(&self, trouble: Trouble) {
        *self.trouble_slot() = Some(trouble);
    }

    /// Why the account is not connected, when the last attempt said.
    pub fn trouble(&self) -> Option<Trouble> {
        *self.trouble_slot()
    }

    fn trouble_slot(&self) -> std::sync::MutexGuard<'_, Option<Trouble>> {
        // A panic while holding it cannot leave the value half-written: it is one word.
        self.trouble.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How an account receives its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receive {
    /// The adapter dials out and keeps a socket up ([`Link::session`]).
    Socket,
    /// The platform posts to `/hooks/...`: nothing to dial; ready until shutdown.
    Webhooks,
}

/// How one socket session ended, when nothing failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEnd {
    /// The gateway is shutting down: stop.
    Shutdown,
    /// The platform closed the socket or asked for a new one: reconnect (after the backoff).
    Reconnect(String),
}

/// Why a call of a [`Link`] failed: whether trying again can help.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// Worth trying again after the backoff's delay: a timeout, a 5xx, a dropped socket.
    #[error("{0}")]
    Transient(String),
    /// Stops the account: refused credentials, intents the platform will not grant.
    #[error(transparent)]
    Fatal(AdapterError),
}

/// What only the adapter knows about reaching its platform; [`run_connection`] drives it.
#[async_trait]
pub trait Link: Send {
    /// Learn who the account is on the platform (Slack's `auth.test`, Feishu's `bot/v3/info`)
    /// and keep it. Called until it succeeds. The default learns nothing (Discord is told in
    /// READY; the local channel knows already).
    async fn identify(&mut self) -> Result<(), LinkError> {
        Ok(())
    }

    /// One session of the socket, from dialing to its end. Set the account's state to
    /// [`ConnectionState::Connected`] once the platform has accepted it, and reset `backoff`
    /// once the session has proved healthy, so the next reconnect starts from the shortest
    /// delay.
    async fn session(
        &mut self,
        sink: &dyn EventSink,
        shutdown: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<SessionEnd, LinkError>;
}

/// The whole run of `adapter`'s account, kept in its [`Adapter::connection`] cell: learn the
/// identity with retries, then keep the socket up through `link` or wait for webhooks, until
/// `shutdown` or a fatal failure. Ends [`ConnectionState::Stopped`] either way. `backoff` sets
/// the delays; identifying and reconnecting each start from its first.
pub async fn run_connection(
    adapter: &dyn Adapter,
    link: &mut dyn Link,
    receive: Receive,
    backoff: Backoff,
    sink: &dyn EventSink,
    shutdown: &CancellationToken,
) -> Result<(), AdapterError> {
    let run = Run { adapter, shutdown };
    let result = run.connect(link, receive, backoff, sink).await;
    adapter.connection().set(ConnectionState::Stopped);
    result
}

/// One account's run in progress.
struct Run<'a> {
    adapter: &'a dyn Adapter,
    shutdown: &'a CancellationToken,
}

impl Run<'_> {
    async fn connect(
        &self,
        link: &mut dyn Link,
        receive: Receive,
        backoff: Backoff,
        sink: &dyn EventSink,
    ) -> Result<(), AdapterError> {
        if !self.identify(link, backoff.clone()).await? {
            return Ok(());
        }
        match receive {
            Receive::Webhooks => {
                self.adapter.connection().set(ConnectionState::Connected);
                self.shutdown.cancelled().await;
                Ok(())
            }
            Receive::Socket => self.keep_up(link, backoff, sink).await,
        }
    }

    /// [`Link::identify`] until it succeeds; `false` when shut down first.
    async fn identify(
        &self,
        link: &mut dyn Link,
        mut backoff: Backoff,
    ) -> Result<bool, AdapterError> {
        loop {
            match link.identify().await {
                Ok(()) => return Ok(true),
                Err(LinkError::Fatal(fatal)) => return Err(self.fatal(fatal)),
                Err(LinkError::Transient(why)) => {
                    self.adapter.connection().set_trouble(Trouble::Unreachable);
                    let (platform, account) = (self.adapter.platform(), self.adapter.account());
                    tracing::warn!(%platform, %account, %why, "could not learn the bot's identity; retrying");
                    if !self.wait(&mut backoff).await {
                        return Ok(false);
                    }
                }
            }
        }
    }

    /// Session after session, with the backoff between them, until shutdown or a fatal failure.
    async fn keep_up(
        &self,
        link: &mut dyn Link,
        mut backoff: Backoff,
        sink: &dyn EventSink,
    ) -> Result<(), AdapterError> {
        let (platform, account) = (self.adapter.platform(), self.adapter.account());
        loop {
            match link.session(sink, self.shutdown, &mut backoff).await {
                Ok(SessionEnd::Shutdown) => return Ok(()),
                Ok(SessionEnd::Reconnect(reason)) => {
                    tracing::info!(%platform, %account, %reason, "connection closed; reconnecting");
                }
                Err(LinkError::Fatal(fatal)) => return Err(self.fatal(fatal)),
                Err(LinkError::Transient(why)) => {
                    self.adapter.connection().set_trouble(Trouble::Unreachable);
                    tracing::warn!(%platform, %account, %why, "connection failed; reconnecting");
                }
            }
            if !self.wait(&mut backoff).await {
                return Ok(());
            }
        }
    }

    /// A fatal error, its trouble recorded for `/readyz` first.
    fn fatal(&self, err: AdapterError) -> AdapterError {
        if let Some(trouble) = Trouble::of(&err) {
            self.adapter.connection().set_trouble(trouble);
        }
        err
    }

    /// Say we are retrying, then wait out the backoff; `false` when shut down first.
    async fn wait(&self, backoff: &mut Backoff) -> bool {
        self.adapter.connection().set(ConnectionState::Retrying {
            attempt: backoff.attempt() + 1,
        });
        backoff.wait(self.shutdown).await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::adapter::NotTaken;
    use crate::ids::Platform;
    use crate::inbound::InboundEvent;
    use crate::stub::StubAdapter;

    struct Nowhere;

    #[async_trait]
    impl EventSink for Nowhere {
        async fn accept(&self, _: InboundEvent) -> Result<(), NotTaken> {
            Ok(())
        }
    }

    /// A link that answers from scripts and records the state it saw at each call.
    struct Scripted {
        account: Arc<StubAdapter>,
        identities: VecDeque<Result<(), LinkError>>,
        sessions: VecDeque<Result<SessionEnd, LinkError>>,
        seen: Vec<ConnectionState>,
    }

    #[async_trait]
    impl Link for Scripted {
        async fn identify(&mut self) -> Result<(), LinkError> {
            self.seen.push(self.account.connection().get());
            self.identities.pop_front().unwrap_or(Ok(()))
        }

        async fn session(
            &mut self,
            _: &dyn EventSink,
            _: &CancellationToken,
            _: &mut Backoff,
        ) -> Result<SessionEnd, LinkError> {
            self.seen.push(self.account.connection().get());
            self.account.connection().set(ConnectionState::Connected);
            self.sessions
                .pop_front()
                .unwrap_or(Ok(SessionEnd::Shutdown))
        }
    }

    fn scripted(
        identities: Vec<Result<(), LinkError>>,
        sessions: Vec<Result<SessionEnd, LinkError>>,
    ) -> Scripted {
        Scripted {
            account: Arc::new(StubAdapter::new(Platform::Local, "a")),
            identities: identities.into(),
            sessions: sessions.into(),
            seen: Vec::new(),
        }
    }

    fn transient<T>() -> Result<T, LinkError> {
        Err(LinkError::Transient("timed out".into()))
    }

    fn fatal<T>(why: &str) -> Result<T, LinkError> {
        Err(LinkError::Fatal(AdapterError::Auth(why.into())))
    }

    fn quick() -> Backoff {
        Backoff::new(Duration::from_millis(1), Duration::from_millis(2))
    }

    async fn run(
        link: &mut Scripted,
        receive: Receive,
        backoff: Backoff,
        shutdown: &CancellationToken,
    ) -> Result<(), AdapterError> {
        let account = Arc::clone(&link.account);
        run_connection(&*account, link, receive, backoff, &Nowhere, shutdown).await
    }

    #[tokio::test]
    async fn identifies_with_retries_then_reconnects_until_shutdown() {
        let mut link = scripted(
            vec![transient(), transient(), Ok(())],
            vec![
                Ok(SessionEnd::Reconnect("refresh".into())),
                transient(),
                Ok(SessionEnd::Shutdown),
            ],
        );
        let mut changes = link.account.connection().watch();
        let shutdown = CancellationToken::new();
        run(&mut link, Receive::Socket, quick(), &shutdown)
            .await
            .unwrap();
        use ConnectionState::*;
        assert_eq!(
            link.seen,
            [
                Connecting,
                Retrying { attempt: 1 },
                Retrying { attempt: 2 },
                // The socket's backoff starts afresh.
                Retrying { attempt: 2 },
                Retrying { attempt: 1 },
                Retrying { attempt: 2 },
            ]
        );
        assert_eq!(link.account.connection().get(), Stopped);
        assert!(changes.has_changed().unwrap(), "watchers are woken");
        assert_eq!(*changes.borrow_and_update(), Stopped);
    }

    #[tokio::test]
    async fn a_fatal_failure_stops_the_account() {
        let shutdown = CancellationToken::new();
        let mut link = scripted(vec![fatal("bad token")], vec![]);
        let err = run(&mut link, Receive::Socket, quick(), &shutdown)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "authentication failed: bad token");
        assert_eq!(link.account.connection().get(), ConnectionState::Stopped);
        assert_eq!(
            link.sessions.len(),
            0,
            "no session after a refused identity"
        );

        let mut link = scripted(vec![], vec![fatal("intents"), Ok(SessionEnd::Shutdown)]);
        let err = run(&mut link, Receive::Socket, quick(), &shutdown)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("intents"), "{err}");
        assert_eq!(link.sessions.len(), 1, "no reconnect after a fatal session");
        assert_eq!(link.account.connection().get(), ConnectionState::Stopped);
    }

    #[tokio::test]
    async fn webhooks_are_ready_until_shutdown_and_open_no_session() {
        let mut link = scripted(vec![], vec![transient()]);
        let mut changes = link.account.connection().watch();
        let shutdown = CancellationToken::new();
        let stop = shutdown.clone();
        let stopper = tokio::spawn(async move {
            changes
                .wait_for(|state| *state == ConnectionState::Connected)
                .await
                .expect("the cell outlives the run");
            stop.cancel();
        });
        let run = run(&mut link, Receive::Webhooks, quick(), &shutdown);
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .expect("the run ends at shutdown")
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), stopper)
            .await
            .expect("webhook mode reported Connected")
            .unwrap();
        assert_eq!(link.seen, [ConnectionState::Connecting], "identified only");
        assert_eq!(link.sessions.len(), 1, "no session was opened");
        assert_eq!(link.account.connection().get(), ConnectionState::Stopped);
    }

    #[tokio::test]
    async fn shutdown_during_a_retry_stops_quietly() {
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        let slow = Backoff::new(Duration::from_secs(60), Duration::from_secs(60));
        let mut link = scripted(vec![transient()], vec![]);
        let run = run(&mut link, Receive::Socket, slow, &shutdown);
        tokio::time::timeout(Duration::from_secs(5), run)
            .await
            .expect("the backoff's wait gives way to the shutdown")
            .unwrap();
        assert_eq!(link.seen, [ConnectionState::Connecting]);
        assert_eq!(link.account.connection().get(), ConnectionState::Stopped);
    }

    #[test]
    fn the_cell_wakes_watchers_only_on_a_change() {
        let cell = ConnectionCell::default();
        let mut changes = cell.watch();
        cell.set(ConnectionState::Connecting);
        assert!(!changes.has_changed().unwrap(), "same state, nobody woken");
        cell.set(ConnectionState::Retrying { attempt: 1 });
        assert!(changes.has_changed().unwrap());
        assert_eq!(
            *changes.borrow_and_update(),
            ConnectionState::Retrying { attempt: 1 }
        );
        assert_eq!(cell.get().attempt(), Some(1));
    }
}
