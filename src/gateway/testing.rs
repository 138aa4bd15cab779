//! The gateway's components built for unit tests: a config parsed and validated like a user's,
//! every component built by the gateway's own `assemble`, and an in-memory store. The flows' rules can then be tested one call at a time instead of only end to end.

use std::path::Path;
use std::sync::Arc;

use super::assemble::{Assembled, assemble};
use super::build::AdapterOverride;
use crate::chains::Chains;
use crate::config::Config;
use crate::dispatcher::Dispatcher;
use crate::engine::Engine;
use crate::local::LocalHub;
use crate::relay::Relay;
use crate::schedule::Scheduler;
use crate::store::Store;

/// A gateway's parts, not started: no account connects and no timer runs.
pub(crate) struct Parts {
    /// The turn kernel.
    pub engine: Engine,
    /// The pipeline over it.
    pub dispatcher: Dispatcher,
    /// Bot-to-bot traffic over it.
    pub relay: Relay,
    /// Chains over it.
    pub chains: Chains,
    /// Heartbeats and cron entries (not ticking: a test ticks it).
    pub scheduler: Arc<Scheduler>,
    /// The local channel every bot has an account on (replies land in its rooms).
    pub hub: Arc<LocalHub>,
}

/// The parts for config `toml`, which must be valid (panics with the problems otherwise),
/// built by the gateway's own [`assemble`] over an in-memory store.
pub(crate) async fn parts(toml: &str) -> Parts {
    let store = Store::open(":memory:").await.expect("in-memory store");
    parts_on(toml, store).await
}

/// [`parts`] over `store` (a PostgreSQL one, for what only several instances share).
pub(crate) async fn parts_on(toml: &str, store: Store) -> Parts {
    let env = |_: &str| None;
    let config = Config::from_toml(toml, Path::new("."), &env)
        .unwrap_or_else(|problems| panic!("test config is invalid: {problems:?}"));
    let Assembled {
        engine,
        dispatcher,
        relay,
        chains,
        scheduler,
        hub,
        ..
    } = assemble(Arc::new(config), store, &env, &AdapterOverride::none()).expect("assembled");
    Parts {
        dispatcher,
        relay,
        chains,
        scheduler,
        engine,
        hub,
    }
}

/// Echo bots `ids`, each on the local platform, in open chats that wake a bot on a mention;
/// `extra` is appended (more sections, or keys of the last bot).
pub(crate) fn echo_config(ids: &[&str], extra: &str) -> String {
    let mut text = String::from(
        "[gateway]\ndatabase = \":memory:\"\n\n[chats_default]\ngroup_policy = \"open\"\n\
         dm_policy = \"open\"\nactivation = \"mention\"\n",
    );
    for id in ids {
        text.push_str(&format!(
            "\n[[bots]]\nid = \"{id}\"\nbackend = \"echo\"\ntools = [\"*\"]\n"
        ));
    }
    text.push_str(extra);
    text
}
