//! The relay's handle: the engine, and what only bot-to-bot traffic changes: the senders waiting
//! for a run's reply ([`Waiters`]) and the `sessions_send` guard ([`SendGuard`]). Cheap to
//! clone; the gateway builds its state once, and every handle (the gateway's, each turn's
//! tools', the HTTP API's) shares it.

use std::sync::Arc;

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
}

impl RelayState {
    /// The relay's state for `config`. Fails only on an `[agent_to_agent] allow` glob that does
    /// not compile (validation reports those first).
    pub fn new(config: &Config) -> Result<Arc<RelayState>, globset::Error> {
        let allow = glob_set(&config.agent_to_agent.allow)?;
        let clock = governor::clock::DefaultClock::default();
        Ok(Arc::new(RelayState {
            waiters: Waiters::default(),
            sends: SendGuard::new(&config.limits, &config.agent_to_agent, allow, clock),
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

    /// Who may message whom, how often, how deep.
    pub fn sends(&self) -> &SendGuard {
        &self.own.sends
    }
}
