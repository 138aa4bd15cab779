//! Account leases: which instance may connect each socket account, so that several gateways on
//! one database never hold one platform socket twice (issue 22).
//!
//! An instance registers itself ([`Store::instance_register`]), then renews every lease it holds
//! and tries to take every one it wants, in one write per round ([`Store::lease_round`]). Taking
//! and renewing are the same single statement, an upsert whose `DO UPDATE` only applies when the
//! lease has expired or is already the caller's; `RETURNING` says whether it applied. The row
//! lock the upsert takes makes it safe with any number of instances racing: one wins, the others
//! get no row back.
//!
//! Whose clock counts: the database's. Expiry is written and compared with the database server's
//! current time (`clock_timestamp()` on PostgreSQL, the statement's time rather than its
//! transaction's; `unixepoch('subsec')` on SQLite), so instances whose clocks disagree still
//! agree on who holds what. An instance fences itself with its own monotonic clock, counted from
//! before it sent the renewal (see `cluster/`), which can only be earlier than the database's
//! moment of renewal: it stops using a socket before the database lets anyone else take it.

use super::sql::{Db, DbError, Engine, args};
use super::{Store, StoreError};

/// The database's current time in ms since the epoch, for each engine.
macro_rules! now_ms {
    (sqlite) => {
        "CAST(unixepoch('subsec') * 1000 AS INTEGER)"
    };
    (postgres) => {
        "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT"
    };
}

/// A statement using the database's clock, in each engine's words: `[sqlite, postgres]`.
macro_rules! with_clock {
    (@part $engine:ident; NOW) => { now_ms!($engine) };
    (@part $engine:ident; $text:literal) => { $text };
    (@ $engine:ident; $($part:tt)*) => {
        concat!($(with_clock!(@part $engine; $part)),*)
    };
    ($($part:tt)*) => {
        [with_clock!(@ sqlite; $($part)*), with_clock!(@ postgres; $($part)*)]
    };
}

pub(super) use {now_ms, with_clock};

/// The ids of the live instances, renewed less than `?3` ms ago: a subquery for the other
/// tables that name an instance (deliveries' runners).
pub(super) const LIVE_IDS: [&str; 2] = with_clock!(
    "SELECT id FROM instances WHERE stopping = 0 AND renewed_ms > " NOW " - ?3"
);

/// A live holder of one account's lease: the lease unexpired, its holder renewed within `?3`.
const LIVE_HOLDER: [&str; 2] = with_clock!(
    "SELECT holder FROM leases WHERE platform = ?1 AND account = ?2 AND expires_ms > "
    NOW
    " AND holder IN (SELECT id FROM instances WHERE renewed_ms > "
    NOW
    " - ?3)"
);

/// Take or renew: applies only when the lease is free, expired, or already the caller's.
const TAKE: [&str; 2] = with_clock!(
    "INSERT INTO leases (platform, account, holder, expires_ms) VALUES (?1, ?2, ?3, "
    NOW
    " + ?4) ON CONFLICT (platform, account) DO UPDATE
       SET holder = excluded.holder, expires_ms = excluded.expires_ms
       WHERE leases.holder = excluded.holder OR leases.expires_ms <= "
    NOW
    " RETURNING holder"
);

/// An instance's row, new or restarted: started and renewed now.
const REGISTER: [&str; 2] = with_clock!(
    "INSERT INTO instances (id, started_ms, renewed_ms, version) VALUES (?1, "
    NOW
    ", "
    NOW
    ", ?2) ON CONFLICT (id) DO UPDATE
       SET started_ms = excluded.started_ms, renewed_ms = excluded.renewed_ms,
           version = excluded.version, stopping = 0"
);

/// Another live instance's row under the same id: renewed less than `?2` ms ago.
const LIVE_TWIN: [&str; 2] = with_clock!(
    "SELECT " NOW " - renewed_ms FROM instances WHERE id = ?1 AND stopping = 0 AND renewed_ms > "
    NOW
    " - ?2"
);

/// The instance renewed now; the rows of instances silent for a day are dropped.
const RENEW_INSTANCE: [&str; 2] = with_clock!(
    "UPDATE instances SET renewed_ms = " NOW " WHERE id = ?1"
);
const FORGET_SILENT: [&str; 2] = with_clock!(
    "DELETE FROM instances WHERE renewed_ms < " NOW " - 86400000"
);

/// How many instances are live: renewed less than `?1` ms ago.
const LIVE: [&str; 2] = with_clock!(
    "SELECT COUNT(*) FROM instances WHERE stopping = 0 AND renewed_ms > " NOW " - ?1"
);

/// The leases an instance holds now.
const MINE: [&str; 2] = with_clock!(
    "SELECT platform, account FROM leases WHERE holder = ?1 AND expires_ms > " NOW
);

/// What `baton cluster status` shows: every instance with the accounts it holds now.
const STATUS_INSTANCES: [&str; 2] = with_clock!(
    "SELECT id, started_ms, renewed_ms, version, " NOW " FROM instances ORDER BY id"
);
const STATUS_HELD: [&str; 2] = with_clock!(
    "SELECT holder, platform, account, expires_ms FROM leases WHERE expires_ms > "
    NOW
    " ORDER BY holder, platform, account"
);

/// The text of `text` for `db`'s engine.
pub(super) fn sql(db: Db<'_>, text: [&'static str; 2]) -> &'static str {
    match db.engine() {
        Engine::Sqlite => text[0],
        Engine::Postgres => text[1],
    }
}

/// One socket account's lease: which account, on which platform.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct LeaseKey {
    /// The platform's name (`slack`, `discord`, `feishu`, `lark`).
    pub platform: String,
    /// The account's id.
    pub account: String,
}

/// What one round of an instance found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRound {
    /// For each account asked about, in order, whether the instance holds it now.
    pub held: Vec<bool>,
    /// How many instances are live (this one included).
    pub live: usize,
}

/// Whether an instance could register under its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registered {
    /// The row is this process's now.
    Yes,
    /// Another live process renewed under the same id `renewed_ago_ms` ago: two instances with
    /// one id would both believe they hold its leases, so the second must not start.
    LiveTwin {
        /// How long ago the other one renewed.
        renewed_ago_ms: i64,
    },
}

/// One instance as `baton cluster status` and `/api/cluster` show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct InstanceStatus {
    /// Its `cluster.instance_id`.
    pub id: String,
    /// When it registered (database clock, ms since the epoch).
    pub started_ms: i64,
    /// When it last renewed (database clock).
    pub renewed_ms: i64,
    /// The baton version it runs.
    pub version: String,
    /// The accounts whose lease it holds now.
    pub accounts: Vec<HeldLease>,
}

/// A lease held now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HeldLease {
    /// The platform's name.
    pub platform: String,
    /// The account's id.
    pub account: String,
    /// When it expires unless renewed (database clock).
    pub expires_ms: i64,
}

/// The instances sharing the database, and the database's time they were read at.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClusterStatus {
    /// The database's clock when read, to show "renewed 3 s ago" without trusting the
    /// reader's clock.
    pub now_ms: i64,
    /// Every instance with a row, by id.
    pub instances: Vec<InstanceStatus>,
}

impl Store {
    /// Record instance `id` (running baton `version`) as started now, unless another process
    /// renewed under the same id less than `lease_ms` ago. Then this handle files events as
    /// `id`'s, and the inbox rows a previous process under `id` left are nobody's: any instance
    /// serving their account takes them over ([`Store::inbox_adopt`]).
    pub async fn instance_register(
        &self,
        id: &str,
        version: &str,
        lease_ms: i64,
    ) -> Result<Registered, StoreError> {
        let (owned, version) = (id.to_owned(), version.to_owned());
        let registered = self
            .write(move |db| {
                let id = &owned;
                let twin: Option<i64> = db
                    .query_map(sql(db, LIVE_TWIN), args![id, lease_ms], |row| row.get(0))?
                    .pop();
                if let Some(renewed_ago_ms) = twin {
                    return Ok(Registered::LiveTwin { renewed_ago_ms });
                }
                db.execute(sql(db, REGISTER), args![id, &version])?;
                db.execute("UPDATE inbox SET owner = '' WHERE owner = ?1", args![id])?;
                Ok(Registered::Yes)
            })
            .await?;
        if registered == Registered::Yes {
            self.set_instance(id);
        }
        Ok(registered)
    }

    /// One round of instance `id`: renew its row, give up the leases of `releasing` (surplus
    /// whose sockets are closed by now), then hold at most its share of `accounts` for `lease_ms`
    /// from now: renew those it holds, keeping the first in `accounts`' order, and take free or
    /// expired ones while it has fewer. Its share is ceil(accounts / live instances), live
    /// meaning renewed within `lease_ms`, so accounts spread over the instances and a new one
    /// gets work. Returns, for each account in order, whether `id` holds it now; one it held
    /// and did not renew is surplus, for the caller to close and pass as `releasing` next round.
    /// One write: every lease of the round commits together.
    pub async fn lease_round(
        &self,
        id: &str,
        accounts: Vec<LeaseKey>,
        releasing: Vec<LeaseKey>,
        lease_ms: i64,
    ) -> Result<LeaseRound, StoreError> {
        let id = id.to_owned();
        self.write(move |db| {
            db.execute(sql(db, RENEW_INSTANCE), args![&id])?;
            db.execute(sql(db, FORGET_SILENT), &[])?;
            for key in &releasing {
                db.execute(
                    "DELETE FROM leases WHERE platform = ?1 AND account = ?2 AND holder = ?3",
                    args![key.platform.as_str(), key.account.as_str(), &id],
                )?;
            }
            let live: i64 = db.query_row(sql(db, LIVE), args![lease_ms], |r| r.get(0))?;
            let live = usize::try_from(live).unwrap_or(1).max(1);
            let share = accounts.len().div_ceil(live);
            let mine: Vec<LeaseKey> = db.query_map(sql(db, MINE), args![&id], |row| {
                Ok(LeaseKey {
                    platform: row.get(0)?,
                    account: row.get(1)?,
                })
            })?;
            let mut held = vec![false; accounts.len()];
            let mut count = 0;
            for (at, key) in accounts.iter().enumerate() {
                if count < share && mine.contains(key) && take(db, &id, key, lease_ms)? {
                    held[at] = true;
                    count += 1;
                }
            }
            for (at, key) in accounts.iter().enumerate() {
                if count < share
                    && !held[at]
                    && !mine.contains(key)
                    && take(db, &id, key, lease_ms)?
                {
                    held[at] = true;
                    count += 1;
                }
            }
            Ok(LeaseRound { held, live })
        })
        .await
    }

    /// The live instances holding a lease of any of `accounts` (a bot's socket accounts: its
    /// home), in `accounts`' order.
    pub async fn lease_holders(
        &self,
        accounts: Vec<LeaseKey>,
        lease_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        self.read(move |db| {
            let mut holders = Vec::new();
            for key in &accounts {
                let args = args![key.platform.as_str(), key.account.as_str(), lease_ms];
                holders.extend(db.query_map(sql(db, LIVE_HOLDER), args, |r| r.get::<String>(0))?);
            }
            Ok(holders)
        })
        .await
    }

    /// Instance `id` stops: its leases are free at once (another instance takes them on its
    /// next round, without waiting for expiry), and it no longer counts as live (for the
    /// others' share of the accounts, and for its deliveries). Its row stays while its last
    /// turns drain ([`Store::instance_deregister`] ends it), so nobody takes over the inbox
    /// events it still runs.
    pub async fn lease_release(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(move |db| {
            db.execute("DELETE FROM leases WHERE holder = ?1", args![&id])?;
            db.execute(
                "UPDATE instances SET stopping = 1 WHERE id = ?1",
                args![&id],
            )
            .map(drop)
        })
        .await
    }

    /// Instance `id` has stopped, its turns drained: its row goes, and whatever it left in the
    /// inbox is taken over by the instances serving those accounts.
    pub async fn instance_deregister(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(move |db| {
            db.execute("DELETE FROM instances WHERE id = ?1", args![&id])
                .map(drop)
        })
        .await
    }

    /// Every instance but `id` is forgotten, with its leases. Only for SQLite: there the
    /// database lock proves this process is the only one running, so another instance's leases
    /// were left by a process that stopped, and a gateway restarted after a kill -9 would
    /// otherwise keep its sockets down until they expired.
    pub async fn instances_forget_others(&self, id: &str) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.write(move |db| {
            db.execute("DELETE FROM leases WHERE holder <> ?1", args![&id])?;
            db.execute("DELETE FROM instances WHERE id <> ?1", args![&id])?;
            Ok(())
        })
        .await
    }

    /// Every instance, its last renewal and the accounts it holds now.
    pub async fn cluster_status(&self) -> Result<ClusterStatus, StoreError> {
        self.read(|db| {
            let mut now_ms = None;
            let mut instances = db.query_map(sql(db, STATUS_INSTANCES), &[], |row| {
                now_ms = Some(row.get(4)?);
                Ok(InstanceStatus {
                    id: row.get(0)?,
                    started_ms: row.get(1)?,
                    renewed_ms: row.get(2)?,
                    version: row.get(3)?,
                    accounts: Vec::new(),
                })
            })?;
            let held: Vec<(String, HeldLease)> =
                db.query_map(sql(db, STATUS_HELD), &[], |row| {
                    Ok((
                        row.get(0)?,
                        HeldLease {
                            platform: row.get(1)?,
                            account: row.get(2)?,
                            expires_ms: row.get(3)?,
                        },
                    ))
                })?;
            for (holder, lease) in held {
                if let Some(at) = instances.iter_mut().find(|i| i.id == holder) {
                    at.accounts.push(lease);
                }
            }
            let now_ms = match now_ms {
                Some(now) => now,
                None => db.query_row(sql(db, with_clock!("SELECT " NOW)), &[], |r| r.get(0))?,
            };
            Ok(ClusterStatus { now_ms, instances })
        })
        .await
    }
}

/// The one conditional statement: take or renew `key` for `id`; whether `id` holds it now.
fn take(db: Db<'_>, id: &str, key: &LeaseKey, lease_ms: i64) -> Result<bool, DbError> {
    let won = db.query_map(
        sql(db, TAKE),
        args![key.platform.as_str(), key.account.as_str(), id, lease_ms],
        |row| row.get::<String>(0),
    )?;
    Ok(won.first().is_some_and(|holder| holder == id))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::store::testing;

    /// Which of `accounts` instance `id` holds after one round that releases nothing.
    async fn round(store: &Store, id: &str, accounts: Vec<LeaseKey>, lease_ms: i64) -> Vec<bool> {
        store
            .lease_round(id, accounts, vec![], lease_ms)
            .await
            .unwrap()
            .held
    }

    fn slack(account: &str) -> LeaseKey {
        LeaseKey {
            platform: "slack".into(),
            account: account.into(),
        }
    }

    #[tokio::test]
    async fn two_instances_racing_for_one_account_one_wins() {
        for db in testing::engines().await {
            // Two handles on one database: two writers, as two processes have.
            let (a, b) = (db.open().await, db.open().await);
            for (store, id) in [(&a, "a"), (&b, "b")] {
                let registered = store.instance_register(id, "0.1", 60_000).await.unwrap();
                assert_eq!(registered, Registered::Yes, "{}", db.engine());
            }
            for round in 0..20 {
                let key = slack(&format!("acct{round}"));
                let (won_a, won_b) = tokio::join!(
                    a.lease_round("a", vec![key.clone()], vec![], 60_000),
                    b.lease_round("b", vec![key.clone()], vec![], 60_000),
                );
                let (won_a, won_b) = (won_a.unwrap().held[0], won_b.unwrap().held[0]);
                assert!(
                    won_a != won_b,
                    "{}: round {round}: exactly one holds it",
                    db.engine()
                );
            }
            let status = a.cluster_status().await.unwrap();
            let held: usize = status.instances.iter().map(|i| i.accounts.len()).sum();
            assert_eq!(held, 20, "{}: {status:?}", db.engine());
        }
    }

    #[tokio::test]
    async fn the_holder_renews_and_others_wait_until_it_expires() {
        for db in testing::engines().await {
            let store = db.open().await;
            let key = || vec![slack("acct")];
            assert_eq!(round(&store, "a", key(), 60_000).await, [true]);
            assert_eq!(round(&store, "a", key(), 60_000).await, [true]);
            assert_eq!(
                round(&store, "b", key(), 60_000).await,
                [false],
                "{}: held and renewed by a",
                db.engine()
            );
            // A short lease that a stops renewing: b takes it once it has expired, not before.
            // Before the renewal is sent: the database dates the lease later than this.
            let renewed = Instant::now();
            assert_eq!(round(&store, "a", key(), 300).await, [true]);
            assert_eq!(round(&store, "b", key(), 300).await, [false]);
            let deadline = renewed + Duration::from_secs(10);
            loop {
                if round(&store, "b", key(), 60_000).await == [true] {
                    break;
                }
                assert!(Instant::now() < deadline, "{}: never expired", db.engine());
                tokio::task::yield_now().await;
            }
            // The database clock counts whole ms, and SQLite's `unixepoch('subsec') * 1000` is a
            // float cast down: the lease may end a ms or two before 300 ms on this clock.
            let held = renewed.elapsed();
            assert!(
                held >= Duration::from_millis(290),
                "{}: taken {held:?} after the renewal, before the lease expired",
                db.engine()
            );
            assert_eq!(
                round(&store, "a", key(), 60_000).await,
                [false],
                "{}: the old holder cannot take it back",
                db.engine()
            );
        }
    }

    #[tokio::test]
    async fn a_clean_stop_frees_its_leases_at_once() {
        for db in testing::engines().await {
            let store = db.open().await;
            store.instance_register("a", "0.1", 60_000).await.unwrap();
            let keys = || vec![slack("one"), slack("two")];
            assert_eq!(round(&store, "a", keys(), 60_000).await, [true, true]);
            store.instance_register("b", "0.1", 60_000).await.unwrap();
            store.lease_release("a").await.unwrap();
            assert_eq!(
                round(&store, "b", keys(), 60_000).await,
                [true, true],
                "{}",
                db.engine()
            );
            let ids = |status: ClusterStatus| -> Vec<String> {
                status.instances.into_iter().map(|i| i.id).collect()
            };
            assert_eq!(
                ids(store.cluster_status().await.unwrap()),
                ["a", "b"],
                "{}: a's row stays while its last turns drain",
                db.engine()
            );
            store.instance_deregister("a").await.unwrap();
            let status = store.cluster_status().await.unwrap();
            let ids: Vec<_> = status.instances.iter().map(|i| i.id.as_str()).collect();
            assert_eq!(ids, ["b"], "{}: a's row went with it", db.engine());
            let held: Vec<_> = status.instances[0]
                .accounts
                .iter()
                .map(|l| &l.account)
                .collect();
            assert_eq!(held, ["one", "two"], "{}", db.engine());
            assert!(status.instances[0].renewed_ms <= status.now_ms);
        }
    }

    #[tokio::test]
    async fn a_second_live_process_under_one_id_is_refused() {
        for db in testing::engines().await {
            let store = db.open().await;
            assert_eq!(
                store.instance_register("a", "0.1", 60_000).await.unwrap(),
                Registered::Yes
            );
            let twin = store.instance_register("a", "0.1", 60_000).await.unwrap();
            assert!(
                matches!(twin, Registered::LiveTwin { renewed_ago_ms } if renewed_ago_ms < 60_000),
                "{}: {twin:?}",
                db.engine()
            );
            // A restart after the lease time (the old process is gone) is the same instance.
            assert_eq!(
                store.instance_register("a", "0.2", 0).await.unwrap(),
                Registered::Yes,
                "{}",
                db.engine()
            );
        }
    }

    /// Two live instances share two accounts: the first holds both until the second is live,
    /// then renews only its share and gives the other up, which the second takes.
    #[tokio::test]
    async fn leases_spread_over_the_live_instances() {
        for db in testing::engines().await {
            let store = db.open().await;
            let keys = || vec![slack("one"), slack("two")];
            store.instance_register("a", "0.1", 60_000).await.unwrap();
            let round = |id: &'static str, releasing: Vec<LeaseKey>| {
                let store = store.clone();
                async move {
                    store
                        .lease_round(id, keys(), releasing, 60_000)
                        .await
                        .unwrap()
                        .held
                }
            };
            assert_eq!(round("a", vec![]).await, [true, true], "{}", db.engine());
            store.instance_register("b", "0.1", 60_000).await.unwrap();
            assert_eq!(round("b", vec![]).await, [false, false], "{}", db.engine());
            assert_eq!(
                round("a", vec![]).await,
                [true, false],
                "{}: a keeps its share, the first",
                db.engine()
            );
            assert_eq!(
                round("b", vec![]).await,
                [false, false],
                "{}: not yet released",
                db.engine()
            );
            assert_eq!(round("a", vec![slack("two")]).await, [true, false]);
            assert_eq!(round("b", vec![]).await, [false, true], "{}", db.engine());
            assert_eq!(round("a", vec![]).await, [true, false], "{}", db.engine());
            // b stops: a alone again wants both, and takes the freed one.
            store.lease_release("b").await.unwrap();
            assert_eq!(round("a", vec![]).await, [true, true], "{}", db.engine());
        }
    }
}
