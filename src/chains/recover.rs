//! Chains left open by an instance that is gone. A turn that was running when its instance
//! stopped is gone with the process, and nothing else would ever move the chain on, so the
//! open chains whose runner is gone (at start: also this instance's own previous process; while
//! running: an instance that just stopped renewing) are claimed, each by one instance, and
//! picked up where their turn stands. A chain a live instance runs is left alone:
//!
//! - a participant held the turn: it goes back to the coordinator with a system note saying
//!   baton restarted (the participant's half-finished turn is not run again: it may have acted);
//! - the coordinator held it: the coordinating bot is woken to move it, or baton takes its next
//!   round-robin step.

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Chains, coordinator_move, hand_back};
use crate::store::{ChainState, StoreError};

/// Pick up the open chains nobody live runs (at start, `startup`: also this instance's own);
/// returns how many this instance took.
pub(crate) async fn recover(chains: &Chains, startup: bool) -> Result<usize, StoreError> {
    let engine = chains.engine();
    let store = engine.store();
    let lease_ms = i64::try_from(engine.lease().as_millis()).unwrap_or(i64::MAX);
    let mut taken = 0;
    for left in store.chains_left(startup, lease_ms).await? {
        if !store.chain_claim(&left).await? {
            continue;
        }
        let Some(chain) = store
            .chain(&left.id)
            .await?
            .filter(|c| c.state == ChainState::Open)
        else {
            continue;
        };
        taken += 1;
        let runner = left.runner.as_deref().unwrap_or("-");
        tracing::info!(chain = %chain.id, holder = chain.holder_name(), runner, "picking up an open chain");
        if chain.coordinator_holds() {
            let news = "baton restarted; the turn is yours.".to_owned();
            coordinator_move(chains, chain.clone(), news).await;
        } else {
            let reason = format!(
                "baton restarted during {}'s turn; the turn goes back to {}",
                chain.holder_name(),
                chain.coordinator_name()
            );
            hand_back(chains, &chain, chain.turn, reason).await;
        }
    }
    Ok(taken)
}

/// Until `stop`: whenever the number of `live` instances drops (one stopped renewing), pick up
/// the chains it was running.
pub(crate) async fn serve(
    chains: Chains,
    mut live: watch::Receiver<usize>,
    stop: CancellationToken,
) {
    let mut was = *live.borrow_and_update();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            changed = live.changed() => if changed.is_err() { return },
        }
        let now = *live.borrow_and_update();
        if std::mem::replace(&mut was, now) <= now {
            continue;
        }
        match recover(&chains, false).await {
            Ok(0) => {}
            Ok(taken) => tracing::info!(taken, "picked up chains another instance left"),
            Err(err) => tracing::error!(%err, "could not look for chains left by another instance"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::testing::{given, started, until_closed};
    use super::*;
    use crate::engine::Engine;
    use crate::gateway::testing::{Parts, echo_config, parts};
    use crate::store::{ChainEntry, ChainEntryKind};

    async fn log(engine: &Engine, chain: &str) -> Vec<ChainEntry> {
        engine.store().chain_entries(chain).await.unwrap()
    }

    /// A round-robin chain in `room`, started by instance `old`, which has stopped since; this
    /// instance is `me`.
    async fn left_by_a_stopped_instance(gw: &Parts) -> String {
        let store = gw.engine.store();
        store.instance_register("old", "test", 0).await.unwrap();
        let chain = started(&gw.engine, None, &["alpha"]).await;
        store.instance_register("me", "test", 0).await.unwrap();
        store.instance_deregister("old").await.unwrap();
        chain.id
    }

    fn handoffs(log: &[ChainEntry]) -> Vec<&str> {
        log.iter()
            .filter(|e| e.kind == ChainEntryKind::Handoff)
            .filter_map(|e| e.recipient.as_deref())
            .collect()
    }

    /// The participant's half-finished turn is not run again (it may have acted): the turn goes
    /// back to the coordinator, with a note saying why.
    #[tokio::test]
    async fn a_participants_interrupted_turn_goes_back_to_the_coordinator() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let engine = &gw.engine;
        let chain = started(engine, Some("lead"), &["alpha"]).await;
        given(engine, &chain, "alpha").await;

        assert_eq!(recover(&gw.chains, true).await.unwrap(), 1);
        let note = "baton restarted during alpha's turn; the turn goes back to lead";
        let notes: Vec<String> = log(engine, &chain.id)
            .await
            .into_iter()
            .filter(|e| e.kind == ChainEntryKind::System)
            .map(|e| e.content)
            .collect();
        assert!(notes.iter().any(|n| n == note), "{notes:?}");
        until_closed(engine, &chain.id).await;
        let alpha_posted = log(engine, &chain.id)
            .await
            .iter()
            .any(|e| e.kind == ChainEntryKind::Message && e.sender == "alpha");
        assert!(!alpha_posted, "alpha's turn was run again");
    }

    #[tokio::test]
    async fn with_the_coordinating_bot_holding_the_turn_it_is_woken_to_move_it() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let engine = &gw.engine;
        let chain = started(engine, Some("lead"), &["alpha"]).await;

        assert_eq!(recover(&gw.chains, true).await.unwrap(), 1);
        // The echo coordinator answers without moving the turn, which ends its chain.
        let closed = until_closed(engine, &chain.id).await;
        assert_eq!(closed.state, ChainState::Stalled, "{closed:?}");
        let reason = closed.closed_reason.unwrap_or_default();
        assert!(
            reason.starts_with("the coordinator lead ended its turn"),
            "{reason}"
        );
    }

    #[tokio::test]
    async fn with_baton_coordinating_it_takes_its_next_round_robin_step() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let engine = &gw.engine;
        let chain = started(engine, None, &["alpha"]).await;

        assert_eq!(recover(&gw.chains, true).await.unwrap(), 1);
        assert_eq!(handoffs(&log(engine, &chain.id).await), ["alpha"]);
    }

    /// A chain this instance runs is its own while it lives; only its restart picks it up, and
    /// a closed chain is never picked up.
    #[tokio::test]
    async fn a_chain_a_live_instance_runs_or_a_closed_one_is_left_alone() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let engine = &gw.engine;
        let running = started(engine, None, &["alpha"]).await;
        assert_eq!(recover(&gw.chains, false).await.unwrap(), 0);
        assert_eq!(handoffs(&log(engine, &running.id).await), [] as [&str; 0]);

        super::super::close(engine, &running.id, super::super::stop_by("ann"))
            .await
            .unwrap();
        assert_eq!(recover(&gw.chains, true).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_stopped_instances_chain_is_picked_up_once() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let chain = left_by_a_stopped_instance(&gw).await;
        assert_eq!(recover(&gw.chains, false).await.unwrap(), 1);
        assert_eq!(
            recover(&gw.chains, false).await.unwrap(),
            0,
            "taken already"
        );
        assert_eq!(handoffs(&log(&gw.engine, &chain).await), ["alpha"]);
    }

    /// While running, fewer live instances means one stopped: its chains are picked up.
    #[tokio::test]
    async fn serving_picks_up_chains_when_an_instance_stops_and_ends_on_stop() {
        let gw = parts(&echo_config(&["lead", "alpha"], "")).await;
        let chain = left_by_a_stopped_instance(&gw).await;
        let (live, seen) = watch::channel(usize::MAX);
        let stop = CancellationToken::new();
        let serving = tokio::spawn(serve(gw.chains.clone(), seen, stop.clone()));

        // Serving starts from the count it reads first, so the count keeps dropping until a
        // drop is seen.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while handoffs(&log(&gw.engine, &chain).await).is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "chain not picked up"
            );
            live.send_modify(|n| *n -= 1);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.cancel();
        tokio::time::timeout(Duration::from_secs(20), serving)
            .await
            .expect("serve ended on stop")
            .unwrap();
    }
}
