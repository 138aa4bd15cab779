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
