//! SPEC 14 "On PostgreSQL, any instance answers for any task": two `baton run` processes on one
//! database. A task sent through one is read through the other while it works and after it
//! ends, and a task sent through one is canceled through the other: its turn, running on the
//! first, stops, and nothing of it is kept.

use serde_json::{Value, json};

use crate::dashboard::urlencode;
use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::fake_slack::FakeSlack;
use crate::support::gateway::DEADLINE;
use crate::support::instances::{Instance, Instances, until};

/// JSON-RPC `method` with `params` on bot alpha's A2A endpoint of `at`: the result.
async fn rpc(at: &Instance, method: &str, params: Value) -> Value {
    let answer = super::rpc(&reqwest::Client::new(), &at.base, "alpha", method, params).await;
    answer
        .get("result")
        .cloned()
        .unwrap_or_else(|| panic!("{method} through {}: {answer}", at.id))
}

/// Send `text` as message `id` through `at`, not waiting for the answer: the task's id.
async fn send(at: &Instance, text: &str, id: &str) -> String {
    let message = json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]});
    let params = json!({"message": message, "configuration": {"returnImmediately": true}});
    let sent = rpc(at, "SendMessage", params).await;
    sent["task"]["id"].as_str().unwrap().to_owned()
}

async fn state(at: &Instance, task: &str) -> Value {
    rpc(at, "GetTask", json!({"id": task})).await
}

/// How many deliveries `at` is running now.
async fn in_flight(at: &Instance) -> String {
    let metrics = reqwest::get(format!("{}/metrics", at.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("baton_deliveries_in_flight "))
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_instance_reads_and_cancels_a_task_another_instance_runs() {
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    slack.app("alpha", "U_ALPHA");
    let backend = format!(
        "backend = \"openai\"\nmodel = \"{{bot}}\"\nbase_url = \"{}\"",
        model.base_url
    );
    let cluster = Instances::new(&slack, &["alpha"], &backend, "\n[a2a]\nenabled = true\n").await;
    let a = cluster.start("baton-a").await;
    let b = cluster.start("baton-b").await;

    // A task sent through A, its turn held at the model: B sees it working, then answered.
    model.hold();
    model.script("alpha", Step::reply("The answer is 42."));
    let first = send(&a, "What is the answer?", "m-1").await;
    model.wait_for_requests(1, DEADLINE).await;
    until("B shows the task working", async || {
        state(&b, &first).await["status"]["state"] == "TASK_STATE_WORKING"
    })
    .await;
    model.release();
    until("B shows the task completed", async || {
        state(&b, &first).await["status"]["state"] == "TASK_STATE_COMPLETED"
    })
    .await;
    let done = state(&b, &first).await;
    assert_eq!(
        done["artifacts"][0]["parts"][0]["text"], "The answer is 42.",
        "{done}"
    );

    // A second task sent through A is canceled through B while its turn runs on A.
    model.hold();
    model.script("alpha", Step::reply("too late"));
    let second = send(&a, "a long job", "m-2").await;
    model.wait_for_requests(2, DEADLINE).await;
    let canceled = rpc(&b, "CancelTask", json!({"id": second})).await;
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    // A hears of the cancel and stops the turn while the model still holds its answer.
    until("A stopped the task's turn", async || {
        in_flight(&a).await == "0"
    })
    .await;
    model.release();
    for at in [&a, &b] {
        let got = state(at, &second).await;
        assert_eq!(got["status"]["state"], "TASK_STATE_CANCELED", "{got}");
        let artifacts = got["artifacts"].as_array();
        assert!(artifacts.is_none_or(Vec::is_empty), "{got}");
    }
    let context = canceled["contextId"].as_str().unwrap();
    let transcript = a
        .get(&format!("/api/transcript?session={}", urlencode(context)))
        .await;
    let said: Vec<&Value> = transcript
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["text"] == "too late")
        .collect();
    assert!(
        said.is_empty(),
        "the canceled turn's answer was kept: {said:?}"
    );
}
