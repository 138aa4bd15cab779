//! The chains' handle: the engine, and what only chains read, the longest a participant's turn
//! may take (`[chains] turn_timeout_seconds`). Cheap to clone; the gateway builds it once over
//! its engine, and each turn's tools build theirs over the same engine.

use std::time::Duration;

use crate::engine::Engine;

/// Chains over the engine.
#[derive(Clone)]
pub(crate) struct Chains {
    engine: Engine,
    turn_limit: Duration,
}

impl Chains {
    /// Chains over `engine`, with its config's turn limit.
    pub(crate) fn new(engine: Engine) -> Chains {
        let turn_limit = Duration::from_secs(engine.config().chains.turn_timeout_seconds);
        Chains { engine, turn_limit }
    }

    /// The turn kernel.
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The longest a chain participant's turn may take (`chains.turn_timeout_seconds`).
    pub(crate) fn turn_limit(&self) -> Duration {
        self.turn_limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::testing::{echo_config, parts};

    /// A chain turn's limit is `[chains] turn_timeout_seconds`, not the gateway's turn
    /// timeout, and every handle over one engine is the same.
    #[tokio::test]
    async fn the_turn_limit_is_the_chains_own() {
        let config = echo_config(&["alpha"], "\n[chains]\nturn_timeout_seconds = 7\n")
            .replace("[gateway]\n", "[gateway]\nturn_timeout_seconds = 90\n");
        let gw = parts(&config).await;
        assert_eq!(gw.chains.turn_limit(), Duration::from_secs(7));
        let again = Chains::new(gw.engine.clone());
        assert_eq!(again.turn_limit(), gw.chains.turn_limit());
    }
}
