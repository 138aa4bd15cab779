//! The composition root: every component the gateway runs, built once from the config, the
//! store and the roster. `Gateway::start` and the unit tests' `testing::parts` both call
//! [`assemble`], so the tests run the wiring production runs.

use std::sync::Arc;

use super::StartError;
use super::build::{self, AdapterOverride, Env};
use crate::admin::Admin;
use crate::backend::Reaper;
use crate::chains::Chains;
use crate::config::Config;
use crate::dispatcher::{Dispatcher, DispatcherState};
use crate::engine::Engine;
use crate::local::LocalHub;
use crate::relay::{Relay, RelayState};
use crate::roster::ChatRules;
use crate::schedule::{ScheduleError, Scheduler};
use crate::store::Store;
use crate::timing::{Board, Zone};
use crate::tools::AgentTools;

/// The gateway's components, built and wired, not started: no account connects and no task
/// runs yet.
pub(crate) struct Assembled {
    /// The turn kernel every flow stands on.
    pub engine: Engine,
    /// The pipeline over it, with the admin commands.
    pub dispatcher: Dispatcher,
    /// Bot-to-bot traffic over it.
    pub relay: Relay,
    /// Chains over it.
    pub chains: Chains,
    /// Heartbeats and cron entries.
    pub scheduler: Arc<Scheduler>,
    /// The local channel every bot has an account on.
    pub hub: Arc<LocalHub>,
    /// Ends the process groups of `command` turns.
    pub reaper: Reaper,
}

/// Build every component once: the local hub, the roster (bots with their backends, accounts
/// with their adapters, `adapters` overriding), the chat rules, the flows' own state (the
/// pipeline's, the relay's, the schedule's board on the gateway's clock), the engine (each
/// turn's tools sending through the relay, the handed-over sibling posts wired to the pipeline
/// as it is made), then over it the chains, the admin commands, the dispatcher, the relay and
/// the scheduler.
pub(crate) fn assemble(
    config: Arc<Config>,
    store: Store,
    env: Env<'_>,
    adapters: &AdapterOverride,
) -> Result<Assembled, StartError> {
    let hub = LocalHub::with_names(&config.local, store.clone(), build::sender_names(&config));
    let reaper = Reaper::default();
    let roster = build::roster(&config, &hub, env, adapters, &reaper)?;
    let chat_rules = ChatRules::new(&config)?;
    let zone = Zone::parse(&config.gateway.timezone)
        .map_err(|e| ScheduleError(format!("gateway.timezone: {e}")))?;
    let schedule = Arc::new(Board::new(zone));
    let pipeline = DispatcherState::new(&config);
    let traffic = RelayState::new(&config, env)?;
    let engine = Engine::new(
        config,
        roster,
        chat_rules,
        store,
        AgentTools::binder(Arc::clone(&traffic)),
        |engine| Dispatcher::handover_runner(engine, Arc::clone(&pipeline), Arc::clone(&schedule)),
    );
    let chains = Chains::new(engine.clone());
    let admin = Admin::new(chains.clone(), Arc::clone(&schedule));
    let dispatcher = Dispatcher::new(engine.clone(), admin, pipeline);
    let relay = Relay::new(engine.clone(), traffic);
    let scheduler = Arc::new(Scheduler::new(engine.clone(), schedule)?);
    Ok(Assembled {
        engine,
        dispatcher,
        relay,
        chains,
        scheduler,
        hub,
        reaper,
    })
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use crate::gateway::testing::{echo_config, parts};

    /// Every component stands on the one engine the gateway built: a drain begun through any
    /// of them is seen by all, and the scheduler starts nothing after it.
    #[tokio::test]
    async fn every_component_stands_on_one_engine() {
        let heartbeat = "heartbeat = { every = \"30m\", target = \"none\" }\n";
        let gw = parts(&echo_config(&["hb"], heartbeat)).await;
        let monday = |h| Utc.with_ymd_and_hms(2025, 3, 3, h, 0, 0).unwrap();
        assert!(gw.scheduler.has_jobs());
        gw.scheduler.tick(monday(9)).await;
        assert!(!gw.relay.engine().tasks().is_closed());
        gw.chains.engine().tasks().close();
        for engine in [gw.dispatcher.engine(), gw.relay.engine(), &gw.engine] {
            assert!(engine.tasks().is_closed());
        }
        assert!(
            gw.scheduler.tick(monday(12)).await.is_empty(),
            "a due heartbeat started during the drain"
        );
    }
}
