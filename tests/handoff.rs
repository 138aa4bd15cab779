//! Structured handoff between bots: `sessions_send` with `artifacts` and `expect`, end to end in
//! a real gateway with bots on the openai backend answered by the scripted fake model. Checked:
//! what the target's model was given (the artifact inline, the schema), what the sender's tool
//! result says (`output`, `artifacts`, `usage`, `tool_calls`), the one retry on a bad answer,
//! and what `/api/deliveries` keeps.

mod support;

use serde_json::{Value, json};
use support::fake_openai::{FakeOpenAi, Step};
use support::gateway::{TestGateway, temp_db};

const TABLE: &str = r#"[{"vendor":"acme","price":10},{"vendor":"globex","price":12}]"#;

/// Bots `ids` on the fake model, every tool allowed, bot-to-bot open.
fn config(fake: &FakeOpenAi, ids: &[&str]) -> String {
    let mut text = String::from(
        "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n\n\
         [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n",
    );
    for id in ids {
        text.push_str(&format!(
            "\n[[bots]]\nid = \"{id}\"\nname = \"{id}\"\nbackend = \"openai\"\nmodel = \"{id}\"\n\
             base_url = \"{}\"\ntools = [\"*\"]\n",
            fake.base_url
        ));
    }
    text
}

fn schema() -> Value {
    json!({
        "type": "object",
        "required": ["cheapest"],
        "properties": {"cheapest": {"type": "string"}, "price": {"type": "number"}}
    })
}

/// The tool results of a request, parsed, in order.
fn results_in(request: &Value) -> Vec<Value> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["role"] == "tool")
        .map(|l| serde_json::from_str(l["content"].as_str().unwrap()).unwrap())
        .collect()
}

/// Every tool result `model` was given, each once, in order.
fn tool_results(fake: &FakeOpenAi, model: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    for request in fake.requests_for(model) {
        for result in results_in(&request) {
            if !seen.contains(&result) {
                seen.push(result);
            }
        }
    }
    seen
}

/// The last user line of each request `model` received.
fn woken_by(fake: &FakeOpenAi, model: &str) -> Vec<String> {
    fake.requests_for(model)
        .iter()
        .map(|r| {
            let lines = r["messages"].as_array().cloned().unwrap_or_default();
            let user = lines.iter().rev().find(|l| l["role"] == "user").cloned();
            user.map(|l| l["content"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_default()
        })
        .collect()
}

/// `a`'s sessions_send of the artifact it just put, to `b`, with `expect`.
fn send_the_table() -> Step {
    Step::tool_call_with("sessions_send", |request| {
        let id = results_in(request)[0]["id"].clone();
        json!({"target": "b", "message": "which vendor is cheapest?", "artifacts": [id],
               "expect": schema(), "idempotency_key": "cheapest-1"})
    })
}

/// `a` keeps the table and sends it to `b`; `b` keeps a report, then answers `answers` in turn.
fn script(fake: &FakeOpenAi, answers: &[&str]) {
    fake.script(
        "a",
        Step::tool_call(
            "artifact_put",
            json!({"name": "prices.json", "text": TABLE}),
        ),
    );
    fake.script("a", send_the_table());
    fake.script(
        "b",
        Step::tool_call(
            "artifact_put",
            json!({"name": "report.md", "text": "acme is cheapest"}),
        ),
    );
    for answer in answers {
        fake.script("b", Step::reply(*answer));
    }
}

#[tokio::test]
async fn an_expected_answer_comes_back_parsed_with_the_artifacts_the_run_made() {
    let fake = FakeOpenAi::start().await;
    script(&fake, &[r#"{"cheapest": "acme", "price": 10}"#]);
    // The same request again (same idempotency key): the first run's result, nothing run twice.
    fake.script("a", send_the_table());
    fake.script("a", Step::reply("acme"));
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config(&fake, &["a", "b"]), &db).await;

    gw.say("room", "alice", "@a find the cheapest vendor").await;
    gw.settle().await;

    let woke = woken_by(&fake, "b");
    assert_eq!(
        woke.len(),
        2,
        "one turn of b (a tool call, then the answer): {woke:?}"
    );
    let brief = &woke[0];
    assert!(
        brief.starts_with("Message from bot 'a': which vendor is cheapest?"),
        "{brief}"
    );
    assert!(brief.contains("`prices.json` (application/json"), "{brief}");
    assert!(
        brief.contains(TABLE),
        "small text artifacts are inline: {brief}"
    );
    assert!(
        brief.contains("JSON Schema") && brief.contains("\"cheapest\""),
        "{brief}"
    );

    let results = tool_results(&fake, "a");
    assert_eq!(results.len(), 3, "{results:#?}");
    let table_id = results[0]["id"].as_str().unwrap();
    let sent = &results[1];
    assert_eq!(sent["status"], "ok", "{sent}");
    assert_eq!(sent["output"], json!({"cheapest": "acme", "price": 10}));
    assert_eq!(sent["model"], "b");
    assert!(sent["elapsed_ms"].is_u64(), "{sent}");
    assert_eq!(sent["tool_calls"], 1, "{sent}");
    assert_eq!(
        sent["usage"]["prompt_tokens"], 38,
        "two model calls: {sent}"
    );
    let made = sent["artifacts"].as_array().unwrap();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0]["name"], "report.md");
    assert_eq!(made[0]["media_type"], "text/markdown");
    assert!(
        made[0]["sha256"].is_string() && made[0]["bytes"] == 16,
        "{made:?}"
    );

    let again = &results[2];
    assert_eq!(again["deduplicated"], true, "{again}");
    assert_eq!(again["run_id"], sent["run_id"]);
    assert_eq!(
        again["artifacts"], sent["artifacts"],
        "a retry returns the same artifacts"
    );
    assert_eq!(again["output"], sent["output"]);

    let deliveries = gw.get("/api/deliveries").await;
    let d = &deliveries["deliveries"][0];
    assert_eq!(d["artifacts_in"], json!([table_id]));
    assert_eq!(d["expect"], schema());
    assert_eq!(d["result"]["output"]["cheapest"], "acme");
    gw.stop().await;
}

#[tokio::test]
async fn a_bad_answer_gets_one_more_turn_with_the_errors() {
    let fake = FakeOpenAi::start().await;
    script(&fake, &["acme, obviously", r#"{"cheapest": "acme"}"#]);
    fake.script("a", Step::reply("acme"));
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config(&fake, &["a", "b"]), &db).await;

    gw.say("room", "alice", "@a find the cheapest vendor").await;
    gw.settle().await;

    let woke = woken_by(&fake, "b");
    assert_eq!(woke.len(), 3, "{woke:?}");
    let retry = &woke[2];
    assert!(retry.contains("did not match the JSON Schema"), "{retry}");
    assert!(retry.contains("not JSON"), "the errors are given: {retry}");
    let sent = &tool_results(&fake, "a")[1];
    assert_eq!(sent["status"], "ok", "{sent}");
    assert_eq!(sent["output"], json!({"cheapest": "acme"}));
    assert_eq!(sent["reply"], r#"{"cheapest": "acme"}"#);
    assert_eq!(
        sent["usage"]["prompt_tokens"], 57,
        "three model calls: {sent}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn two_bad_answers_end_as_invalid_output_with_the_errors() {
    let fake = FakeOpenAi::start().await;
    script(&fake, &[r#"{"price": 10}"#, r#"{"cheapest": 10}"#]);
    fake.script("a", Step::reply("b could not say"));
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config(&fake, &["a", "b"]), &db).await;

    gw.say("room", "alice", "@a find the cheapest vendor").await;
    gw.settle().await;

    assert_eq!(woken_by(&fake, "b").len(), 3, "exactly one more turn");
    let sent = &tool_results(&fake, "a")[1];
    assert_eq!(sent["status"], "invalid_output", "{sent}");
    let errors = sent["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    let error = errors[0].as_str().unwrap();
    assert!(error.starts_with("at /cheapest:"), "{error}");
    assert!(sent["output"].is_null(), "{sent}");
    assert_eq!(
        sent["artifacts"][0]["name"], "report.md",
        "what it made is still listed"
    );
    let deliveries = gw.get("/api/deliveries").await;
    assert_eq!(deliveries["deliveries"][0]["state"], "invalid_output");
    gw.stop().await;
}

#[tokio::test]
async fn a_broken_schema_or_an_unknown_artifact_is_refused_before_anything_runs() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "a",
        Step::ToolCalls(vec![
            (
                "sessions_send".into(),
                json!({"target": "b", "message": "go", "expect": {"type": 12}}),
            ),
            (
                "sessions_send".into(),
                json!({"target": "b", "message": "go", "artifacts": ["art-nosuch"]}),
            ),
        ]),
    );
    fake.script("a", Step::reply("could not send"));
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config(&fake, &["a", "b"]), &db).await;

    gw.say("room", "alice", "@a delegate").await;
    gw.settle().await;

    let results = tool_results(&fake, "a");
    assert_eq!(results.len(), 2, "{results:#?}");
    assert_eq!(results[0]["status"], "error");
    assert!(
        results[0]["error"]
            .as_str()
            .unwrap()
            .contains("JSON Schema")
    );
    assert_eq!(results[1]["status"], "error");
    assert!(results[1]["error"].as_str().unwrap().contains("art-nosuch"));
    assert!(fake.requests_for("b").is_empty(), "b never ran");
    let deliveries = gw.get("/api/deliveries").await;
    assert!(deliveries["deliveries"].as_array().unwrap().is_empty());
    gw.stop().await;
}
