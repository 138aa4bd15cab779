//! Canceling a delivery its sender no longer wants (an A2A `CancelTask`): its turn is stopped
//! where it runs here, or, not running here, it is settled `canceled` at once. A run that has
//! not started finds it over; a turn running on another instance hears the settle's notice and
//! is stopped there ([`heeding`]). Either way the row says `canceled` and nothing of the run is
//! posted after.

use std::convert::Infallible;
use std::time::Duration;

use super::{Relay, moved, settled};
use crate::engine::Engine;
use crate::store::{Delivery, DeliveryChange, DeliveryState, Notices, StoreError, Topic};
use crate::timing::now_ms;

/// How often a cancel heard before its turn began looks again for the turn to stop.
const TURN_BEGINS: Duration = Duration::from_millis(20);

/// How long a stopped turn may take to put its end on record.
const STOPPED_WITHIN: Duration = Duration::from_secs(10);

/// Cancel run `run_id`: the delivery as it stands afterwards (`None`: no such run). A run that
/// already ended keeps its outcome.
pub async fn cancel(relay: &Relay, run_id: &str) -> Result<Option<Delivery>, StoreError> {
    let engine = relay.engine();
    let Some(d) = engine.store().delivery(run_id).await? else {
        return Ok(None);
    };
    if d.state.is_settled() {
        return Ok(Some(d));
    }
    if engine.running().cancel_run(run_id) == 0 {
        // Not running here: settled now, so a run that starts (here or on another instance)
        // finds it over, and one running elsewhere finds its outcome refused by the record.
        let reason = crate::engine::Stop::Canceled.to_string();
        let change = DeliveryChange {
            reason: Some(reason.clone()),
            ..DeliveryChange::to(run_id, DeliveryState::Canceled, now_ms())
        };
        if engine.store().delivery_settle(change).await?.is_some() {
            moved(engine, &d, DeliveryState::Canceled, Some(&reason), None);
        }
    }
    settled(relay, run_id, STOPPED_WITHIN).await
}

/// `turn` (run `run_id`'s, here), stopped if the run is canceled elsewhere meanwhile: another
/// instance, not running it, settles its row `canceled` (see [`cancel`]), and that settle's
/// notice reaches every instance. `notices` was subscribed before the run began.
pub(super) async fn heeding<T>(
    engine: &Engine,
    run_id: &str,
    notices: Notices,
    turn: impl Future<Output = T>,
) -> T {
    tokio::select! {
        out = turn => out,
        never = stop_when_canceled(engine, run_id, notices) => match never {},
    }
}

/// Wait for run `run_id`'s row to say `canceled`, then stop its turn here, as soon as it has
/// begun; pends for good afterwards (the turn ends with its stop).
async fn stop_when_canceled(engine: &Engine, run_id: &str, mut notices: Notices) -> Infallible {
    loop {
        notices.touching(Topic::Delivery, run_id).await;
        match engine.store().delivery(run_id).await {
            Ok(Some(d)) if d.state == DeliveryState::Canceled => break,
            Ok(_) => {}
            Err(err) => tracing::warn!(%err, run_id, "could not read whether the run was canceled"),
        }
    }
    while engine.running().cancel_run(run_id) == 0 {
        tokio::time::sleep(TURN_BEGINS).await;
    }
    std::future::pending().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Stop;
    use crate::gateway::testing::{
        begun, echo_config, eventually, new_delivery, parts, until_idle,
    };
    use crate::lanes::Lane;
    use crate::relay::send::start;

    #[tokio::test]
    async fn an_unknown_run_is_none_and_an_ended_one_keeps_its_outcome() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        assert_eq!(cancel(&gw.relay, "nope").await.unwrap(), None);
        begun(&gw.engine, new_delivery("r1", "alpha", "beta", "hi"), None).await;
        let answered = DeliveryChange {
            reply: Some("done".into()),
            ..DeliveryChange::to("r1", DeliveryState::Delivered, now_ms())
        };
        gw.engine.store().delivery_settle(answered).await.unwrap();
        let d = cancel(&gw.relay, "r1").await.unwrap().unwrap();
        assert_eq!(
            (d.state, d.reply.as_deref()),
            (DeliveryState::Delivered, Some("done"))
        );
    }

    /// A run still waiting for its lane is settled at once, and its turn, when it gets the lane,
    /// cannot change the outcome.
    #[tokio::test]
    async fn a_run_not_started_is_settled_canceled_for_good() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let engine = &gw.engine;
        let me = Some(engine.instance());
        let d = begun(engine, new_delivery("r1", "alpha", "beta", "hi"), me).await;
        let busy = engine.lanes().enter(Lane::Nested, &d.target_session).await;
        start(&gw.relay, &d);
        let canceled = cancel(&gw.relay, "r1").await.unwrap().unwrap();
        let reason = Stop::Canceled.to_string();
        assert_eq!(
            (canceled.state, canceled.reason.as_deref()),
            (DeliveryState::Canceled, Some(reason.as_str()))
        );
        drop(busy);
        until_idle(engine).await;
        let after = engine.store().delivery("r1").await.unwrap().unwrap();
        assert_eq!((after.state, after.reply), (DeliveryState::Canceled, None));
    }

    /// A run whose turn is under way here is stopped where it runs; the row says so.
    #[tokio::test]
    async fn a_running_turn_is_stopped_and_settled_canceled() {
        let gw = parts(&echo_config(&["alpha", "beta", "gamma"], "")).await;
        let engine = &gw.engine;
        let me = Some(engine.instance());
        // Beta's turn asks gamma and waits; gamma's run waits for a lane held here.
        let ask = new_delivery("r1", "alpha", "beta", "ask @gamma: hold on");
        let d = begun(engine, ask, me).await;
        let gammas: crate::session::SessionKey = "bot:gamma:local:gamma:a2a:beta".parse().unwrap();
        let busy = engine.lanes().enter(Lane::Nested, &gammas).await;
        start(&gw.relay, &d);
        eventually("beta's turn runs", || async {
            engine.running().count() == 1
        })
        .await;
        let canceled = cancel(&gw.relay, "r1").await.unwrap().unwrap();
        assert_eq!(canceled.state, DeliveryState::Canceled, "{canceled:?}");
        assert_eq!(
            canceled.reason.as_deref(),
            Some(Stop::Canceled.to_string().as_str())
        );
        drop(busy);
        until_idle(engine).await;
    }
}
