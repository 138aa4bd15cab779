//! The relay's handle: the engine, and what only bot-to-bot traffic changes: the senders waiting
//! for a run's reply ([`Waiters`]) and the `sessions_send` guard ([`SendGuard`]). Cheap to
//! clone; the gateway builds its state once, and every handle (the gateway's, each turn's
//! tools', the HTTP API's) shares it.

use std::sync::Arc;

use super::a2a_out::Peers;
use super::waiters::Waiters;
use crate::config::Config;
use crate::engine::Engine;
use crate::guards::SendGuard;
use crate::roster::glob_set;

/// Bot-to-bot traffic over the engine.
#[derive(Clone)]
pub struct Relay {
    engine: Engine,
    own: Arc<RelayState>,
}

/// What the relay owns, built once by the gateway; [`Relay::new`] puts it over an engine.
pub struct RelayState {
    waiters: Waiters,
    sends: SendGuard,
    peers: Peers,
}

/// Why the relay's state could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// An `[agent_to_agent] allow` glob did not compile.
    #[error("bad glob in [agent_to_agent] allow: {0}")]
    Glob(#[from] globset::Error),
    /// The HTTP client for `[[a2a.peers]]` could not be made.
    #[error("cannot make the HTTP client for [[a2a.peers]]: {0}")]
    Client(#[from] reqwest::Error),
}

impl RelayState {
    /// The relay's state for `config`, the peers' tokens read from `env`. Fails on an
    /// `[agent_to_agent] allow` glob that does not compile (validation reports those first), or
    /// when no HTTP client can be made.
    pub fn new(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<RelayState>, BuildError> {
        let allow = glob_set(&config.agent_to_agent.allow)?;
        let clock = governor::clock::DefaultClock::default();
        Ok(Arc::new(RelayState {
            waiters: Waiters::default(),
            sends: SendGuard::new(&config.limits, &config.agent_to_agent, allow, clock),
            peers: Peers::new(config, env)?,
        }))
    }
}

impl Relay {
    /// The relay over `engine`, with `own` state.
    pub fn new(engine: Engine, own: Arc<RelayState>) -> Relay {
        Relay { engine, own }
    }

    /// The turn kernel.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// `sessions_send` runs whose senders may be waiting for the reply.
    pub fn waiters(&self) -> &Waiters {
        &self.own.waiters
    }

    /// The client calls to `[[a2a.peers]]` go through.
    pub(super) fn peers(&self) -> &Peers {
        &self.own.peers
    }

    /// Who may message whom, how often, how deep.
    pub fn sends(&self) -> &SendGuard {
        &self.own.sends
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::testing::{echo_config, parts};

    /// Every handle on one relay state is the same relay: a run counted through a turn's tools'
    /// handle is in flight for the gateway's and the HTTP API's.
    #[tokio::test]
    async fn handles_on_one_state_share_the_waiters() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let tools = Relay::new(gw.engine.clone(), Arc::clone(&gw.relay.own));
        assert_eq!(gw.relay.waiters().in_flight(), 0);
        let counted = tools.waiters().running();
        assert_eq!(gw.relay.waiters().in_flight(), 1);
        drop(counted);
        assert_eq!(gw.relay.waiters().in_flight(), 0);
    }

    /// An `[agent_to_agent] allow` glob that does not compile is refused when the relay is
    /// built, not at the first send.
    #[tokio::test]
    async fn a_bad_allow_glob_is_refused_at_build() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let mut config = (**gw.engine.config()).clone();
        config.agent_to_agent.allow = vec!["[unclosed".into()];
        assert!(RelayState::new(&config, &|_| None).is_err());
    }
}
