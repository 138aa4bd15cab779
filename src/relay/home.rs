//! Which instance runs a delivery: the target bot's *home*, the live instance holding the lease
//! of one of the target's socket accounts, so a bot's turns run where its socket is. A bot
//! with no socket account, or whose accounts nobody live holds, or any bot on SQLite (one
//! instance), is run by the instance that wrote the delivery: the sender's.

use crate::bot_id::BotId;
use crate::engine::Engine;

/// Where a bot's deliveries run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Home {
    /// On this instance.
    Here,
    /// On the live instance with this id.
    There(String),
}

/// The home of `bot`. A store that cannot answer counts as no live holder: the run stays here
/// rather than nowhere.
pub(super) async fn home_of(engine: &Engine, bot: &BotId) -> Home {
    if !engine.store().session_locks_shared() {
        return Home::Here;
    }
    let accounts = engine
        .roster()
        .accounts()
        .iter()
        .filter(|account| account.bot.id() == bot);
    let keys = crate::cluster::socket_leases(accounts);
    if keys.is_empty() {
        return Home::Here;
    }
    let lease_ms = i64::try_from(engine.lease().as_millis()).unwrap_or(i64::MAX);
    let holders = match engine.store().lease_holders(keys, lease_ms).await {
        Ok(holders) => holders,
        Err(err) => {
            tracing::warn!(%bot, %err, "cannot tell which instance holds the bot's accounts; running its delivery here");
            return Home::Here;
        }
    };
    let me = engine.instance();
    if holders.iter().any(|holder| holder == me) {
        return Home::Here;
    }
    holders.into_iter().next().map_or(Home::Here, Home::There)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::testing::held_elsewhere;
    use crate::store::testing::engines;

    /// A bot's deliveries run where its socket account is held, when instances share a
    /// PostgreSQL database: on that live instance, or here when nobody holds it, when this
    /// instance does, or when the bot has no socket account. On SQLite (one instance) every
    /// delivery runs here, whoever once held the account.
    #[tokio::test]
    async fn a_bot_runs_where_its_socket_is_held_on_a_shared_database() {
        let (alpha, beta): (BotId, BotId) = ("alpha".parse().unwrap(), "beta".parse().unwrap());
        for db in engines().await {
            let gw = held_elsewhere(&["alpha", "beta"], &db).await;
            let engine = &gw.engine;
            let store = engine.store();
            let held_by_other = match db.url() {
                Some(_) => Home::There("other".into()),
                None => Home::Here,
            };
            let engine_name = db.engine();
            assert_eq!(
                home_of(engine, &alpha).await,
                held_by_other,
                "{engine_name}"
            );
            assert_eq!(home_of(engine, &beta).await, Home::Here, "{engine_name}");

            store.lease_release("other").await.unwrap();
            assert_eq!(home_of(engine, &alpha).await, Home::Here, "nobody holds it");
            let (me, lease) = (engine.instance(), 60_000);
            let keys = crate::cluster::socket_leases(engine.roster().accounts());
            store.instance_register(me, "0.1", lease).await.unwrap();
            store
                .lease_round(me, keys, Vec::new(), lease)
                .await
                .unwrap();
            assert_eq!(home_of(engine, &alpha).await, Home::Here, "{engine_name}");
        }
    }
}
