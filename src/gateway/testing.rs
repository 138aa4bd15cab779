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
    parts_on(toml, store, &|_| None)
}

/// [`parts`] over `store`, with `env` holding the secrets the config names.
pub(crate) fn parts_on(toml: &str, store: Store, env: &dyn Fn(&str) -> Option<String>) -> Parts {
    let config = Config::from_toml(toml, Path::new("."), env)
        .unwrap_or_else(|problems| panic!("test config is invalid: {problems:?}"));
    let Assembled {
        engine,
        dispatcher,
        relay,
        chains,
        scheduler,
        hub,
        ..
    } = assemble(Arc::new(config), store, env, &AdapterOverride::none()).expect("assembled");
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

/// Waits (at most 10 s) until `done` answers true, asking again every few milliseconds; panics
/// naming `what` when it never does.
pub(crate) async fn eventually<F: std::future::Future<Output = bool>>(
    what: &str,
    mut done: impl FnMut() -> F,
) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "waited 10 s in vain: {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// Waits (at most 10 s) until every task `engine` spawned (runs, pushed outcomes, wakes,
/// exchanges) has ended.
pub(crate) async fn until_idle(engine: &Engine) {
    eventually("the engine's tasks end", || async {
        engine.tasks().is_empty()
    })
    .await;
}

/// A `sessions_send` `run_id` of `message` from bot `sender`, in its chat `room`, to bot
/// `target`, in its backchannel for the sender: fire-and-forget (nobody waits), one hop deep.
/// Write it with [`begun`].
pub(crate) fn new_delivery(
    run_id: &str,
    sender: &str,
    target: &str,
    message: &str,
) -> crate::store::NewDelivery {
    let sender_session: crate::session::SessionKey =
        format!("bot:{sender}:local:{sender}:room").parse().unwrap();
    crate::store::NewDelivery {
        run_id: run_id.into(),
        sender: sender.parse().unwrap(),
        target: target.parse().unwrap(),
        target_session: format!("bot:{target}:local:{target}:a2a:{sender}")
            .parse()
            .unwrap(),
        message: message.into(),
        idempotency_key: None,
        depth: 2,
        origin: Some(sender_session.clone()),
        sender_session,
        trigger: None,
        trace_parent: None,
        mode: crate::store::SendMode::Fire,
        artifacts_in: Vec::new(),
        expect: None,
        created_ms: crate::timing::now_ms(),
        waiter: None,
    }
}

/// Writes `new` queued, claimed by `runner`: the delivery as the relay then holds it.
pub(crate) async fn begun(
    engine: &Engine,
    new: crate::store::NewDelivery,
    runner: Option<&str>,
) -> crate::store::Delivery {
    match engine.store().delivery_begin(new, 0, runner).await {
        Ok(crate::store::Begun::New(d)) => d,
        other => panic!("not written anew: {other:?}"),
    }
}

/// The texts posted in local room `room`, oldest first.
pub(crate) async fn room_texts(parts: &Parts, room: &str) -> Vec<String> {
    let messages = parts.hub.messages(room, None).await.expect("room messages");
    messages.into_iter().map(|m| m.text).collect()
}

/// Echo bots `ids` on `db`, the first with a Discord account too (a socket account: where its
/// lease is held is the bot's home), whose lease the live instance `other` holds.
pub(crate) async fn held_elsewhere(ids: &[&str], db: &crate::store::testing::TestDb) -> Parts {
    let discord = format!(
        "\n[[accounts]]\nbot = \"{}\"\nplatform = \"discord\"\n\
         bot_token_env = \"DISCORD_TOKEN\"\napplication_id = \"1\"\n",
        ids[0]
    );
    let env = |name: &str| (name == "DISCORD_TOKEN").then(|| "token".to_owned());
    let gw = parts_on(&echo_config(ids, &discord), db.open().await, &env);
    let store = gw.engine.store();
    let lease = 60_000;
    let keys = crate::cluster::socket_leases(gw.engine.roster().accounts());
    assert_eq!(keys.len(), 1, "the Discord account");
    store
        .instance_register("other", "0.1", lease)
        .await
        .unwrap();
    let round = store.lease_round("other", keys, Vec::new(), lease).await;
    assert_eq!(
        round.unwrap().held,
        [true],
        "other holds the Discord account"
    );
    gw
}
