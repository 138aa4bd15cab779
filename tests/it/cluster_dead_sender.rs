//! A sender whose instance dies while it waits in `sessions_send` (README "Running several
//! instances", SPEC 10.1): two `baton run` children on one PostgreSQL database, asker's Slack
//! socket account on one and helper's on the other. Asker's turn sends to helper and waits;
//! asker's instance is killed (SIGKILL) while helper works. The survivor takes asker's account
//! and its unfinished event, and helper's outcome reaches asker's session exactly once: pushed
//! to it, or taken by asker's turn run again, never both and never neither.

use std::time::Duration;

use baton::store::{DeliveryQuery, EntryKind, Notify, Store};
use serde_json::json;

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::fake_slack::FakeSlack;
use crate::support::instances::{Instances, holders, mention, until};

/// What helper answers, slowly: long enough for the kill to land while asker waits.
const ANSWER: &str = "slow answer";
const HELPER_TIME: Duration = Duration::from_secs(4);

/// How many times helper's answer reached asker: as a tool result of its send, or pushed to its
/// session (a transcript entry from helper).
async fn reached(model: &FakeOpenAi, store: &Store) -> usize {
    let in_band = model
        .tool_results("asker")
        .iter()
        .filter(|r| r.to_string().contains(ANSWER))
        .count();
    let entries = store.transcript_page(0, usize::MAX).await.unwrap();
    let pushed = entries
        .iter()
        .filter(|e| e.kind == EntryKind::Inbound && e.speaker == "bot:helper")
        .filter(|e| e.text.contains(ANSWER))
        .count();
    in_band + pushed
}

/// Asker's turn run again answers without sending: the outcome is pushed to its session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_outcome_is_pushed_to_a_dead_senders_session_once() {
    sender_killed_while_it_waits(Step::reply("noted")).await;
}

/// Asker's turn run again sends the same request again (or the turn woken by the push does):
/// it races the push for the wait, and the outcome still reaches the session once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_senders_turn_run_again_and_the_push_give_the_outcome_once() {
    sender_killed_while_it_waits(Step::tool_call("sessions_send", ask())).await;
}

/// Asker's send, waiting up to a minute.
fn ask() -> serde_json::Value {
    json!({"target": "helper", "message": "slow job", "timeout_seconds": 60})
}

/// Asker's first turn sends and waits; its instance is killed while helper works; `next` is
/// what asker's model does in the turn that runs next (its turn run again, or the one woken by
/// the pushed outcome).
async fn sender_killed_while_it_waits(next: Step) {
    let slack = FakeSlack::start().await;
    slack.app("asker", "U_ASKER");
    slack.app("helper", "U_HELPER");
    let model = FakeOpenAi::start().await;
    model.script("asker", Step::tool_call("sessions_send", ask()));
    model.script("asker", next);
    model.script(
        "helper",
        Step::Delay(HELPER_TIME, Box::new(Step::reply(ANSWER))),
    );
    let backend = format!(
        "backend = \"openai\"\nmodel = \"{{bot}}\"\nbase_url = \"{}\"\ntools = [\"*\"]",
        model.base_url
    );
    let cluster = Instances::new(&slack, &["asker", "helper"], &backend, "").await;
    let store = cluster.store().await;
    let mut running = [
        cluster.start("baton-a").await,
        cluster.start("baton-b").await,
    ];
    until("each instance to hold one account", async || {
        let held = holders(&store).await;
        held.len() == 2 && held[0].0 != held[1].0
    })
    .await;
    let held = holders(&store).await;
    let asker_on = held
        .iter()
        .find(|(_, account)| account == "slack/asker")
        .map(|(id, _)| id.clone())
        .unwrap();

    slack.deliver("asker", "env-0", mention("asker", 0));
    until("helper to be at work on asker's send", async || {
        !model.requests_for("helper").is_empty()
    })
    .await;
    let sender = running.iter_mut().find(|i| i.id == asker_on).unwrap();
    println!("kill -9 {asker_on}, where asker waits");
    sender.kill().await;

    until("helper's answer to reach asker", async || {
        reached(&model, &store).await >= 1
    })
    .await;
    // Settled all round: the delivery's outcome is on record as received (or pushed and
    // answered), and asker's event has run to its end.
    until(
        "the delivery and asker's event to be done with",
        async || {
            let rows = store.deliveries(DeliveryQuery::default()).await.unwrap();
            let settled = rows.iter().all(|d| {
                d.state.is_settled()
                    && d.waiter.is_none()
                    && (d.notify == Notify::None || d.notify == Notify::Done)
            });
            settled && store.inbox_left("slack:asker").await.unwrap().is_empty()
        },
    )
    .await;
    let logs: String = running
        .iter()
        .map(|i| format!("--- {} ---\n{}", i.id, i.process.logs()))
        .collect();
    assert_eq!(
        reached(&model, &store).await,
        1,
        "helper's answer reached asker's session once: tool results {:?}\n{logs}",
        model.tool_results("asker")
    );
    let rows = store.deliveries(DeliveryQuery::default()).await.unwrap();
    assert_eq!(rows.len(), 1, "a second send found the first: {rows:?}");
}
