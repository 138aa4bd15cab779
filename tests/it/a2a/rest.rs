//! The HTTP+JSON binding of A2A (SPEC 14) judged by the official SDK client taking it from the
//! card: a blocking and a streaming send, get, cancel, list, and an unknown task as the SDK's
//! task-not-found error. The same tasks the JSON-RPC binding serves, at `/a2a/<bot>/...`.

use serde_json::{Value, json};

use super::{A2A_ON, final_state, listed, sdk_over};
use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{DEADLINE, TestGateway, config_text, echo_config, temp_db};

const HTTP_JSON: &str = "HTTP+JSON";

/// The SDK client on the HTTP+JSON binding.
async fn rest(gw: &TestGateway, mode: &str, text: &str, message_id: &str) -> Value {
    let out = sdk_over(gw, HTTP_JSON, mode, text, message_id, &[]).await;
    assert_eq!(out["transport"], "RestTransport", "{out}");
    out
}

async fn alpha(fake: &FakeOpenAi, db: &std::path::Path) -> TestGateway {
    TestGateway::start(&config_text(&fake.base_url, &["alpha"], A2A_ON), db).await
}

#[tokio::test]
async fn the_card_offers_http_json_and_the_sdk_sends_and_gets_over_it() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = alpha(&fake, &db).await;
    fake.script("alpha", Step::reply("The answer is 42."));
    let out = rest(&gw, "send", "What is the answer?", "m-rest").await;

    let interfaces = out["card"]["supportedInterfaces"].as_array().unwrap();
    let bindings: Vec<&Value> = interfaces.iter().map(|i| &i["protocolBinding"]).collect();
    assert_eq!(bindings, [&json!("JSONRPC"), &json!(HTTP_JSON)], "{out}");
    assert_eq!(interfaces[1]["url"], format!("{}/a2a/alpha", gw.base));
    assert_eq!(interfaces[1]["protocolVersion"], "1.0");

    let task = &out["events"][0]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{out}");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"],
        "The answer is 42."
    );
    assert_eq!(out["got"]["id"], task["id"]);
    assert_eq!(out["got"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        fake.woken_by("alpha"),
        ["Message from A2A agent 'client': What is the answer?"]
    );
    // The same task is a delivery on record, and the JSON-RPC binding reads it too.
    let rows = gw.get("/api/deliveries").await;
    assert_eq!(rows["deliveries"][0]["run_id"], task["id"]);
    let id = task["id"].as_str().unwrap();
    let got = sdk_over(&gw, "JSONRPC", "get", id, "unused", &[]).await;
    assert_eq!(got["transport"], "JsonRpcTransport", "{got}");
    assert_eq!(got["got"]["status"]["state"], "TASK_STATE_COMPLETED");

    // Subscribing to an ended task streams it as it stands, then its final status.
    let events = gw
        .http
        .get(format!("{}/a2a/alpha/tasks/{id}:subscribe", gw.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let data: Vec<Value> = events
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| serde_json::from_str(d.trim()).unwrap())
        .collect();
    assert_eq!(data[0]["task"]["id"], id, "{events}");
    assert_eq!(final_state(&data), "TASK_STATE_COMPLETED", "{events}");
    gw.stop().await;
}

/// A streamed send's events in order: the task, `working`, the reply, `completed`.
fn told_in_order(events: &[Value], reply: &str) {
    let working = events
        .iter()
        .position(|e| e.pointer("/statusUpdate/status/state") == Some(&json!("TASK_STATE_WORKING")))
        .unwrap_or_else(|| panic!("a working update: {events:?}"));
    let text = events
        .iter()
        .position(|e| e.pointer("/artifactUpdate/artifact/parts/0/text") == Some(&json!(reply)))
        .unwrap_or_else(|| panic!("the reply as an artifact update: {events:?}"));
    assert!(events[0].get("task").is_some(), "{events:?}");
    assert!(working < text, "{events:?}");
    assert_eq!(final_state(events), "TASK_STATE_COMPLETED", "{events:?}");
}

#[tokio::test]
async fn a_streaming_send_over_http_json_reports_working_then_the_reply_then_completed() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = alpha(&fake, &db).await;
    fake.script("alpha", Step::reply("streamed answer"));
    let out = rest(&gw, "stream-twice", "go", "m-rest-stream").await;
    told_in_order(out["events"].as_array().unwrap(), "streamed answer");
    // Sent again once its turn has ended, the task is told the same way, from its start.
    let again = out["again"].as_array().unwrap();
    told_in_order(again, "streamed answer");
    assert_eq!(again[0]["task"]["id"], out["events"][0]["task"]["id"]);
    assert_eq!(fake.requests_for("alpha").len(), 1, "one turn");
    gw.stop().await;
}

#[tokio::test]
async fn cancel_over_http_json_stops_the_turn_and_a_second_cancel_is_refused() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = alpha(&fake, &db).await;
    fake.hold();
    fake.script("alpha", Step::reply("too late"));
    let out = rest(&gw, "immediately", "a long job", "m-rest-cancel").await;
    let id = out["events"][0]["task"]["id"].as_str().unwrap().to_owned();
    fake.wait_for_requests(1, DEADLINE).await;

    let canceled = rest(&gw, "cancel", &id, "unused").await;
    assert_eq!(
        canceled["canceled"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    fake.release();
    gw.settle().await;
    let row = &gw.get("/api/deliveries").await["deliveries"][0];
    assert_eq!(row["state"], "canceled");
    assert!(row["reply"].is_null(), "{row}");

    let again = rest(&gw, "cancel", &id, "unused").await;
    assert_eq!(again["error"], "TaskNotCancelableError", "{again}");
    gw.stop().await;
}

#[tokio::test]
async fn list_over_http_json_pages_through_every_task_newest_first() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = alpha(&fake, &db).await;
    let mut sent = Vec::new();
    for n in 0..3 {
        fake.script("alpha", Step::reply("ok"));
        let out = rest(&gw, "send", &format!("job {n}"), &format!("m-list-{n}")).await;
        sent.push(out["events"][0]["task"]["id"].as_str().unwrap().to_owned());
    }
    let out = rest(&gw, "list", "2", "unused").await;
    let pages = out["pages"].as_array().unwrap();
    assert_eq!(pages.len(), 2, "{out}");
    sent.reverse();
    assert_eq!(listed(&out), sent, "every task once, newest first");
    assert_eq!(pages[0]["totalSize"], 3, "{out}");
    gw.stop().await;
}

#[tokio::test]
async fn an_unknown_task_is_the_sdks_task_not_found_error() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = alpha(&fake, &db).await;
    let out = rest(&gw, "get", "run_nothere", "unused").await;
    assert_eq!(out["error"], "TaskNotFoundError", "{out}");
    assert!(
        out["message"].as_str().unwrap().contains("run_nothere"),
        "{out}"
    );
    // On the wire: 404 with the A2A reason, and a bad body is a 400 saying what is wrong.
    let missing = gw
        .http
        .post(format!("{}/a2a/alpha/tasks/run_nothere:cancel", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    assert_eq!(missing.headers()["content-type"], "application/a2a+json");
    let body: Value = missing.json().await.unwrap();
    assert_eq!(
        body["error"]["details"][0]["reason"], "TASK_NOT_FOUND",
        "{body}"
    );
    let bad = gw
        .http
        .post(format!("{}/a2a/alpha/message:send", gw.base))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.unwrap();
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT", "{body}");
    assert!(fake.requests_for("alpha").is_empty(), "no turn ran");
    gw.stop().await;
}

#[tokio::test]
async fn with_an_api_token_the_http_json_binding_needs_it() {
    let (_dir, db) = temp_db();
    let env = |name: &str| (name == "BATON_TEST_TOKEN").then(|| "s3cret".to_owned());
    let config = echo_config("api_token_env = \"BATON_TEST_TOKEN\"") + A2A_ON;
    let gw = TestGateway::start_with_env(&config, &db, &env).await;
    let body = json!({"message": {"messageId": "m-rest-auth", "role": "ROLE_USER",
                                  "parts": [{"text": "hi"}]}});
    let call = |token: Option<&str>| {
        let request = gw
            .http
            .post(format!("{}/a2a/snark/message:send", gw.base))
            .json(&body);
        match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
        .send()
    };
    assert_eq!(call(None).await.unwrap().status(), 401);
    let listed = gw
        .http
        .get(format!("{}/a2a/snark/tasks", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 401);
    let answered: Value = call(Some("s3cret")).await.unwrap().json().await.unwrap();
    assert_eq!(
        answered["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{answered}"
    );
    gw.stop().await;
}
