//! The skeleton of every adapter's [`Adapter::run`] ([`run_connection`]), so Slack, Discord,
//! Feishu and the local channel connect, retry, report their state and stop alike.
//!
//! The run's shape is always the same: learn who the account is (retrying transient failures
//! with the contract's [`Backoff`], stopping on refused credentials), then either keep a socket
//! up (session after session, with backoff between them) or, in webhook mode, stand ready until
//! shutdown; and whatever happens, end [`ConnectionState::Stopped`]. An adapter supplies only
//! what is its own through a [`Link`]: how it asks who it is, and one session of its socket.

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::adapter::{Adapter, AdapterError, EventSink};
use crate::backoff::Backoff;
use crate::connection::{ConnectionState, Receive, Trouble};

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
        if let Some(trouble) = err.trouble() {
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
}
