//! The kill -9 fault test of `tests/it/faults.rs`, against three instances (README "Running
//! several instances"): three `baton run` children on one PostgreSQL database, three Slack Socket
//! Mode accounts on the fake Slack, which offers every event again until a socket acknowledges
//! it, and a model that takes a while over each answer. While messages keep coming, each round
//! kills a random instance with SIGKILL at a random moment and starts it again (under its id,
//! once its registration has run out); the middle round restarts PostgreSQL instead
//! (`pg_ctl restart -m fast`, on a server of the test's own). At the end:
//! every message answered at most once, none lost without a record (answered, or a failure in
//! the transcript), every account connected by exactly one instance, and never two sockets open
//! for one account at any moment.
//!
//! The instance and the moment of each kill come from a seeded RNG; the seed is printed so a
//! failure can be replayed (`BATON_FAULT_SEED`). Waits poll for a state with a deadline.
//!
//! A rolling restart (SIGTERM each instance in turn, start a new one in its place, let the
//! accounts spread again) under the same traffic answers every message exactly once and leaves no account
//! without a socket for longer than `lease_seconds`.

use std::time::Duration;

use baton::store::{EntryKind, Store};
use rand::Rng;

use crate::support::fake_openai::FakeOpenAi;
use crate::support::fake_slack::FakeSlack;
use crate::support::instances::{Instance, Instances, LEASE_SECONDS, holders, job, mention};
use crate::support::postgres::{database, own_server};
use crate::support::process::{EXIT_DEADLINE, eventually, fault_rng};

/// The accounts, one bot each: one per instance once they spread.
const APPS: [&str; 3] = ["snark", "caid", "sec"];
/// How many instances share the database.
const INSTANCES: [&str; 3] = ["baton-a", "baton-b", "baton-c"];
/// How many rounds: an instance is killed in each, but for the middle one, which restarts
/// PostgreSQL.
const ROUNDS: usize = 7;
/// How many messages the fake Slack delivers over the run, alternating between the accounts,
/// one every [`PACE`], so the kills land mid-stream.
const MESSAGES: usize = 120;
const PACE: Duration = Duration::from_millis(200);
/// How long the model takes over each answer: kills land in turns under way too.
const MODEL_TIME: Duration = Duration::from_millis(150);
/// Bounds each wait: a failover, the redeliveries, the reruns.
const WAIT: Duration = Duration::from_secs(60);

/// The account message `n` goes to.
fn app_of(n: usize) -> &'static str {
    APPS[n % APPS.len()]
}

fn envelope(n: usize) -> String {
    format!("env-{n}")
}

/// The run id of the answer to message `n`.
fn run_of(n: usize) -> String {
    format!("in:slack:{}:C1:1700000000.{n:06}", app_of(n))
}

/// How many times message `n` was answered, by its own bot.
fn answers(slack: &FakeSlack, n: usize) -> usize {
    let (token, job) = (format!("xoxb-{}", app_of(n)), job(n));
    slack
        .posts()
        .iter()
        .filter(|p| p.token == token && p.text.ends_with(&job))
        .count()
}

/// Run ids of the runs that recorded a failure.
async fn failed_runs(store: &Store) -> Vec<String> {
    let entries = store.transcript_page(0, usize::MAX).await.unwrap();
    entries
        .into_iter()
        .filter(|e| e.kind == EntryKind::Failure)
        .filter_map(|e| e.run_id)
        .collect()
}

/// Wait until `id`'s registration is older than a lease (it stopped renewing), so the same id
/// may start again.
async fn registration_ran_out(store: &Store, id: &str) {
    let lease_ms = i64::try_from(LEASE_SECONDS * 1000).unwrap();
    eventually(
        WAIT,
        "the killed instance's registration to run out",
        || async {
            let status = store.cluster_status().await.unwrap();
            let live = status
                .instances
                .iter()
                .any(|i| i.id == id && i.renewed_ms > status.now_ms - lease_ms);
            (!live).then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_a_random_instance_each_round_answers_every_message_at_most_once() {
    let (seed, mut rng) = fault_rng();

    let (server, url) = own_server("chaos").await;
    let Cluster {
        slack,
        model,
        instances: cluster,
        mut store,
        mut running,
    } = Cluster::start_on(url).await;
    let feeder = feed(&slack);
    for round in 0..ROUNDS {
        let after = Duration::from_millis(rng.random_range(0..2000));
        tokio::time::sleep(after).await; // the fault's timing, not a synchronisation
        if round == ROUNDS / 2 {
            println!("round {round}: pg_ctl restart -m fast after {after:?}");
            server.restart().await;
            // The test's own handle reads on fresh connections from here on.
            store = cluster.store().await;
            continue;
        }
        let victim = rng.random_range(0..running.len());
        let id = running[victim].id.clone();
        println!("round {round}: kill -9 {id} after {after:?}");
        running[victim].kill().await;
        registration_ran_out(&store, &id).await;
        running[victim] = cluster.start(&id).await;
    }
    feeder.await.unwrap();

    let answered = every_message_answered_once_or_failed(&store, &slack, &running, seed).await;
    connected_once_each(&store, &slack, &running, seed).await;
    let sends: u32 = slack.sends().iter().map(|s| s.saturating_sub(1)).sum();
    println!(
        "{MESSAGES} messages, {} kills of 3 instances and a PostgreSQL restart, {sends} \
         redeliveries, {} turns \
         begun, {} answered, {} recorded as failed",
        ROUNDS - 1,
        model.requests().len(),
        answered,
        MESSAGES - answered
    );
}

/// SIGTERM each instance in turn while messages keep coming, start a new one (a new id) in its
/// place, and wait for the accounts to spread over the three again before the next. Every message is
/// answered exactly once or failed on record, and no account is without a socket for longer
/// than a lease: from one socket's close to the next one's open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_leaves_no_account_unconnected_longer_than_a_lease() {
    let Cluster {
        slack,
        model: _model,
        instances,
        store,
        mut running,
    } = Cluster::start().await;
    one_account_each(&store, &INSTANCES).await;
    let feeder = feed(&slack);
    for at in 0..running.len() {
        let old = &mut running[at];
        println!("SIGTERM {}", old.id);
        old.process.terminate();
        old.process.wait(EXIT_DEADLINE).await;
        // A new process under a new id, as a replaced pod or the default id (host and pid) has.
        running[at] = instances.start(&format!("{}-2", running[at].id)).await;
        one_account_each(&store, &running_ids(&running)).await;
    }
    feeder.await.unwrap();

    let answered = every_message_answered_once_or_failed(&store, &slack, &running, 0).await;
    connected_once_each(&store, &slack, &running, 0).await;
    let lease = Duration::from_secs(LEASE_SECONDS);
    for app in APPS {
        let spans = slack.spans(app);
        let longest = spans
            .windows(2)
            .map(|w| {
                let closed = w[0].closed.expect("a later socket opened after it closed");
                w[1].opened.saturating_duration_since(closed)
            })
            .max()
            .unwrap_or_default();
        assert!(
            longest <= lease,
            "{app} had no socket for {longest:?}, longer than the lease ({lease:?}): {spans:?}"
        );
        println!(
            "{app}: {} sockets, longest without one {longest:?}",
            spans.len()
        );
    }
    println!("{MESSAGES} messages over a rolling restart, {answered} answered");
}

/// The ids of `running`.
fn running_ids(running: &[Instance]) -> Vec<&str> {
    running.iter().map(|i| i.id.as_str()).collect()
}

/// Wait until each of the instances `ids` holds one account.
async fn one_account_each(store: &Store, ids: &[&str]) {
    eventually(WAIT, "each instance to hold one account", || async {
        let held = holders(store).await;
        ids.iter()
            .all(|id| held.iter().filter(|(by, _)| by == id).count() == 1)
            .then_some(())
    })
    .await;
}

/// The fakes, three instances on one database, and a store handle on it.
struct Cluster {
    slack: FakeSlack,
    model: FakeOpenAi,
    instances: Instances,
    store: Store,
    running: Vec<Instance>,
}

impl Cluster {
    /// On a fresh database of the shared server.
    async fn start() -> Cluster {
        Cluster::start_on(database().await).await
    }

    /// On the database at `url`.
    async fn start_on(url: String) -> Cluster {
        let slack = FakeSlack::start().await;
        for app in APPS {
            slack.app(app, &format!("U_{}", app.to_uppercase()));
        }
        let model = FakeOpenAi::start().await;
        model.answer_after(MODEL_TIME);
        let backend = format!(
            "backend = \"openai\"\nmodel = \"{{bot}}\"\nbase_url = \"{}\"",
            model.base_url
        );
        // Every message goes to one chat per bot: no "busy" here.
        let lanes = format!("\n[lanes]\nmax_queued_per_session = {MESSAGES}\n");
        let instances = Instances::on(url, &slack, &APPS, &backend, &lanes);
        let store = instances.store().await;
        let mut running = Vec::new();
        for id in INSTANCES {
            running.push(instances.start(id).await);
        }
        Cluster {
            slack,
            model,
            instances,
            store,
            running,
        }
    }
}

/// Deliver the [`MESSAGES`], one every [`PACE`], alternating between the accounts.
fn feed(slack: &FakeSlack) -> tokio::task::JoinHandle<()> {
    let slack = slack.clone();
    tokio::spawn(async move {
        for n in 0..MESSAGES {
            slack.deliver(app_of(n), &envelope(n), mention(app_of(n), n));
            tokio::time::sleep(PACE).await; // Slack's pace, not a synchronisation
        }
    })
}

/// Once every message is acknowledged and answered or failed on record: none answered twice,
/// none lost without a record. Returns how many were answered.
async fn every_message_answered_once_or_failed(
    store: &Store,
    slack: &FakeSlack,
    running: &[Instance],
    seed: u64,
) -> usize {
    let logs = |running: &[Instance]| -> String {
        running
            .iter()
            .map(|i| format!("--- {} ---\n{}", i.id, i.process.logs()))
            .collect()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    let open = loop {
        let failed = failed_runs(store).await;
        let acked = (0..MESSAGES).all(|n| slack.acked(&envelope(n)));
        let open: Vec<usize> = (0..MESSAGES)
            .filter(|&n| answers(slack, n) == 0 && !failed.contains(&run_of(n)))
            .collect();
        if (acked && open.is_empty()) || tokio::time::Instant::now() >= deadline {
            break open;
        }
        tokio::time::sleep(crate::support::process::POLL).await;
    };
    assert!(
        open.is_empty(),
        "seed {seed}: neither answered nor recorded as failed: {open:?}\n{}",
        logs(running)
    );
    eventually(WAIT, "the inbox to empty", || async {
        let mut left = 0;
        for app in APPS {
            left += store
                .inbox_left(&format!("slack:{app}"))
                .await
                .unwrap()
                .len();
        }
        (left == 0).then_some(())
    })
    .await;

    let failed = failed_runs(store).await;
    let mut answered = 0;
    for n in 0..MESSAGES {
        let times = answers(slack, n);
        assert!(times <= 1, "seed {seed}: {} answered {times} times", job(n));
        if times == 1 {
            answered += 1;
        } else {
            assert!(
                failed.contains(&run_of(n)),
                "seed {seed}: {} lost without a record",
                job(n)
            );
        }
    }
    answered
}

/// Every account connected by exactly one instance (never two sockets at once), the others on
/// standby.
async fn connected_once_each(store: &Store, slack: &FakeSlack, running: &[Instance], seed: u64) {
    for app in APPS {
        assert_eq!(
            slack.max_open(app),
            1,
            "seed {seed}: two sockets of {app} open at once: {:?}",
            slack.spans(app)
        );
    }
    let held = holders(store).await;
    for app in APPS {
        let by: Vec<&String> = held
            .iter()
            .filter(|(_, account)| *account == format!("slack/{app}"))
            .map(|(id, _)| id)
            .collect();
        assert_eq!(by.len(), 1, "seed {seed}: {app} held by {by:?}");
        eventually(
            WAIT,
            "one instance connected, the others on standby",
            || async {
                let mut states = Vec::new();
                for instance in running {
                    states.push(instance.state_of(app).await);
                }
                states.sort();
                (states == ["connected", "standby", "standby"]).then_some(())
            },
        )
        .await;
        assert!(slack.socket_open(app), "seed {seed}: {app}");
    }
}
