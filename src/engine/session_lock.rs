//! A turn's hold on its session across instances: the database's session lock
//! ([`Store::session_lock`]), taken once the turn has its lane slot here, renewed while it runs,
//! let go when it ends. Waiting for it is woken by the holder letting go (a notice from any
//! instance) or by its lock expiring (a holder that died), never by polling.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Engine;
use crate::session::SessionKey;
use crate::store::{Locked, Store, Topic};

/// How long to wait before asking again after the store failed to answer.
const RETRY: Duration = Duration::from_secs(1);

/// Held while a turn runs; dropping it stops the renewal and lets the lock go.
pub(crate) struct SessionHold {
    stop: Option<CancellationToken>,
}

impl Drop for SessionHold {
    fn drop(&mut self) {
        if let Some(stop) = &self.stop {
            stop.cancel();
        }
    }
}

/// The session stayed held elsewhere past the deadline.
pub(crate) struct HeldElsewhere;

/// Wait until this turn holds `session` across instances, however long that takes.
pub(crate) async fn hold(engine: &Engine, session: &SessionKey) -> SessionHold {
    match hold_until(engine, session, None).await {
        Ok(hold) => hold,
        Err(HeldElsewhere) => unreachable!("without a deadline the wait never gives up"),
    }
}

/// Wait until this turn holds `session` across instances (or `until` passes). On SQLite there
/// is one instance, whose lane already holds the session: nothing to wait for.
pub(crate) async fn hold_until(
    engine: &Engine,
    session: &SessionKey,
    until: Option<Instant>,
) -> Result<SessionHold, HeldElsewhere> {
    let store = engine.store();
    if !store.session_locks_shared() {
        return Ok(SessionHold { stop: None });
    }
    let name = session.render();
    let holder = format!("{}/{}", engine.instance(), uuid::Uuid::new_v4().simple());
    let lease = engine.lease();
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    let deadline = async {
        match until {
            Some(until) => tokio::time::sleep_until(until).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    // Subscribed before the first try, so a release between the try and the wait is heard.
    let mut notices = store.subscribe();
    loop {
        let pause = match store.session_lock(&name, &holder, lease_ms).await {
            Ok(Locked::Held) => break,
            Ok(Locked::Busy { left_ms }) => {
                Duration::from_millis(u64::try_from(left_ms.clamp(1, lease_ms)).unwrap_or(1))
            }
            Err(err) => {
                tracing::warn!(session = %name, %err, "could not take the session's lock; trying again");
                RETRY
            }
        };
        tokio::select! {
            () = notices.touching(Topic::SessionFree, &name) => {}
            () = tokio::time::sleep(pause) => {}
            () = &mut deadline => return Err(HeldElsewhere),
        }
    }
    let stop = CancellationToken::new();
    engine
        .tasks()
        .spawn(keep(store.clone(), name, holder, lease, stop.clone()));
    Ok(SessionHold { stop: Some(stop) })
}

/// Renew the lock every third of the lease until `stop`, then let it go.
async fn keep(
    store: Store,
    name: String,
    holder: String,
    lease: Duration,
    stop: CancellationToken,
) {
    let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
    let mut tick = tokio::time::interval_at(Instant::now() + lease / 3, lease / 3);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => match store.session_lock(&name, &holder, lease_ms).await {
                Ok(Locked::Held) => {}
                Ok(Locked::Busy { .. }) => tracing::error!(session = %name, "the session's lock expired while its turn ran (the store was unreachable for a lease); another turn may run beside it"),
                Err(err) => tracing::warn!(session = %name, %err, "could not renew the session's lock"),
            },
        }
    }
    if let Err(err) = store.session_unlock(&name, &holder).await {
        tracing::warn!(session = %name, %err, "could not let the session's lock go; it frees itself when it expires");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::testing::{echo_config, parts, parts_on};
    use crate::session::test_key;
    use crate::store::testing::TestDb;

    /// Bot `b`'s engine over a fresh PostgreSQL database, where instances share session locks;
    /// `extra` is appended to its config.
    async fn engine_on_postgres(extra: &str) -> Engine {
        let store = TestDb::postgres().await.open().await;
        parts_on(&echo_config(&["b"], extra), store, &|_| None).engine
    }

    /// On SQLite there is one instance, and its lane already holds the session.
    #[tokio::test]
    async fn on_one_instance_the_lane_alone_holds_the_session() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let session = test_key("room");
        let _first = hold(&gw.engine, &session).await;
        let second = hold_until(&gw.engine, &session, Some(Instant::now())).await;
        assert!(second.is_ok(), "nothing to wait for");
        assert_eq!(gw.engine.tasks().len(), 0, "no lock to renew");
    }

    /// The session lock's lease is 15 s: only its holder's notice wakes a waiter this soon.
    #[tokio::test]
    async fn a_session_held_elsewhere_is_taken_as_soon_as_its_holder_lets_go() {
        let engine = engine_on_postgres("").await;
        let session = test_key("room");
        let first = hold(&engine, &session).await;
        let soon = Instant::now() + Duration::from_millis(300);
        let beside = hold_until(&engine, &session, Some(soon)).await;
        assert!(beside.is_err(), "taken while its holder runs");
        let waiting = hold(&engine, &session);
        tokio::pin!(waiting);
        let early = tokio::time::timeout(Duration::from_millis(300), &mut waiting).await;
        assert!(early.is_err(), "taken while its holder runs");
        drop(first);
        let taken = tokio::time::timeout(Duration::from_secs(5), waiting).await;
        assert!(taken.is_ok(), "not taken within 5 s of being let go");
    }

    /// A holder that died lets nothing go.
    #[tokio::test]
    async fn a_lock_whose_holder_died_is_taken_once_it_expires() {
        let engine = engine_on_postgres("").await;
        let session = test_key("room");
        let store = engine.store();
        let dead = store.session_lock(&session.render(), "gone/1", 1500).await;
        assert_eq!(dead.unwrap(), Locked::Held);
        let asked = Instant::now();
        let held = hold_until(&engine, &session, Some(asked + Duration::from_secs(10))).await;
        assert!(held.is_ok(), "not taken within 10 s");
        assert!(
            asked.elapsed() >= Duration::from_millis(1000),
            "taken while the dead holder's lock was still good"
        );
    }

    #[tokio::test]
    async fn a_session_stays_held_past_its_lease_while_its_turn_runs() {
        let engine = engine_on_postgres("\n[cluster]\nlease_seconds = 3\n").await;
        let session = test_key("room");
        let _running = hold(&engine, &session).await;
        // Time passing is the subject: the lease runs out unless it is renewed.
        tokio::time::sleep(Duration::from_secs(4)).await;
        let soon = Instant::now() + Duration::from_millis(300);
        let beside = hold_until(&engine, &session, Some(soon)).await;
        assert!(beside.is_err(), "the lock lapsed while its turn ran");
    }
}
