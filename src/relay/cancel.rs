//! Canceling a delivery its sender no longer wants (an A2A `CancelTask`): its turn is stopped
//! where it runs here, or, not running here, it is settled `canceled` at once. A run that has
//! not started finds it over; a turn running on another instance hears the settle's notice and
//! is stopped there ([`heeding`]). Either way the row says `canceled` and nothing of the run is
//! posted after.
//!
//! What the task set off is canceled with it: the sends its turn began to other bots, and
//! theirs in turn ([`cancel_what_it_set_off`]). Left running, they would finish work nobody
//! wants and, their sender's turn gone, push their answers to its session as late replies,
//! waking the bot again after its task was canceled.

use std::convert::Infallible;
use std::time::Duration;

use super::{Relay, moved, settled};
use crate::engine::Engine;
use crate::store::{Delivery, DeliveryChange, DeliveryState, Notices, Notify, StoreError, Topic};
use crate::timing::now_ms;

/// How often a cancel heard before its turn began looks again for the turn to stop.
const TURN_BEGINS: Duration = Duration::from_millis(20);

/// How long a stopped turn may take to put its end on record.
const STOPPED_WITHIN: Duration = Duration::from_secs(10);

/// How many times the sends a canceled task set off are looked for: a turn stopped a moment
/// after a look may have begun one more, and its target's turn another.
const LOOKS: usize = 8;

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
        settle_canceled(engine, &d).await?;
    }
    // A task from outside is the first turn of its trigger: everything charged to the trigger
    // is what it set off. (A delivery from a bot shares its trigger with its sender's other
    // sends; none is canceled, and none can be: only A2A callers cancel.)
    if d.trigger.is_none() {
        cancel_what_it_set_off(engine, run_id).await?;
    }
    settled(relay, run_id, STOPPED_WITHIN).await
}

/// Cancel every delivery still open that trigger `trigger` set off: each is settled `canceled`
/// with nobody to tell (its sender's turn was canceled too, so its outcome wakes no session),
/// then stopped if its turn runs here; one running on another instance hears the settle
/// ([`heeding`]). Looked for again until a look finds none.
async fn cancel_what_it_set_off(engine: &Engine, trigger: &str) -> Result<(), StoreError> {
    for _ in 0..LOOKS {
        let open = engine.store().deliveries_open_in_trigger(trigger).await?;
        if open.is_empty() {
            return Ok(());
        }
        for d in &open {
            settle_canceled(engine, d).await?;
            engine.running().cancel_run(&d.run_id);
        }
    }
    tracing::warn!(
        trigger,
        "a canceled task's sends were still being begun after {LOOKS} looks; those left run on"
    );
    Ok(())
}

/// Settle `d` `canceled`, with nobody to tell: the A2A caller that canceled it reads the
/// outcome it asked for, and the sender of a send its task set off was canceled too (its
/// session is not woken by the outcome, now or by a recovery after a restart).
async fn settle_canceled(engine: &Engine, d: &Delivery) -> Result<(), StoreError> {
    let reason = crate::engine::Stop::Canceled.to_string();
    let change = DeliveryChange {
        reason: Some(reason.clone()),
        notify: Some(Notify::None),
        ..DeliveryChange::to(&d.run_id, DeliveryState::Canceled, now_ms())
    };
    if engine.store().delivery_settle(change).await?.is_some() {
        moved(engine, d, DeliveryState::Canceled, Some(&reason), None);
    }
    Ok(())
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
    use crate::store::EntryKind;

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
    /// cannot change the outcome; nothing of it is left to push to a session.
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
        assert_eq!(after.notify, Notify::None, "nobody left to tell");
    }

    /// A run whose turn is under way here is stopped where it runs; the row says so. What its
    /// turn set off is canceled with it: the send it began to gamma gets no model call once
    /// gamma's lane is free, and its outcome wakes nobody (beta's session gets no late reply).
    #[tokio::test]
    async fn a_running_turn_is_stopped_and_settled_canceled_and_so_is_what_it_sent() {
        let gw = parts(&echo_config(&["alpha", "beta", "gamma"], "")).await;
        let engine = &gw.engine;
        let me = Some(engine.instance());
        // Beta's turn asks gamma and waits; gamma's run waits for a lane held here.
        let ask = new_delivery("r1", "alpha", "beta", "ask @gamma: hold on");
        let d = begun(engine, ask, me).await;
        let gammas: crate::session::SessionKey = "bot:gamma:local:gamma:a2a:beta".parse().unwrap();
        let busy = engine.lanes().enter(Lane::Nested, &gammas).await;
        start(&gw.relay, &d);
        let to_gamma = || async {
            let all = engine.store().deliveries(Default::default()).await.unwrap();
            all.into_iter().find(|d| d.target.as_str() == "gamma")
        };
        eventually("beta's send to gamma is on record", || async {
            to_gamma().await.is_some()
        })
        .await;
        let canceled = cancel(&gw.relay, "r1").await.unwrap().unwrap();
        assert_eq!(canceled.state, DeliveryState::Canceled, "{canceled:?}");
        assert_eq!(
            canceled.reason.as_deref(),
            Some(Stop::Canceled.to_string().as_str())
        );
        let sent = to_gamma().await.unwrap();
        assert_eq!(
            (sent.state, sent.notify, sent.trigger.as_deref()),
            (DeliveryState::Canceled, Notify::None, Some("r1")),
            "{sent:?}"
        );
        drop(busy);
        until_idle(engine).await;
        let said = |session: crate::session::SessionKey| async move {
            let query = crate::store::TranscriptQuery::session(session);
            engine.store().transcript(query).await.unwrap()
        };
        let gamma: Vec<EntryKind> = said(gammas).await.iter().map(|e| e.kind).collect();
        assert_eq!(
            gamma,
            [EntryKind::Inbound, EntryKind::Failure],
            "gamma heard the ask and was not asked to answer it"
        );
        let betas = d.target_session.clone();
        let woken: Vec<String> = said(betas)
            .await
            .into_iter()
            .filter(|e| e.run_id.as_deref() != Some("r1"))
            .map(|e| e.text)
            .collect();
        assert!(woken.is_empty(), "beta was not woken again: {woken:?}");
    }
}
