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
    use crate::gateway::testing::{echo_config, parts, parts_on};

    /// On SQLite there is one instance: whoever else once held the bot's accounts, it is not
    /// alive to run anything.
    #[tokio::test]
    async fn on_sqlite_every_bot_is_run_here() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let store = gw.engine.store();
        store
            .instance_register("other", "0.1", 60_000)
            .await
            .unwrap();
        let alpha: BotId = "alpha".parse().unwrap();
        let alphas = crate::store::LeaseKey {
            platform: "local".into(),
            account: "alpha".into(),
        };
        store
            .lease_round("other", vec![alphas], Vec::new(), 60_000)
            .await
            .unwrap();
        assert_eq!(home_of(&gw.engine, &alpha).await, Home::Here);
    }

    /// With instances sharing a PostgreSQL database, a bot's deliveries run where its socket
    /// account is held: on that live instance, or here when nobody holds it, when this instance
    /// does, or when the bot has no socket account.
    #[tokio::test]
    async fn on_postgres_a_bot_runs_where_its_socket_is_held() {
        let db = crate::store::testing::TestDb::postgres().await;
        let discord = "\n[[accounts]]\nbot = \"alpha\"\nplatform = \"discord\"\n\
                       bot_token_env = \"ALPHA_TOKEN\"\napplication_id = \"1\"\n";
        let env = |name: &str| (name == "ALPHA_TOKEN").then(|| "token".to_owned());
        let config = echo_config(&["alpha", "beta"], discord);
        let gw = parts_on(&config, db.open().await, &env);
        let engine = &gw.engine;
        let store = engine.store();
        let (alpha, beta): (BotId, BotId) = ("alpha".parse().unwrap(), "beta".parse().unwrap());
        let lease = 60_000;
        let keys = crate::cluster::socket_leases(engine.roster().accounts());
        assert_eq!(keys.len(), 1, "alpha's discord account");
        assert_eq!(home_of(engine, &alpha).await, Home::Here, "nobody holds it");

        store
            .instance_register("other", "0.1", lease)
            .await
            .unwrap();
        let round = store.lease_round("other", keys.clone(), Vec::new(), lease);
        round.await.unwrap();
        assert_eq!(home_of(engine, &alpha).await, Home::There("other".into()));
        assert_eq!(home_of(engine, &beta).await, Home::Here);

        store.lease_release("other").await.unwrap();
        let me = engine.instance();
        store.instance_register(me, "0.1", lease).await.unwrap();
        store
            .lease_round(me, keys, Vec::new(), lease)
            .await
            .unwrap();
        assert_eq!(home_of(engine, &alpha).await, Home::Here);
    }
}
