//! The gateway's services built for unit tests: a config parsed and validated like a user's,
//! the bots, backends and local accounts built as `baton run` builds them, and an in-memory
//! store. The flows' rules can then be tested one call at a time instead of only end to end.

use std::path::Path;
use std::sync::Arc;

use super::build::{self, AdapterOverride};
use crate::config::Config;
use crate::dispatcher::Dispatcher;
use crate::engine::Services;
use crate::local::LocalHub;
use crate::roster::ChatRules;
use crate::store::Store;
use crate::timing::Zone;
use crate::tools::AgentTools;

/// A gateway's parts, not started: no account connects and no timer runs.
pub(crate) struct Parts {
    /// The services.
    pub services: Arc<Services>,
    /// The pipeline over them.
    pub dispatcher: Dispatcher,
    /// The local channel every bot has an account on (replies land in its rooms).
    pub hub: Arc<LocalHub>,
}

/// The parts for config `toml`, which must be valid (panics with the problems otherwise).
pub(crate) async fn parts(toml: &str) -> Parts {
    let env = |_: &str| None;
    let config = Config::from_toml(toml, Path::new("."), &env)
        .unwrap_or_else(|problems| panic!("test config is invalid: {problems:?}"));
    let store = Store::open(":memory:").await.expect("in-memory store");
    let hub = LocalHub::with_names(&config.local, build::sender_names(&config));
    let roster = build::roster(
        &config,
        &hub,
        &env,
        &AdapterOverride::none(),
        &crate::backend::Reaper::default(),
    )
    .expect("roster");
    let chat_rules = ChatRules::new(&config).expect("chat rules");
    let zone = Zone::parse(&config.gateway.timezone).expect("zone");
    let services = Services::new(
        Arc::new(config),
        roster,
        chat_rules,
        store,
        zone,
        AgentTools::bind,
    )
    .expect("services");
    let services = Arc::new(services);
    let dispatcher = Dispatcher::new(Arc::clone(&services));
    services.wire_handover(dispatcher.handover_runner());
    Parts {
        dispatcher,
        services,
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
