//! The kill -9 fault test of `tests/it/faults.rs`, against three instances (README "Running
//! several instances"): three `baton run` children on one PostgreSQL database, three Slack Socket
//! Mode accounts on the fake Slack, which offers every event again until a socket acknowledges
//! it, three Discord gateway accounts on the fake Discord and three Feishu long-connection
//! accounts on the fake Feishu, which (like Discord's gateway) do not, and a model that takes a
//! while over each answer. While messages keep coming, each round
//! kills a random instance with SIGKILL at a random moment and starts it again (under its id,
//! once its registration has run out); the middle round restarts PostgreSQL instead
//! (`pg_ctl restart -m fast`, on a server of the test's own). At the end:
//! every message answered at most once, none lost without a record (answered, or a failure in
//! the transcript), every account connected by exactly one instance, and never two Slack sockets
//! open for one account at any moment. A Discord or Feishu message the fake handed to no socket,
//! or to one whose process was killed before baton filed it, never reached baton: it is counted
//! apart (the platform's loss, not baton's), and told from a lost one by baton's claim of its id.
//!
//! The instance and the moment of each kill come from a seeded RNG; the seed is printed so a
//! failure can be replayed (`BATON_FAULT_SEED`). Waits poll for a state with a deadline.
//!
//! A rolling restart (SIGTERM each instance in turn, start a new one in its place, let the
//! accounts spread again) under the same traffic answers every message exactly once and leaves no account
//! without a socket for longer than `lease_seconds`.

use std::collections::BTreeSet;
use std::time::Duration;

use baton::store::{Claim, EntryKind, Store};
use rand::Rng;

use crate::support::fake_discord::FakeDiscord;
use crate::support::fake_feishu::{FakeFeishu, Target, message_event};
use crate::support::fake_openai::FakeOpenAi;
use crate::support::fake_slack::FakeSlack;
use crate::support::instances::{Instance, Instances, LEASE_SECONDS, holders, job, mention};
use crate::support::postgres::{database, own_server};
use crate::support::process::{EXIT_DEADLINE, eventually, fault_rng};

/// The accounts, one bot each: one per instance once they spread.
const APPS: [&str; 3] = ["snark", "caid", "sec"];
/// The Discord accounts of the chaos test, one bot each: `(bot, application id)`.
const DISCORD_BOTS: [(&str, &str); 3] = [
    ("dsnark", "100000000000000001"),
    ("dcaid", "100000000000000002"),
    ("dsec", "100000000000000003"),
];
/// The Discord channel the messages are said in.
const CHANNEL: &str = "300000000000000001";
/// The Feishu accounts of the chaos test, one bot (and app) each.
const FEISHU_BOTS: [&str; 3] = ["fsnark", "fcaid", "fsec"];
/// How many instances share the database.
const INSTANCES: [&str; 3] = ["baton-a", "baton-b", "baton-c"];
/// How many rounds: an instance is killed in each, but for the middle one, which restarts
/// PostgreSQL.
const ROUNDS: usize = 7;
/// How many messages the fake Slack delivers over the run, alternating between the accounts,
/// one every [`PACE`], so the kills land mid-stream; with the other platforms, a Discord and a
/// Feishu message in turn between them.
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

/// One message the test sent, as the accounting finds it.
struct Sent {
    /// `job N`.
    what: String,
    /// The run id of its answer.
    run: String,
    /// The dedupe scope and key baton claims it under when it receives it.
    scope: String,
    key: String,
}

/// The messages sent on one platform, and how to find their answers.
struct Platform<'a> {
    name: &'static str,
    sent: Vec<Sent>,
    /// How many times message `i` of `sent` was answered, by its own bot.
    answers: Box<dyn Fn(usize) -> usize + 'a>,
    /// Whether the platform offers an event again until a socket acknowledges it (Slack). When
    /// not (Discord), a message handed to a socket that died before baton filed it is gone.
    redelivers: bool,
}

/// What became of one platform's messages. Lost and doubled are none: the accounting fails.
#[derive(Debug, Default)]
struct Tally {
    answered: usize,
    failed: usize,
    /// Handed to no socket or to one that died first: baton never had it (no claim of its id).
    never_received: usize,
}

/// The [`MESSAGES`] on the fake Slack, each answered by its app's posts.
fn slack_messages(slack: &FakeSlack) -> Platform<'_> {
    let sent = (0..MESSAGES)
        .map(|n| Sent {
            what: job(n),
            run: run_of(n),
            scope: format!("slack:{}", app_of(n)),
            key: format!("msg:C1:1700000000.{n:06}"),
        })
        .collect();
    Platform {
        name: "slack",
        sent,
        answers: Box::new(move |n| {
            let (token, job) = (format!("xoxb-{}", app_of(n)), job(n));
            slack
                .posts()
                .iter()
                .filter(|p| p.token == token && p.text.ends_with(&job))
                .count()
        }),
        redelivers: true,
    }
}

/// The Discord messages `said` (their ids, message `m` to `DISCORD_BOTS[m % 3]`), each answered
/// by a post of its bot replying to it.
fn discord_messages<'a>(discord: &'a FakeDiscord, said: &[String]) -> Platform<'a> {
    let bot_of = |m: usize| DISCORD_BOTS[m % DISCORD_BOTS.len()].0;
    let sent = said
        .iter()
        .enumerate()
        .map(|(m, id)| Sent {
            what: job(m),
            run: format!("in:discord:{}:{id}", bot_of(m)),
            scope: format!("discord:{}", bot_of(m)),
            key: format!("msg:{id}"),
        })
        .collect();
    let said = said.to_vec();
    Platform {
        name: "discord",
        sent,
        answers: Box::new(move |m| {
            let token = format!("token-{}", bot_of(m));
            discord
                .posts()
                .iter()
                .filter(|p| p.token == token && p.replies_to() == Some(said[m].as_str()))
                .count()
        }),
        redelivers: false,
    }
}

/// The `count` Feishu messages (`om_chaos_<m>`, message `m` to `FEISHU_BOTS[m % 3]`), each
/// answered by a reply of its bot's app.
fn feishu_messages(feishu: &FakeFeishu, count: usize) -> Platform<'_> {
    let bot_of = |m: usize| FEISHU_BOTS[m % FEISHU_BOTS.len()];
    let sent = (0..count)
        .map(|m| Sent {
            what: job(m),
            run: format!("in:feishu:{}:{}", bot_of(m), feishu_id(m)),
            scope: format!("feishu:{}", bot_of(m)),
            key: format!("msg:{}", feishu_id(m)),
        })
        .collect();
    Platform {
        name: "feishu",
        sent,
        answers: Box::new(move |m| {
            let replied = Target::Reply(feishu_id(m));
            feishu
                .posts()
                .iter()
                .filter(|p| p.app == bot_of(m) && p.target == replied)
                .count()
        }),
        redelivers: false,
    }
}

/// The message id of Feishu message `m`.
fn feishu_id(m: usize) -> String {
    format!("om_chaos_{m}")
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
        sockets,
        model,
        instances: cluster,
        mut store,
        mut running,
    } = Cluster::start_on(url, true).await;
    let sockets = sockets.expect("the chaos cluster has Discord and Feishu accounts");
    let feeder = feed(&slack, Some(&sockets));
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
    let said = feeder.await.unwrap();

    let platforms = [
        slack_messages(&slack),
        discord_messages(&sockets.discord, &said),
        feishu_messages(&sockets.feishu, MESSAGES / 2),
    ];
    let acked = || (0..MESSAGES).all(|n| slack.acked(&envelope(n)));
    let tallies = account(&store, &platforms, acked, &running, seed).await;
    connected_once_each(&store, &slack, Some(&sockets), &running, seed).await;
    let sends: u32 = slack.sends().iter().map(|s| s.saturating_sub(1)).sum();
    println!(
        "{} kills of 3 instances and a PostgreSQL restart, {sends} Slack redeliveries, {} turns \
         begun",
        ROUNDS - 1,
        model.requests().len(),
    );
    for (platform, tally) in platforms.iter().zip(&tallies) {
        println!(
            "{}: {} messages, {tally:?}, 0 lost, 0 doubled",
            platform.name,
            platform.sent.len()
        );
    }
}

/// SIGTERM each instance in turn while messages keep coming, start a new one (a new id) in its
/// place, and wait for the accounts to spread over the three again before the next. Every message is
/// answered exactly once or failed on record, and no account is without a socket for longer
/// than a lease: from one socket's close to the next one's open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_leaves_no_account_unconnected_longer_than_a_lease() {
    let Cluster {
        slack,
        sockets: _,
        model: _model,
        instances,
        store,
        mut running,
    } = Cluster::start().await;
    one_account_each(&store, &INSTANCES).await;
    let feeder = feed(&slack, None);
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

    let acked = || (0..MESSAGES).all(|n| slack.acked(&envelope(n)));
    let tallies = account(&store, &[slack_messages(&slack)], acked, &running, 0).await;
    connected_once_each(&store, &slack, None, &running, 0).await;
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
    println!("{MESSAGES} messages over a rolling restart: {tallies:?}");
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
    /// With Discord and Feishu accounts, their fakes.
    sockets: Option<Sockets>,
    model: FakeOpenAi,
    instances: Instances,
    store: Store,
    running: Vec<Instance>,
}

impl Cluster {
    /// On a fresh database of the shared server.
    async fn start() -> Cluster {
        Cluster::start_on(database().await, false).await
    }

    /// On the database at `url`, with the [`DISCORD_BOTS`] and [`FEISHU_BOTS`] too when
    /// `with_sockets`.
    async fn start_on(url: String, with_sockets: bool) -> Cluster {
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
        let mut instances = Instances::on(url, &slack, &APPS, &backend, &lanes);
        let sockets = if with_sockets {
            let (discord, feishu) = (FakeDiscord::start().await, FakeFeishu::start().await);
            instances = instances
                .with_discord(&discord, &DISCORD_BOTS, &backend)
                .with_feishu(&feishu, &FEISHU_BOTS, &backend);
            Some(Sockets { discord, feishu })
        } else {
            None
        };
        let store = instances.store().await;
        let mut running = Vec::new();
        for id in INSTANCES {
            running.push(instances.start(id).await);
        }
        Cluster {
            slack,
            sockets,
            model,
            instances,
            store,
            running,
        }
    }
}

/// The fakes of the socket accounts beside Slack's.
#[derive(Clone)]
struct Sockets {
    discord: FakeDiscord,
    feishu: FakeFeishu,
}

/// Deliver the [`MESSAGES`], one every [`PACE`], alternating between the accounts, and with
/// `sockets` a mention on Discord after each even one and on Feishu after each odd one, each
/// from a person of its own (no per-sender rate limit in the way). Returns the Discord
/// messages' ids: message `m` mentions `DISCORD_BOTS[m % 3]`.
fn feed(slack: &FakeSlack, sockets: Option<&Sockets>) -> tokio::task::JoinHandle<Vec<String>> {
    let (slack, sockets) = (slack.clone(), sockets.cloned());
    tokio::spawn(async move {
        let mut said = Vec::new();
        for n in 0..MESSAGES {
            slack.deliver(app_of(n), &envelope(n), mention(app_of(n), n));
            let (m, person) = (n / 2, format!("person-{n}"));
            match &sockets {
                Some(s) if n % 2 == 0 => {
                    let (_, user) = DISCORD_BOTS[m % DISCORD_BOTS.len()];
                    let person = (200_000_000_000_000_000u64 + m as u64).to_string();
                    let text = format!("<@{user}> {}", job(m));
                    said.push(s.discord.say((&person, "person"), CHANNEL, &text, None));
                }
                Some(s) => {
                    let bot = FEISHU_BOTS[m % FEISHU_BOTS.len()];
                    let event = message_event(
                        bot,
                        &format!("ev_chaos_{m}"),
                        &feishu_id(m),
                        ("oc_chaos", "group"),
                        &format!("ou_{person}"),
                        &format!("@_user_1 {}", job(m)),
                        &[(&format!("ou_{bot}_self"), bot)],
                    );
                    // A message offered while no socket is open never reaches baton.
                    s.feishu.offer_event(bot, &event);
                }
                None => {}
            }
            tokio::time::sleep(PACE).await; // the platforms' pace, not a synchronisation
        }
        said
    })
}

/// Once `acked` holds (every Slack message acknowledged), every message of a redelivering
/// platform is answered or failed on record, and the inbox is empty: none answered twice, none
/// lost without a record. A message of a platform that does not redeliver and that baton never
/// claimed is counted as never received. Returns each platform's [`Tally`].
async fn account(
    store: &Store,
    platforms: &[Platform<'_>],
    acked: impl Fn() -> bool,
    running: &[Instance],
    seed: u64,
) -> Vec<Tally> {
    let logs = || -> String {
        running
            .iter()
            .map(|i| format!("--- {} ---\n{}", i.id, i.process.logs()))
            .collect()
    };
    let unrecorded = |p: &Platform<'_>, failed: &[String]| -> Vec<String> {
        (0..p.sent.len())
            .filter(|&i| (p.answers)(i) == 0 && !failed.contains(&p.sent[i].run))
            .map(|i| format!("{} {}", p.name, p.sent[i].what))
            .collect()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    let open = loop {
        let failed = failed_runs(store).await;
        let open: Vec<String> = platforms
            .iter()
            .filter(|p| p.redelivers)
            .flat_map(|p| unrecorded(p, &failed))
            .collect();
        if (acked() && open.is_empty()) || tokio::time::Instant::now() >= deadline {
            break open;
        }
        tokio::time::sleep(crate::support::process::POLL).await;
    };
    assert!(
        open.is_empty(),
        "seed {seed}: neither answered nor recorded as failed: {open:?}\n{}",
        logs()
    );
    let scopes: BTreeSet<&str> = platforms
        .iter()
        .flat_map(|p| p.sent.iter().map(|s| s.scope.as_str()))
        .collect();
    eventually(WAIT, "the inbox to empty", || async {
        let mut left = 0;
        for scope in &scopes {
            left += store.inbox_left(scope).await.unwrap().len();
        }
        (left == 0).then_some(())
    })
    .await;

    let failed = failed_runs(store).await;
    let mut tallies = Vec::new();
    for p in platforms {
        let mut tally = Tally::default();
        for (i, sent) in p.sent.iter().enumerate() {
            let times = (p.answers)(i);
            assert!(
                times <= 1,
                "seed {seed}: {} {} answered {times} times",
                p.name,
                sent.what
            );
            if times == 1 {
                tally.answered += 1;
            } else if failed.contains(&sent.run) {
                tally.failed += 1;
            } else if !p.redelivers && !claimed(store, sent).await {
                tally.never_received += 1;
            } else {
                panic!(
                    "seed {seed}: {} {} lost without a record\n{}",
                    p.name,
                    sent.what,
                    logs()
                );
            }
        }
        tallies.push(tally);
    }
    tallies
}

/// Whether baton claimed `sent`'s id (it received it), asked by claiming it: only once every
/// message is settled, as a claim now would turn a later delivery away.
async fn claimed(store: &Store, sent: &Sent) -> bool {
    let now = baton::timing::now_ms();
    store.claim(&sent.scope, &sent.key, now).await.unwrap() == Claim::Duplicate
}

/// Every account connected by exactly one instance, the others on standby; never two Slack
/// sockets of one account open at once.
async fn connected_once_each(
    store: &Store,
    slack: &FakeSlack,
    sockets: Option<&Sockets>,
    running: &[Instance],
    seed: u64,
) {
    for app in APPS {
        assert_eq!(
            slack.max_open(app),
            1,
            "seed {seed}: two sockets of {app} open at once: {:?}",
            slack.spans(app)
        );
    }
    let mut accounts: Vec<(String, &str)> = APPS
        .iter()
        .map(|app| (format!("slack/{app}"), *app))
        .collect();
    if let Some(sockets) = sockets {
        for (bot, user) in DISCORD_BOTS {
            accounts.push((format!("discord/{bot}"), bot));
            eventually(WAIT, "the Discord bot connected", || async {
                sockets.discord.connected(user).then_some(())
            })
            .await;
        }
        for bot in FEISHU_BOTS {
            accounts.push((format!("feishu/{bot}"), bot));
            eventually(WAIT, "the Feishu app connected", || async {
                sockets.feishu.socket_open(bot).then_some(())
            })
            .await;
        }
    }
    let held = holders(store).await;
    for (account, name) in &accounts {
        let by: Vec<&String> = held
            .iter()
            .filter(|(_, held)| held == account)
            .map(|(id, _)| id)
            .collect();
        assert_eq!(by.len(), 1, "seed {seed}: {account} held by {by:?}");
        eventually(
            WAIT,
            "one instance connected, the others on standby",
            || async {
                let mut states = Vec::new();
                for instance in running {
                    states.push(instance.state_of(name).await);
                }
                states.sort();
                (states == ["connected", "standby", "standby"]).then_some(())
            },
        )
        .await;
    }
    for app in APPS {
        assert!(slack.socket_open(app), "seed {seed}: {app}");
    }
}
