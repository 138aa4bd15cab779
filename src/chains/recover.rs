//! Chains left open by the last run. A turn that was running when the gateway stopped is gone
//! with the process, and nothing else would ever move the chain on, so at start every open
//! chain is picked up where its turn stands:
//!
//! - a participant held the turn: it goes back to the coordinator with a system note saying
//!   baton restarted (the participant's half-finished turn is not run again: it may have acted);
//! - the coordinator held it: the coordinating bot is woken to move it, or baton takes its next
//!   round-robin step.

use super::{coordinator_move, hand_back};
use crate::engine::Engine;
use crate::store::{ChainQuery, ChainState, StoreError};

/// Pick up every open chain; returns how many.
pub(crate) async fn recover(engine: &Engine) -> Result<usize, StoreError> {
    let open: Vec<_> = engine
        .store()
        .chains(ChainQuery::default())
        .await?
        .into_iter()
        .filter(|c| c.state == ChainState::Open)
        .collect();
    for chain in &open {
        tracing::info!(chain = %chain.id, holder = chain.holder_name(), "picking up an open chain");
        if chain.coordinator_holds() {
            let news = "baton restarted; the turn is yours.".to_owned();
            coordinator_move(engine, chain.clone(), news).await;
        } else {
            let reason = format!(
                "baton restarted during {}'s turn; the turn goes back to {}",
                chain.holder_name(),
                chain.coordinator_name()
            );
            hand_back(engine, chain, chain.turn, reason).await;
        }
    }
    Ok(open.len())
}
