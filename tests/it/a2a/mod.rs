//! A2A inbound (SPEC 14) judged by the official Python `a2a-sdk` client
//! (scripts/test-deps-python): the agent card, a blocking and a streaming send, a repeated
//! `messageId`, a guard's refusal, and a task that outlives a restart. A question the bot asks
//! is in `input_required.rs`; the HTTP+JSON binding in `rest.rs`.

mod cluster;
mod input_required;
mod list_pages;
pub(crate) mod outbound;
mod rest;

use std::time::Duration;

use serde_json::{Value, json};

use crate::dashboard::urlencode;
use crate::support::browser::Browser;
use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{
    DEADLINE, TestGateway, config_text, config_with, echo_config, temp_db,
};

/// The SDK driver: `client.py --binding=<binding> <base> <bot> <mode> <text> <message_id>`.
const CLIENT: &str = include_str!("client.py");

const A2A_ON: &str = "\n[a2a]\nenabled = true\n";

/// Run the SDK client in `mode` and read what it printed.
async fn sdk(gw: &TestGateway, mode: &str, text: &str, message_id: &str) -> Value {
    sdk_on(gw, mode, text, message_id, &[]).await
}

/// [`sdk`], the message sent on a task: `on` is its task id and context id.
async fn sdk_on(gw: &TestGateway, mode: &str, text: &str, message_id: &str, on: &[&str]) -> Value {
    sdk_over(gw, "JSONRPC", mode, text, message_id, on).await
}

/// [`sdk_on`] with the client taking `binding` (`JSONRPC`, `HTTP+JSON`) from the card.
async fn sdk_over(
    gw: &TestGateway,
    binding: &str,
    mode: &str,
    text: &str,
    message_id: &str,
    on: &[&str],
) -> Value {
    let run = tokio::process::Command::new("python3")
        .arg("-c")
        .arg(CLIENT)
        .arg(format!("--binding={binding}"))
        .args([gw.base.as_str(), "alpha", mode, text, message_id])
        .args(on)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(DEADLINE, run)
        .await
        .expect("the a2a-sdk client finished in time")
        .expect("python3 runs (a2a-sdk comes from scripts/test-deps-python)");
    assert!(
        out.status.success(),
        "the a2a-sdk client failed (run scripts/test-deps-python): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the client printed JSON")
}

/// JSON-RPC `method` with `params` on `bot`'s A2A endpoint at `base`, sent as an A2A 1.0
/// client sends it: the whole response.
async fn rpc(http: &reqwest::Client, base: &str, bot: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    http.post(format!("{base}/a2a/{bot}"))
        .header("A2A-Version", "1.0")
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The ids of the tasks on the pages the client's `list` mode printed, in page order.
fn listed(out: &Value) -> Vec<&str> {
    let pages = out["pages"].as_array().expect("the client printed pages");
    pages
        .iter()
        .flat_map(|p| p["tasks"].as_array().unwrap())
        .map(|t| t["id"].as_str().unwrap())
        .collect()
}

/// The task the events of one send ended with (the last full task, updated by the status
/// and artifact updates after it).
fn final_state(events: &[Value]) -> String {
    events
        .iter()
        .rev()
        .find_map(|e| {
            e.pointer("/statusUpdate/status/state")
                .or_else(|| e.pointer("/task/status/state"))
        })
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn the_sdk_reads_the_card_and_a_blocking_send_completes_with_the_reply() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], A2A_ON), &db).await;
    fake.script("alpha", Step::reply("The answer is 42."));
    let out = sdk(&gw, "send", "What is the answer?", "m-1").await;

    let card = &out["card"];
    assert_eq!(card["name"], "alpha");
    assert_eq!(card["capabilities"]["streaming"], true);
    let interface = &card["supportedInterfaces"][0];
    assert_eq!(interface["url"], format!("{}/a2a/alpha", gw.base));
    assert_eq!(interface["protocolBinding"], "JSONRPC");
    let list: Value = gw
        .http
        .get(format!("{}/.well-known/agent-card.json", gw.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list[0]["name"], "alpha");

    let task = &out["events"][0]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        task["artifacts"][0]["parts"][0]["text"],
        "The answer is 42."
    );
    assert_eq!(out["got"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(out["got"]["id"], task["id"]);
    let context = task["contextId"].as_str().unwrap();
    assert!(context.starts_with("bot:alpha:local:"), "{context}");
    // The bot was told who spoke, and the task is a delivery on record from `a2a:client`.
    assert_eq!(
        fake.woken_by("alpha"),
        ["Message from A2A agent 'client': What is the answer?"]
    );
    let rows = gw.get("/api/deliveries").await;
    let row = &rows["deliveries"][0];
    assert_eq!(row["run_id"], task["id"]);
    assert_eq!(row["state"], "delivered");
    assert_eq!(row["target_session"], context);
    gw.stop().await;
}

#[tokio::test]
async fn a_file_part_is_handed_to_the_bot_as_an_artifact() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], A2A_ON), &db).await;
    fake.script("alpha", Step::reply("3 apples."));
    let out = sdk(&gw, "file", "How many apples?", "m-file").await;
    let task = &out["events"][0]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{out}");
    // The inline file is an artifact of the task's session, handed over as a sessions_send
    // hands artifacts (small text inline); the file given by URL is named with its address.
    let woken = fake.woken_by("alpha");
    let told = &woken[0];
    assert!(
        told.starts_with("Message from A2A agent 'client': How many apples?\nFile `plan.pdf` at https://files.example/plan.pdf"),
        "{told}"
    );
    assert!(told.contains("Artifacts handed to you:"), "{told}");
    assert!(
        told.contains("`notes.txt`") && told.contains("apples: 3"),
        "{told}"
    );
    let context = task["contextId"].as_str().unwrap();
    let kept = gw.get(&format!("/api/artifacts?session={context}")).await;
    assert_eq!(kept["artifacts"][0]["name"], "notes.txt", "{kept}");
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_a_task_as_a_card_from_its_caller() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], A2A_ON), &db).await;
    fake.script("alpha", Step::reply("done"));
    let out = sdk(&gw, "send", "tidy up", "m-dash").await;
    let run = out["events"][0]["task"]["id"].as_str().unwrap().to_owned();

    let browser = Browser::start().await;
    browser
        .goto(&format!("{}/#/delivery/{}", gw.base, urlencode(&run)))
        .await;
    let shown = browser
        .until(
            "the task's card and its row in the deliveries",
            &format!(
                "const c = document.querySelector('.delivery-detail .call-card'); \
                 const row = document.querySelector('table.deliveries tr[data-run=\"{run}\"]'); \
                 if (!c || !row) return null; \
                 return {{ caller: c.querySelector('.call-caller').textContent, \
                          target: c.querySelector('.call-target').textContent, \
                          from: row.children[1].textContent }};"
            ),
        )
        .await;
    assert_eq!(shown["caller"], "a2a:client", "{shown}");
    assert_eq!(shown["target"], "alpha", "{shown}");
    assert_eq!(shown["from"], "a2a:client", "{shown}");
    browser.close().await;
    gw.stop().await;
}

#[tokio::test]
async fn a_streaming_send_reports_working_then_the_reply_then_completed() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], A2A_ON), &db).await;
    fake.script("alpha", Step::reply("streamed answer"));
    let out = sdk(&gw, "stream", "go", "m-stream").await;
    let events = out["events"].as_array().unwrap();
    let working = events
        .iter()
        .position(|e| e.pointer("/statusUpdate/status/state") == Some(&json!("TASK_STATE_WORKING")))
        .expect("a working update");
    let text = events
        .iter()
        .position(|e| {
            e.pointer("/artifactUpdate/artifact/parts/0/text") == Some(&json!("streamed answer"))
        })
        .expect("the reply as an artifact update");
    assert!(working < text, "{events:?}");
    assert_eq!(final_state(events), "TASK_STATE_COMPLETED");
    gw.stop().await;
}

#[tokio::test]
async fn a_streamed_reply_arrives_in_appended_chunks_as_the_model_writes_it() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], A2A_ON), &db).await;
    let reply = "The answer is forty-two, as ever.";
    fake.script("alpha", Step::slow(reply, 6, Duration::from_millis(40)));
    let out = sdk(&gw, "stream", "go", "m-chunks").await;
    let events = out["events"].as_array().unwrap();
    let chunks: Vec<&Value> = events
        .iter()
        .filter_map(|e| e.get("artifactUpdate"))
        .collect();
    assert!(chunks.len() > 1, "the reply came in pieces: {events:?}");
    let text: String = chunks
        .iter()
        .filter_map(|c| c.pointer("/artifact/parts/0/text").and_then(Value::as_str))
        .collect();
    assert_eq!(text, reply, "{events:?}");
    // The first chunk starts the artifact, the others add to it, and the last says so.
    assert_ne!(chunks[0]["append"], true, "{events:?}");
    assert!(
        chunks[1..].iter().all(|c| c["append"] == true),
        "{events:?}"
    );
    let last = chunks.iter().rposition(|c| c["lastChunk"] == true);
    assert_eq!(last, Some(chunks.len() - 1), "{events:?}");
    let finished = events
        .iter()
        .rposition(|e| e.get("artifactUpdate").is_some())
        .unwrap();
    assert!(
        events[finished + 1..].iter().any(
            |e| e.pointer("/statusUpdate/status/state") == Some(&json!("TASK_STATE_COMPLETED"))
        ),
        "{events:?}"
    );
    assert_eq!(out["got"]["artifacts"][0]["parts"][0]["text"], reply);
    gw.stop().await;
}

#[tokio::test]
async fn progress_lines_stream_as_working_status_messages() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let bots = [("alpha", "tools = [\"progress\"]")];
    let gw = TestGateway::start(&config_with(&fake.base_url, &bots, A2A_ON), &db).await;
    fake.script(
        "alpha",
        Step::tool_call("progress", json!({"message": "reading the prices"})),
    );
    fake.script("alpha", Step::reply("done"));
    let out = sdk(&gw, "stream", "go", "m-progress").await;
    let events = out["events"].as_array().unwrap();
    let told: Vec<&str> = events
        .iter()
        .filter_map(|e| e.pointer("/statusUpdate/status/message/parts/0/text"))
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(told, ["reading the prices"], "{events:?}");
    assert_eq!(final_state(events), "TASK_STATE_COMPLETED");
    gw.stop().await;
}

#[tokio::test]
async fn the_same_message_id_twice_is_one_task_and_one_turn() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], A2A_ON), &db).await;
    fake.script("alpha", Step::reply("once"));
    let out = sdk(&gw, "twice", "do it", "m-same").await;
    let first = &out["events"][0]["task"];
    let again = &out["again"][0]["task"];
    assert_eq!(first["id"], again["id"]);
    assert_eq!(again["artifacts"][0]["parts"][0]["text"], "once");
    assert_eq!(fake.requests_for("alpha").len(), 1, "one turn");
    gw.stop().await;
}

#[tokio::test]
async fn a_guard_refusal_is_a_rejected_task_with_the_reason() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let extra = format!("{A2A_ON}\n[agent_to_agent]\nenabled = false\n");
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], &extra), &db).await;
    let out = sdk(&gw, "send", "hello", "m-refused").await;
    let task = &out["events"][0]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_REJECTED");
    let reason = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(!reason.is_empty());
    assert_eq!(out["got"]["status"]["state"], "TASK_STATE_REJECTED");
    assert!(fake.requests_for("alpha").is_empty(), "no turn ran");
    gw.stop().await;
}

#[tokio::test]
async fn a_task_accepted_before_a_restart_is_answered_by_get_task_after_it() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let config = config_text(&fake.base_url, &["alpha"], A2A_ON);
    let gw = TestGateway::start(&config, &db).await;
    fake.script(
        "alpha",
        Step::Delay(Duration::from_secs(60), Box::new(Step::reply("never seen"))),
    );
    let out = sdk(&gw, "immediately", "a long job", "m-long").await;
    let task = &out["events"][0]["task"];
    let state = task["status"]["state"].as_str().unwrap();
    assert!(
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"].contains(&state),
        "{state}"
    );
    fake.wait_for_requests(1, DEADLINE).await;
    gw.stop().await;

    let gw = TestGateway::start(&config, &db).await;
    gw.settle().await;
    let got = rpc(
        &gw.http,
        &gw.base,
        "alpha",
        "GetTask",
        json!({"id": task["id"]}),
    )
    .await;
    let status = &got["result"]["status"];
    assert_eq!(status["state"], "TASK_STATE_FAILED", "{got}");
    let reason = status["message"]["parts"][0]["text"].as_str().unwrap();
    assert!(reason.contains("interrupted"), "{reason}");
    gw.stop().await;
}

#[tokio::test]
async fn cancel_stops_the_turn_and_nothing_of_it_is_kept_as_the_answer() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], A2A_ON), &db).await;
    fake.hold();
    fake.script("alpha", Step::reply("too late"));
    let out = sdk(&gw, "immediately", "a long job", "m-cancel").await;
    let id = out["events"][0]["task"]["id"].as_str().unwrap().to_owned();
    fake.wait_for_requests(1, DEADLINE).await;

    let canceled = sdk(&gw, "cancel", &id, "unused").await;
    assert_eq!(
        canceled["canceled"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
    fake.release();
    gw.settle().await;
    let row = &gw.get("/api/deliveries").await["deliveries"][0];
    assert_eq!(row["state"], "canceled");
    assert!(row["reply"].is_null(), "{row}");
    let context = row["target_session"].as_str().unwrap();
    let said: Vec<Value> = gw
        .transcript(context)
        .await
        .into_iter()
        .filter(|e| e["text"] == "too late")
        .collect();
    assert!(said.is_empty(), "{said:?}");
    gw.stop().await;
}

#[tokio::test]
async fn with_an_api_token_cards_are_public_and_calls_need_the_token() {
    let (_dir, db) = temp_db();
    let env = |name: &str| (name == "BATON_TEST_TOKEN").then(|| "s3cret".to_owned());
    let config = echo_config("api_token_env = \"BATON_TEST_TOKEN\"") + A2A_ON;
    let gw = TestGateway::start_with_env(&config, &db, &env).await;
    let card = gw
        .http
        .get(format!("{}/a2a/snark/.well-known/agent-card.json", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(card.status(), 200);
    let card: Value = card.json().await.unwrap();
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
        "Bearer"
    );
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m-auth", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}});
    let call = |token: Option<&str>| {
        let request = gw.http.post(format!("{}/a2a/snark", gw.base)).json(&body);
        match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
        .send()
    };
    assert_eq!(call(None).await.unwrap().status(), 401);
    assert_eq!(call(Some("wrong")).await.unwrap().status(), 401);
    let answered: Value = call(Some("s3cret")).await.unwrap().json().await.unwrap();
    let task = &answered["result"]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_COMPLETED",
        "{answered}"
    );
    gw.stop().await;
}

/// A caller asking for another protocol version is refused before anything of its call is
/// read, in each binding's framing (JSON-RPC: the call's id and -32009; HTTP+JSON: 400 with
/// the reason), and no turn runs; a bot that is not exposed is a 404 `google.rpc.Status`
/// naming the ones that are.
#[tokio::test]
async fn another_protocol_version_is_refused_and_an_unexposed_bot_is_not_found() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let config = config_text(
        &fake.base_url,
        &["alpha", "beta"],
        "\n[a2a]\nenabled = true\nexpose = [\"alpha\"]\n",
    );
    let gw = TestGateway::start(&config, &db).await;
    fake.script("alpha", Step::reply("never said"));
    let message = json!({"message": {"messageId": "m-old", "role": "ROLE_USER",
                                     "parts": [{"text": "hi"}]}});
    let rpc = json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": message});
    // A POST of `body` to `path` asking for protocol `version`: its status and body.
    let post = |path: &str, version: &str, body: &Value| {
        let sent = gw
            .http
            .post(format!("{}{path}", gw.base))
            .header("A2A-Version", version)
            .json(body)
            .send();
        async move {
            let response = sent.await.unwrap();
            (response.status(), response.json::<Value>().await.unwrap())
        }
    };
    let (_, old) = post("/a2a/alpha", "0.3", &rpc).await;
    assert_eq!(old["id"], 7, "{old}");
    assert_eq!(old["error"]["code"], -32009, "{old}");
    let said = old["error"]["message"].as_str().unwrap();
    assert!(said.contains("A2A-Version: 1.0"), "{said}");

    let (status, body) = post("/a2a/alpha/message:send", "2.0", &message).await;
    assert_eq!(status, 400);
    assert_eq!(
        body["error"]["details"][0]["reason"], "VERSION_NOT_SUPPORTED",
        "{body}"
    );
    assert!(fake.requests_for("alpha").is_empty(), "no turn ran");

    let (status, body) = post("/a2a/beta", "1.0", &rpc).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["status"], "NOT_FOUND", "{body}");
    let said = body["error"]["message"].as_str().unwrap();
    assert!(said.contains("exposed: alpha"), "{said}");
    gw.stop().await;
}
