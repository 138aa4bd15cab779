//! The kill -9 fault test of `tests/it/faults.rs`, against three instances (README "Running
//! several instances"): three `baton run` children on one PostgreSQL database, three Slack Socket
//! Mode accounts on the fake Slack, which offers every event again until a socket acknowledges
//! it, three Discord gateway accounts on the fake Discord and three Feishu long-connection
//! accounts on the fake Feishu, which (like Discord's gateway) do not, a Slack Events API
//! account that every instance serves (the fake Slack posts each event to one instance, and
//! again to another while a post fails, as Slack retries), and a model that takes a while over
//! each answer. While messages keep coming, each round kills a random instance with SIGKILL at a
//! random moment and starts it again (under its id, once its registration has run out); the
//! middle round restarts PostgreSQL instead (`pg_ctl restart -m fast`, on a server of the test's
//! own), under the test's own store handle too, which reads and writes on after it. At the end:
//! every message answered at most once, none lost without a record (answered, or a failure in
//! the transcript), every socket account connected by exactly one instance, and never two
//! sockets open for one account at any moment. A Discord or Feishu message the fake handed to no socket,
//! or to one whose process was killed before baton filed it, never reached baton: it is counted
//! apart (the platform's loss, not baton's), and told from a lost one by baton's claim of its id.
//!
//! The instance and the moment of each kill come from a seeded RNG; the seed is printed so a
//! failure can be replayed (`BATON_FAULT_SEED`). Waits poll for a state with a deadline.
//!
//! A rolling restart (SIGTERM each instance in turn, start a new one in its place, let the
//! accounts spread again) under the same traffic answers every message exactly once or records
//! its failure, and leaves no socket account (Slack, Discord, Feishu) without a socket for longer
//! than `lease_seconds`.

use std::collections::BTreeSet;
use std::time::Duration;

use baton::store::{Claim, EntryKind, Store, Unfinished};
use rand::Rng;

use crate::support::fake_discord::FakeDiscord;
use crate::support::fake_feishu::{FakeFeishu, Target, message_event};
use crate::support::fake_openai::FakeOpenAi;
use crate::support::fake_slack::{FakeSlack, Pool};
use crate::support::instances::{
    Instance, Instances, LEASE_SECONDS, holders, job, mention, mention_in,
};
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
/// The Slack Events API account every instance serves, and the channel its messages are in.
const HOOK: &str = "hook";
const HOOK_CHANNEL: &str = "C2";
/// The signing secret of [`HOOK`]'s requests.
const HOOK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
/// How many socket accounts the instances share (Slack, Discord, Feishu).
const SOCKET_ACCOUNTS: usize = APPS.len() + DISCORD_BOTS.len() + FEISHU_BOTS.len();
/// How many instances share the database.
const INSTANCES: [&str; 3] = ["baton-a", "baton-b", "baton-c"];
/// How many rounds: an instance is killed in each, but for the middle one, which restarts
/// PostgreSQL.
const ROUNDS: usize = 7;
/// How many messages the fake Slack delivers over the run, alternating between the accounts,
/// one every [`PACE`], so the kills land mid-stream; with the other platforms, a Discord and a
/// Feishu message in turn between them, and a webhook message with each Discord one.
const MESSAGES: usize = 120;
const PACE: Duration = Duration::from_millis(200);
/// How long the model takes over each answer: kills land in turns under way too.
const MODEL_TIME: Duration = Duration::from_millis(150);
/// Bounds each wait: a failover, the redeliveries, the reruns.
const WAIT: Duration = Duration::from_secs(60);
/// Bounds the wait for the inbox to empty while its rows keep being worked.
const DRAIN: Duration = Duration::from_secs(180);

/// Held by each test of this module while it runs: each starts three instances under traffic
/// on four platforms and times leases of 3 s, which two such clusters side by side on a small
/// machine (CI has 2 cores) starve of CPU.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The account message `n` goes to.
fn app_of(n: usize) -> &'static str {
    APPS[n % APPS.len()]
}

fn envelope(n: usize) -> String {
    format!("env-{n}")
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
    /// Whether the platform offers an event again until it is acknowledged (Slack, on a socket
    /// or a webhook's 200). When not (Discord, Feishu), a message handed to a socket that died
    /// before baton filed it is gone.
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

/// `count` Slack messages (message `n` to `app(n)` in `channel`, as [`mention_in`] makes it),
/// each answered by its app's posts: the [`MESSAGES`] to the socket accounts in C1, or the
/// webhook account's in [`HOOK_CHANNEL`].
fn slack_messages<'a>(
    name: &'static str,
    slack: &'a FakeSlack,
    count: usize,
    app: fn(usize) -> &'static str,
    channel: &'static str,
) -> Platform<'a> {
    let sent = (0..count)
        .map(|n| Sent {
            what: job(n),
            run: format!("in:slack:{}:{channel}:1700000000.{n:06}", app(n)),
            scope: format!("slack:{}", app(n)),
            key: format!("msg:{channel}:1700000000.{n:06}"),
        })
        .collect();
    Platform {
        name,
        sent,
        answers: Box::new(move |n| {
            let (token, job) = (format!("xoxb-{}", app(n)), job(n));
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

/// The event id of webhook message `m`, as [`mention_in`] makes it.
fn hook_event(m: usize) -> String {
    format!("Ev{HOOK}{m}")
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
    let _alone = ONE_CLUSTER_AT_A_TIME.lock().await;
    let (seed, mut rng) = fault_rng();

    let (server, url) = own_server("chaos").await;
    let mut cluster = Cluster::start(url).await;
    let feeder = cluster.feed();
    for round in 0..ROUNDS {
        let after = Duration::from_millis(rng.random_range(0..2000));
        tokio::time::sleep(after).await; // the fault's timing, not a synchronisation
        if round == ROUNDS / 2 {
            println!("round {round}: pg_ctl restart -m fast after {after:?}");
            server.restart().await;
            continue;
        }
        let victim = rng.random_range(0..cluster.running.len());
        let id = cluster.running[victim].id.clone();
        println!("round {round}: kill -9 {id} after {after:?}");
        cluster.running[victim].kill().await;
        registration_ran_out(&cluster.store, &id).await;
        cluster.replace(victim, &id).await;
    }
    let said = feeder.await.unwrap();

    let tallies = cluster.account(&said, seed).await;
    let sends: u32 = cluster
        .slack
        .sends()
        .iter()
        .map(|s| s.saturating_sub(1))
        .sum();
    println!(
        "{} kills of 3 instances and a PostgreSQL restart, {sends} Slack redeliveries, {} webhook \
         posts for {} events, {} turns begun",
        ROUNDS - 1,
        cluster.slack.event_posts(),
        MESSAGES / 2,
        cluster.model.requests().len(),
    );
    for (platform, tally) in tallies {
        println!("{platform}: {tally:?}, 0 lost, 0 doubled");
    }
}

/// SIGTERM each instance in turn while messages keep coming, start a new one (a new id) in its
/// place, and wait for the accounts to spread over the three again before the next. Every message is
/// answered exactly once or failed on record, and no socket account, on any platform, is without
/// a socket for longer than a lease: from one socket's close to the next one's open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_leaves_no_account_unconnected_longer_than_a_lease() {
    let _alone = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = Cluster::start(database().await).await;
    share_each(&cluster.store, &INSTANCES).await;
    let feeder = cluster.feed();
    for at in 0..cluster.running.len() {
        let old = &mut cluster.running[at];
        println!("SIGTERM {}", old.id);
        old.process.terminate();
        old.process.wait(EXIT_DEADLINE).await;
        // A new process under a new id, as a replaced pod or the default id (host and pid) has.
        let id = format!("{}-2", old.id);
        cluster.replace(at, &id).await;
        share_each(&cluster.store, &running_ids(&cluster.running)).await;
    }
    let said = feeder.await.unwrap();

    let tallies = cluster.account(&said, 0).await;
    let lease = Duration::from_secs(LEASE_SECONDS);
    let (slack, discord, feishu) = (
        cluster.slack.spans(),
        cluster.sockets.discord.spans(),
        cluster.sockets.feishu.spans(),
    );
    let accounts = APPS
        .iter()
        .map(|app| (format!("slack/{app}"), &slack, *app))
        .chain(
            DISCORD_BOTS
                .iter()
                .map(|(bot, user)| (format!("discord/{bot}"), &discord, *user)),
        )
        .chain(
            FEISHU_BOTS
                .iter()
                .map(|bot| (format!("feishu/{bot}"), &feishu, *bot)),
        );
    for (account, spans, name) in accounts {
        let longest = spans.longest_gap(name);
        assert!(
            longest <= lease,
            "{account} had no socket for {longest:?}, longer than the lease ({lease:?}): {:?}",
            spans.of(name)
        );
        println!(
            "{account}: {} sockets, longest without one {longest:?}",
            spans.of(name).len()
        );
    }
    for (platform, tally) in tallies {
        println!("{platform} over a rolling restart: {tally:?}, 0 lost, 0 doubled");
    }
}

/// The ids of `running`.
fn running_ids(running: &[Instance]) -> Vec<&str> {
    running.iter().map(|i| i.id.as_str()).collect()
}

/// Wait until each of the instances `ids` holds its share of the socket accounts (as many as
/// every other).
async fn share_each(store: &Store, ids: &[&str]) {
    let share = SOCKET_ACCOUNTS / ids.len();
    eventually(
        WAIT,
        "each instance to hold its share of the accounts",
        || async {
            let held = holders(store).await;
            ids.iter()
                .all(|id| held.iter().filter(|(by, _)| by == id).count() == share)
                .then_some(())
        },
    )
    .await;
}

/// The fakes, three instances on one database, and a store handle on it.
struct Cluster {
    slack: FakeSlack,
    sockets: Sockets,
    /// The instances serving the webhook account: the running ones.
    pool: Pool,
    model: FakeOpenAi,
    instances: Instances,
    store: Store,
    running: Vec<Instance>,
}

impl Cluster {
    /// On the database at `url`: the Slack socket accounts [`APPS`], the webhook account
    /// [`HOOK`], the Discord [`DISCORD_BOTS`] and the Feishu [`FEISHU_BOTS`], on [`INSTANCES`].
    async fn start(url: String) -> Cluster {
        let slack = FakeSlack::start().await;
        for app in APPS.iter().chain([&HOOK]) {
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
        let (discord, feishu) = (FakeDiscord::start().await, FakeFeishu::start().await);
        let instances = Instances::on(url, &slack, &APPS, &backend, &lanes)
            .with_slack_events(&slack, &[HOOK], &backend, HOOK_SECRET)
            .with_discord(&discord, &DISCORD_BOTS, &backend)
            .with_feishu(&feishu, &FEISHU_BOTS, &backend);
        let store = instances.store().await;
        let mut running = Vec::new();
        for id in INSTANCES {
            running.push(instances.start(id).await);
        }
        let pool = Pool::default();
        pool.set(running.iter().map(|i| i.base.clone()).collect());
        Cluster {
            slack,
            sockets: Sockets { discord, feishu },
            pool,
            model,
            instances,
            store,
            running,
        }
    }

    /// Start instance `id` in place of `running[at]` (stopped), and post webhooks to it from
    /// now on instead.
    async fn replace(&mut self, at: usize, id: &str) {
        self.running[at] = self.instances.start(id).await;
        self.pool
            .set(self.running.iter().map(|i| i.base.clone()).collect());
    }

    /// Deliver the [`MESSAGES`], one every [`PACE`], alternating between the Slack socket
    /// accounts, with a mention on Discord and one to the webhook account after each even one
    /// and one on Feishu after each odd one, each from a person of its own (no per-sender rate
    /// limit in the way). Returns the Discord messages' ids: message `m` mentions
    /// `DISCORD_BOTS[m % 3]`.
    fn feed(&self) -> tokio::task::JoinHandle<Vec<String>> {
        let (slack, sockets, pool) = (self.slack.clone(), self.sockets.clone(), self.pool.clone());
        let hook_path = format!("/hooks/slack/{HOOK}");
        tokio::spawn(async move {
            let mut said = Vec::new();
            for n in 0..MESSAGES {
                slack.deliver(app_of(n), &envelope(n), mention(app_of(n), n));
                let (m, person) = (n / 2, format!("person-{n}"));
                if n % 2 == 0 {
                    let (_, user) = DISCORD_BOTS[m % DISCORD_BOTS.len()];
                    let person = (200_000_000_000_000_000u64 + m as u64).to_string();
                    let text = format!("<@{user}> {}", job(m));
                    said.push(
                        sockets
                            .discord
                            .say((&person, "person"), CHANNEL, &text, None),
                    );
                    let body = mention_in(HOOK_CHANNEL, HOOK, m);
                    slack.post_event(&pool, &hook_path, HOOK_SECRET, &hook_event(m), &body);
                } else {
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
                    sockets.feishu.offer_event(bot, &event);
                }
                tokio::time::sleep(PACE).await; // the platforms' pace, not a synchronisation
            }
            said
        })
    }

    /// Once every Slack event (socket and webhook) is acknowledged, accounts for every message
    /// sent ([`account`], `said`: the Discord messages' ids) and checks every account is
    /// connected once ([`connected_once_each`]); each platform's [`Tally`].
    async fn account(&self, said: &[String], seed: u64) -> Vec<(&'static str, Tally)> {
        let platforms = [
            slack_messages("slack", &self.slack, MESSAGES, app_of, "C1"),
            slack_messages(
                "slack webhook",
                &self.slack,
                MESSAGES / 2,
                |_| HOOK,
                HOOK_CHANNEL,
            ),
            discord_messages(&self.sockets.discord, said),
            feishu_messages(&self.sockets.feishu, MESSAGES / 2),
        ];
        let acked = || {
            (0..MESSAGES).all(|n| self.slack.acked(&envelope(n)))
                && (0..MESSAGES / 2).all(|m| self.slack.acked(&hook_event(m)))
        };
        let tallies = account(&self.store, &platforms, acked, &self.running, seed).await;
        connected_once_each(&self.store, self, seed).await;
        platforms.iter().map(|p| p.name).zip(tallies).collect()
    }
}

/// The fakes of the socket accounts beside Slack's.
#[derive(Clone)]
struct Sockets {
    discord: FakeDiscord,
    feishu: FakeFeishu,
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
    inbox_drained(store, &scopes, running, seed).await;

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

/// The inbox rows of `scopes`, each with its scope: what the instances still have to run.
async fn inbox_rows<'a>(store: &Store, scopes: &BTreeSet<&'a str>) -> Vec<(&'a str, Unfinished)> {
    let mut rows = Vec::new();
    for scope in scopes {
        for row in store.inbox_left(scope).await.unwrap() {
            rows.push((*scope, row));
        }
    }
    rows
}

/// Wait until the inbox of `scopes` is empty. Its rows are worked by the instances (run, taken
/// over from a killed one, run again after the PostgreSQL restart), which a loaded machine
/// slows: the wait lasts as long as the rows keep changing (one taken out, taken over, run
/// again), until [`WAIT`] passes with no change at all, or [`DRAIN`] in all. On a timeout it
/// says what was left, who owned it, and which instances were alive (renewing their
/// registration) then.
async fn inbox_drained(store: &Store, scopes: &BTreeSet<&str>, running: &[Instance], seed: u64) {
    let began = tokio::time::Instant::now();
    let (mut seen, mut changed) = (Vec::new(), began);
    let rows = loop {
        let rows = inbox_rows(store, scopes).await;
        if rows.is_empty() {
            return;
        }
        let now = tokio::time::Instant::now();
        let state: Vec<(i64, String, u32)> = rows
            .iter()
            .map(|(_, r)| (r.id.0, r.owner.clone(), r.attempts))
            .collect();
        if state != seen {
            (seen, changed) = (state, now);
        }
        if now - changed >= WAIT || now - began >= DRAIN {
            break rows;
        }
        tokio::time::sleep(crate::support::process::POLL * 4).await;
    };
    let status = store.cluster_status().await.unwrap();
    let left: Vec<String> = rows
        .iter()
        .map(|(scope, row)| {
            let event = row
                .event()
                .map_or_else(|e| e.to_string(), |e| e.message_id.to_string());
            format!(
                "#{} {scope} {event}: owner {:?}, filed {} ms ago, attempts {}",
                row.id.0,
                row.owner,
                status.now_ms - row.accepted_ms,
                row.attempts
            )
        })
        .collect();
    let registered: Vec<String> = status
        .instances
        .iter()
        .map(|i| {
            let held: Vec<String> = i
                .accounts
                .iter()
                .map(|a| format!("{}/{}", a.platform, a.account))
                .collect();
            let ago = status.now_ms - i.renewed_ms;
            format!("{} renewed {ago} ms ago, holds {held:?}", i.id)
        })
        .collect();
    let pids: Vec<String> = running
        .iter()
        .map(|i| format!("{} (pid {})", i.id, i.process.pid))
        .collect();
    panic!(
        "seed {seed}: the inbox did not empty ({:?} waited, {:?} since its rows last changed); \
         {} rows left:\n{}\nrunning: {pids:?}\nregistrations (database clock):\n{}\n{}",
        began.elapsed(),
        changed.elapsed(),
        left.len(),
        left.join("\n"),
        registered.join("\n"),
        running
            .iter()
            .map(|i| format!("--- {} ---\n{}", i.id, i.process.logs()))
            .collect::<String>()
    );
}

/// Whether baton claimed `sent`'s id (it received it), asked by claiming it: only once every
/// message is settled, as a claim now would turn a later delivery away.
async fn claimed(store: &Store, sent: &Sent) -> bool {
    let now = baton::timing::now_ms();
    store.claim(&sent.scope, &sent.key, now).await.unwrap() == Claim::Duplicate
}

/// Every socket account connected by exactly one instance, the others on standby; never two
/// sockets of one account open at once.
async fn connected_once_each(store: &Store, cluster: &Cluster, seed: u64) {
    let Sockets { discord, feishu } = &cluster.sockets;
    let (slack_spans, discord_spans, feishu_spans) =
        (cluster.slack.spans(), discord.spans(), feishu.spans());
    let mut accounts = Vec::new();
    for app in APPS {
        accounts.push((format!("slack/{app}"), app, &slack_spans, app));
        eventually(WAIT, "the Slack app connected", || async {
            cluster.slack.socket_open(app).then_some(())
        })
        .await;
    }
    for (bot, user) in DISCORD_BOTS {
        accounts.push((format!("discord/{bot}"), bot, &discord_spans, user));
        eventually(WAIT, "the Discord bot connected", || async {
            discord.connected(user).then_some(())
        })
        .await;
    }
    for bot in FEISHU_BOTS {
        accounts.push((format!("feishu/{bot}"), bot, &feishu_spans, bot));
        eventually(WAIT, "the Feishu app connected", || async {
            feishu.socket_open(bot).then_some(())
        })
        .await;
    }
    let held = holders(store).await;
    for (account, name, spans, on_platform) in &accounts {
        assert_eq!(
            spans.max_open(on_platform),
            1,
            "seed {seed}: two sockets of {account} open at once: {:?}",
            spans.of(on_platform)
        );
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
                for instance in &cluster.running {
                    states.push(instance.state_of(name).await);
                }
                states.sort();
                (states == ["connected", "standby", "standby"]).then_some(())
            },
        )
        .await;
    }
}
