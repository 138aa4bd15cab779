//! A socket account connected only while this instance holds its lease.
//!
//! The adapter runs under a token cancelled the moment the lease's deadline passes, so its
//! session closes the socket, and every event it hands over is first checked against the
//! deadline ([`Fenced`]): one read from the socket after a pause (the process was stopped past
//! its deadline and has just woken) is refused like an event during shutdown, so the adapter
//! does not acknowledge it and the platform delivers it again, to the new holder. Then the
//! account waits, [`ConnectionState::Standby`], until the lease is this instance's again.

use async_trait::async_trait;
use baton_contract::{Adapter, ConnectionState, EventSink, InboundEvent, NotTaken};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Holding;

/// Run `adapter`'s account whenever `holding` says this instance holds it, until `stop`.
pub async fn connect_while_held(
    adapter: &dyn Adapter,
    sink: &dyn EventSink,
    mut holding: watch::Receiver<Holding>,
    stop: CancellationToken,
) {
    let (platform, account) = (adapter.platform(), adapter.account().clone());
    loop {
        if !held(adapter, &mut holding, &stop).await {
            return;
        }
        let lost = stop.child_token();
        let fenced = Fenced {
            sink,
            holding: holding.clone(),
        };
        let fence = async {
            lapsed(holding.clone()).await;
            lost.cancel();
            std::future::pending::<()>().await;
        };
        let ran = tokio::select! {
            ran = adapter.run(&fenced, lost.clone()) => ran,
            () = fence => unreachable!("the fence never finishes"),
        };
        if let Err(err) = ran {
            tracing::error!(%platform, %account, %err, "account stopped");
            return;
        }
        if stop.is_cancelled() {
            return;
        }
        tracing::warn!(%platform, %account, "the account's lease lapsed: socket dropped; waiting to hold it again");
    }
}

/// Wait until the account is held; `false` when stopped first. Meanwhile it is on standby.
async fn held(
    adapter: &dyn Adapter,
    holding: &mut watch::Receiver<Holding>,
    stop: &CancellationToken,
) -> bool {
    loop {
        if holding.borrow_and_update().now() {
            return true;
        }
        if *holding.borrow() != Holding::Unknown {
            adapter.connection().set(ConnectionState::Standby);
        }
        tokio::select! {
            () = stop.cancelled() => return false,
            changed = holding.changed() => if changed.is_err() { return false },
        }
    }
}

/// Resolves once the lease's deadline passes without a renewal moving it.
async fn lapsed(mut holding: watch::Receiver<Holding>) {
    loop {
        let Holding::Until(until) = *holding.borrow_and_update() else {
            return;
        };
        tokio::select! {
            () = tokio::time::sleep_until(until) => {
                if !holding.borrow().now() {
                    return;
                }
            }
            changed = holding.changed() => if changed.is_err() { return },
        }
    }
}

/// The gateway's intake, behind the lease's deadline.
struct Fenced<'a> {
    sink: &'a dyn EventSink,
    holding: watch::Receiver<Holding>,
}

#[async_trait]
impl EventSink for Fenced<'_> {
    async fn accept(&self, event: InboundEvent) -> Result<(), NotTaken> {
        if !self.holding.borrow().now() {
            return Err(NotTaken::ShuttingDown);
        }
        self.sink.accept(event).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use baton_contract::{ChatKind, Platform, Sender, StubAdapter};
    use tokio::time::Instant;

    use super::*;

    /// A socket account: `run` counts its sessions and keeps one open until its token fires.
    fn socket() -> StubAdapter {
        StubAdapter::new(Platform::Slack, "snark")
    }

    /// The gateway's intake: counts what reaches it.
    #[derive(Default)]
    struct Intake(AtomicUsize);

    #[async_trait]
    impl EventSink for Intake {
        async fn accept(&self, _: InboundEvent) -> Result<(), NotTaken> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    }

    fn event() -> InboundEvent {
        let sender = Sender {
            id: "U1".into(),
            name: "alice".into(),
            is_bot: false,
            is_self: false,
        };
        InboundEvent::text_message(
            Platform::Slack,
            "snark".into(),
            "C1".into(),
            ChatKind::Group,
            sender,
            "m1".into(),
            "hi",
        )
    }

    async fn until(what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn the_socket_is_up_only_while_the_lease_is_held() {
        let socket = Arc::new(socket());
        let intake = Arc::new(Intake::default());
        let (cell, holding) = watch::channel(Holding::Unknown);
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let (socket, intake, stop) = (socket.clone(), intake.clone(), stop.clone());
            async move { connect_while_held(socket.as_ref(), intake.as_ref(), holding, stop).await }
        });
        cell.send_replace(Holding::No);
        until("standby", || {
            socket.connection_state() == ConnectionState::Standby
        })
        .await;
        assert_eq!(socket.runs(), 0, "not held: never dialed");

        // Held, then never renewed: the socket closes once the deadline passes.
        let taken = Instant::now();
        cell.send_replace(Holding::Until(taken + Duration::from_millis(200)));
        until("connected", || socket.running()).await;
        until("dropped", || !socket.running()).await;
        assert!(
            taken.elapsed() >= Duration::from_millis(200),
            "dropped early"
        );
        until("standby again", || {
            socket.connection_state() == ConnectionState::Standby
        })
        .await;

        // Renewed in time: it stays up past the first deadline. The deadline leaves a loaded
        // machine a second to reconnect before the renewal.
        let again = Instant::now();
        let first = again + Duration::from_secs(1);
        cell.send_replace(Holding::Until(first));
        until("reconnected", || socket.runs() == 2).await;
        cell.send_replace(Holding::Until(again + Duration::from_secs(60)));
        assert!(
            Instant::now() < first,
            "reconnecting took longer than the first deadline"
        );
        tokio::time::sleep_until(first + Duration::from_millis(200)).await;
        assert!(socket.running(), "renewed, still up");

        stop.cancel();
        task.await.unwrap();
        assert!(!socket.running());
        assert_eq!(socket.runs(), 2);
    }

    #[tokio::test]
    async fn an_event_read_after_the_deadline_is_refused_unacknowledged() {
        let socket = Arc::new(socket());
        // An event the socket reads whatever its token says (as one already read would be).
        let offer = socket.next_read();
        let intake = Arc::new(Intake::default());
        let deadline = Instant::now() + Duration::from_millis(100);
        let (_cell, holding) = watch::channel(Holding::Until(deadline));
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let (socket, intake, stop) = (socket.clone(), intake.clone(), stop.clone());
            async move { connect_while_held(socket.as_ref(), intake.as_ref(), holding, stop).await }
        });
        until("connected", || socket.running()).await;
        // As a process paused past its deadline and just woken: an event read before the
        // fence had a chance to close the socket.
        tokio::time::sleep_until(deadline).await;
        offer.send(event()).unwrap();
        until("answered", || !socket.taken().is_empty()).await;
        assert_eq!(
            socket.taken(),
            [Err(NotTaken::ShuttingDown)],
            "refused, so the adapter does not acknowledge it"
        );
        assert_eq!(
            intake.0.load(Ordering::SeqCst),
            0,
            "nothing reached the pipeline"
        );
        stop.cancel();
        task.await.unwrap();
    }
}
