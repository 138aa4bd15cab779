//! Failover with real processes (README "Running several instances"): two `baton run` children
//! on one PostgreSQL database, leases of 3 s, one Slack Socket Mode account on the fake Slack,
//! which offers every event again until a socket acknowledges it.
//!
//! - kill -9 of the instance holding the socket: the other connects within the lease plus a
//!   round plus the reconnect, the events the dead one had not acknowledged are answered once,
//!   and those it had taken but not answered are taken over and answered once;
//! - SIGSTOP of the holder (a network pause): the other takes over; after SIGCONT the paused one
//!   never opens the socket again, and the fake never sees two sockets open at once.
//!
//! Every wait is on a condition with a deadline. Needs PostgreSQL (`tests/support/postgres.rs`).

use std::time::{Duration, Instant};

use crate::support::fake_openai::FakeOpenAi;
use crate::support::fake_slack::FakeSlack;
use crate::support::instances::{Instance, Instances, LEASE_SECONDS, holders, job, mention};
use crate::support::process::{eventually, within};

const APP: &str = "snark";
/// Bounds every wait: well past a failover (3 s lease, 1 s round, the reconnect).
const WAIT: Duration = Duration::from_secs(30);

/// How many of the fake's posts answer message `n`.
fn answers(slack: &FakeSlack, n: usize) -> usize {
    let job = job(n);
    slack
        .posts()
        .iter()
        .filter(|p| p.text.ends_with(&job))
        .count()
}

/// Deliver message `n` to the app through the fake Slack (offered until acknowledged).
fn deliver(slack: &FakeSlack, n: usize) {
    slack.deliver(APP, &format!("env-{n}"), mention(APP, n));
}

/// Both instances are up and have done a lease round: one holds the account and has connected
/// it, the other stands by. Returns (holder, the other).
async fn one_connected(slack: &FakeSlack, a: Instance, b: Instance) -> (Instance, Instance) {
    slack.wait_connected(APP, 1).await;
    let states = eventually(WAIT, "one connected, one on standby", || async {
        let states = (a.state_of(APP).await, b.state_of(APP).await);
        let settled = matches!(
            (states.0.as_str(), states.1.as_str()),
            ("connected", "standby") | ("standby", "connected")
        );
        settled.then_some(states)
    })
    .await;
    assert_eq!(slack.connects(APP), 1, "only the holder opened the socket");
    if states.0 == "connected" {
        (a, b)
    } else {
        (b, a)
    }
}

/// Every delivered message acknowledged and answered, and nothing left in the inbox (so no run
/// can still post).
async fn settled(slack: &FakeSlack, store: &baton::store::Store, messages: &[usize]) {
    eventually(WAIT, "every message acknowledged and answered", || async {
        let acked = messages.iter().all(|n| slack.acked(&format!("env-{n}")));
        let answered = messages.iter().all(|&n| answers(slack, n) > 0);
        (acked && answered).then_some(())
    })
    .await;
    eventually(WAIT, "the inbox to empty", || async {
        let left = store.inbox_left(&format!("slack:{APP}")).await.unwrap();
        left.is_empty().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_of_the_holder_moves_the_socket_and_its_unfinished_work_is_answered_once() {
    let slack = FakeSlack::start().await;
    slack.app(APP, "U_SNARK");
    let model = FakeOpenAi::start().await;
    let backend = format!(
        "backend = \"openai\"\nmodel = \"{{bot}}\"\nbase_url = \"{}\"",
        model.base_url
    );
    let cluster = Instances::new(&slack, &[APP], &backend, "").await;
    let store = cluster.store().await;
    let (a, b) = (
        cluster.start("baton-a").await,
        cluster.start("baton-b").await,
    );
    let (mut holder, other) = one_connected(&slack, a, b).await;

    deliver(&slack, 1);
    eventually(WAIT, "message 1 answered", || async {
        (answers(&slack, 1) == 1).then_some(())
    })
    .await;

    // Message 2's turn is at the model, message 3 waits behind it in the chat's lane: both
    // acknowledged (filed in the inbox as the holder's), neither answered, when it dies.
    model.hold();
    deliver(&slack, 2);
    deliver(&slack, 3);
    eventually(WAIT, "messages 2 and 3 taken, 2 at the model", || async {
        let at_model = model.requests().len() >= 2;
        (at_model && slack.acked("env-2") && slack.acked("env-3")).then_some(())
    })
    .await;
    let killed = Instant::now();
    holder.kill().await;
    model.release();
    // Sent while nobody holds the socket: offered again until the new holder acknowledges it.
    deliver(&slack, 4);

    slack.wait_connected(APP, 2).await;
    let failover = slack.spans().of(APP)[1].opened.duration_since(killed);
    let lease = Duration::from_secs(LEASE_SECONDS);
    println!(
        "failover: {failover:?} from kill -9 to the other instance's socket open \
         (lease_seconds = {LEASE_SECONDS})"
    );
    assert!(
        failover <= lease + lease / 3 + Duration::from_secs(3),
        "the other instance connected {failover:?} after the kill"
    );

    settled(&slack, &store, &[1, 2, 3, 4]).await;
    for n in 1..=4 {
        assert_eq!(
            answers(&slack, n),
            1,
            "{} answered {} times: {:?}",
            job(n),
            answers(&slack, n),
            slack.posts()
        );
    }
    let asked: Vec<String> = model
        .requests()
        .iter()
        .map(|r| r.to_string())
        .filter(|r| r.contains(&job(2)) && !r.contains(&job(3)))
        .collect();
    assert!(
        asked.len() >= 2,
        "message 2 ran on the dead instance and again on the new holder: {asked:?}"
    );
    assert_eq!(slack.spans().max_open(APP), 1, "never two sockets at once");
    assert_eq!(
        holders(&store).await,
        [(other.id.clone(), format!("slack/{APP}"))]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holder_loses_the_socket_and_never_uses_it_again_after_it_wakes() {
    let slack = FakeSlack::start().await;
    slack.app(APP, "U_SNARK");
    // Slack closes a connection that stops answering its pings; a paused process answers none.
    slack.drop_silent_sockets(Duration::from_secs(1));
    let cluster = Instances::new(&slack, &[APP], "", "").await;
    let store = cluster.store().await;
    let (a, b) = (
        cluster.start("baton-a").await,
        cluster.start("baton-b").await,
    );
    let (holder, other) = one_connected(&slack, a, b).await;
    deliver(&slack, 1);
    eventually(WAIT, "message 1 answered", || async {
        (answers(&slack, 1) == 1).then_some(())
    })
    .await;

    holder.process.pause();
    deliver(&slack, 2);
    slack.wait_connected(APP, 2).await;
    let answered = within(WAIT, || async { (answers(&slack, 2) == 1).then_some(()) }).await;
    // It failed once in CI (and never in 18 runs alone): the logs say which side stalled.
    assert!(
        answered.is_some(),
        "message 2 not answered by the new holder within {WAIT:?}; connects {:?}\n\
         --- {} (paused) ---\n{}\n--- {} ---\n{}",
        slack.spans().of(APP),
        holder.id,
        holder.process.logs(),
        other.id,
        other.process.logs()
    );
    assert_eq!(
        holders(&store).await,
        [(other.id.clone(), format!("slack/{APP}"))]
    );

    // Awake again: its lease ran out while it slept, so it drops what it had and stands by.
    holder.process.resume();
    eventually(WAIT, "the woken instance on standby", || async {
        (holder.state_of(APP).await == "standby").then_some(())
    })
    .await;
    deliver(&slack, 3);
    deliver(&slack, 4);
    settled(&slack, &store, &[1, 2, 3, 4]).await;

    assert_eq!(
        slack.connects(APP),
        2,
        "the woken instance opened the socket again: {:?}",
        slack.spans().of(APP)
    );
    assert_eq!(
        slack.spans().max_open(APP),
        1,
        "two sockets open at once: {:?}",
        slack.spans().of(APP)
    );
    let spans = slack.spans().of(APP);
    let first_closed = spans[0].closed.expect("the paused one's socket was closed");
    assert!(first_closed <= spans[1].opened, "{spans:?}");
    for n in 1..=4 {
        assert_eq!(answers(&slack, n), 1, "{}: {:?}", job(n), slack.posts());
    }
    assert_eq!(
        holders(&store).await,
        [(other.id.clone(), format!("slack/{APP}"))]
    );
}
