//! baton as the coordinator (`[chains] coordinator` unset): the turn goes to each participant in
//! the order they were named, `[chains] rounds` times, and then the chain closes as completed.
//!
//! Who is next is read from the chain's own log (the handoffs so far), not kept in memory, so
//! it stays right whatever order posts, silences and timeouts arrive in: only one of them can
//! hand the turn back (the store sees to that), and only that one asks for the next turn.

use super::Chains;
use super::{ChainFailure, Pass};
use crate::engine::Engine;
use crate::store::{BATON, Chain, ChainClose, ChainEntryKind, ChainState};

/// The turn is back with baton: give it to the next participant, or close the chain.
pub(super) async fn next(chains: &Chains, chain: Chain) {
    let engine = chains.engine();
    let log = match engine.store().chain_entries(&chain.id).await {
        Ok(log) => log,
        Err(err) => {
            return stall(engine, &chain, format!("its log could not be read: {err}")).await;
        }
    };
    let given = log
        .iter()
        .filter(|e| e.kind == ChainEntryKind::Handoff)
        .count();
    let config = &engine.config().chains;
    let rounds = config.rounds.clamp(1, config.max_rounds.max(1)) as usize;
    let Some(to) = next_turn(chain.participants.len(), rounds, given) else {
        let close = ChainClose {
            state: ChainState::Completed,
            by: BATON.to_owned(),
            reason: format!(
                "every participant had its turn ({rounds} round{})",
                if rounds == 1 { "" } else { "s" }
            ),
            at_turn: Some(chain.turn),
        };
        if let Err(err) = super::close(engine, &chain.id, close).await {
            tracing::error!(chain = %chain.id, %err, "could not close a finished chain");
        }
        return;
    };
    let round = given / chain.participants.len() + 1;
    let prompt = format!("Round {round} of {rounds}. The topic: {}", chain.name);
    let pass = Pass {
        chain: &chain.id,
        by: BATON,
        to: chain.participants[to].as_str(),
        prompt: &prompt,
        joins: false,
    };
    if let Err(err) = super::hand(chains, pass).await {
        stall(
            engine,
            &chain,
            format!("the turn could not be given: {err}"),
        )
        .await;
    }
}

/// Which of `n` participants is next after `given` handoffs in `rounds` rounds, or `None`
/// when all are done.
fn next_turn(n: usize, rounds: usize, given: usize) -> Option<usize> {
    (n > 0 && given < n * rounds).then(|| given % n)
}

async fn stall(engine: &Engine, chain: &Chain, reason: String) {
    tracing::error!(chain = %chain.id, %reason, "round-robin cannot go on");
    let close = ChainClose {
        state: ChainState::Stalled,
        by: BATON.to_owned(),
        reason,
        at_turn: Some(chain.turn),
    };
    if let Err(err) = super::close(engine, &chain.id, close).await {
        let err: ChainFailure = err;
        tracing::error!(chain = %chain.id, %err, "could not close a stalled chain");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everyone_in_order_each_round_then_done() {
        let order: Vec<Option<usize>> = (0..7).map(|given| next_turn(3, 2, given)).collect();
        assert_eq!(
            order,
            [Some(0), Some(1), Some(2), Some(0), Some(1), Some(2), None]
        );
        assert_eq!(next_turn(0, 1, 0), None);
    }
}
