//! Structured handoff between bots: `sessions_send` with `artifacts` and `expect`, end to end in
//! a real gateway with bots on the openai backend answered by the scripted fake model. Checked:
//! what the target's model was given (the artifact inline, the schema), what the sender's tool
//! result says (`output`, `artifacts`, `usage`, `tool_calls`), the one retry on a bad answer,
//! and what `/api/deliveries` keeps.

use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::TestGateway;
use crate::support::world::World;

const TABLE: &str = r#"[{"vendor":"acme","price":10},{"vendor":"globex","price":12}]"#;

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
    let gw = World::agents(&fake, &["a", "b"], "").await;

    gw.say("room", "alice", "@a find the cheapest vendor").await;
    gw.settle().await;

    let woke = fake.woken_by("b");
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

    let results = fake.tool_results("a");
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
    let gw = World::agents(&fake, &["a", "b"], "").await;

    gw.say("room", "alice", "@a find the cheapest vendor").await;
    gw.settle().await;

    let woke = fake.woken_by("b");
    assert_eq!(woke.len(), 3, "{woke:?}");
    let retry = &woke[2];
    assert!(retry.contains("did not match the JSON Schema"), "{retry}");
    assert!(retry.contains("not JSON"), "the errors are given: {retry}");
    let sent = &fake.tool_results("a")[1];
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
    let gw = World::agents(&fake, &["a", "b"], "").await;

    gw.say("room", "alice", "@a find the cheapest vendor").await;
    gw.settle().await;

    assert_eq!(fake.woken_by("b").len(), 3, "exactly one more turn");
    let sent = &fake.tool_results("a")[1];
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
    let d = &deliveries["deliveries"][0];
    assert_eq!(d["state"], "invalid_output");
    // Both answers are on record, the second with the outcome it failed.
    let session = d["target_session"].as_str().unwrap();
    let answers: Vec<_> = gw
        .transcript(session)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "answer")
        .map(|e| e["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(answers, [r#"{"price": 10}"#, r#"{"cheapest": 10}"#]);
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
    let gw = World::agents(&fake, &["a", "b"], "").await;

    gw.say("room", "alice", "@a delegate").await;
    gw.settle().await;

    let results = fake.tool_results("a");
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

/// The first artifact id in the last user line of the request: one handed over in the brief.
fn handed_id(request: &Value) -> String {
    let lines = request["messages"].as_array().unwrap();
    let user = lines.iter().rev().find(|l| l["role"] == "user").unwrap();
    let text = user["content"].as_str().unwrap();
    let at = text.find("art-").expect("an artifact in the brief");
    text[at..at + 28].to_owned()
}

/// The id in the last tool result of the request.
fn last_result_id(request: &Value) -> Value {
    results_in(request).last().unwrap()["id"].clone()
}

/// Events on `/api/events` from the start until one of `kind` whose line also holds `with`
/// shows up (or the deadline).
async fn event_of(gw: &TestGateway, kind: &str, with: &str) -> Value {
    let mut response = gw
        .http
        .get(format!("{}/api/events?after=0", gw.base))
        .send()
        .await
        .unwrap();
    let mut text = String::new();
    let needle = format!("\"type\":\"{kind}\"");
    let found = tokio::time::timeout(crate::support::gateway::DEADLINE, async {
        while let Some(chunk) = response.chunk().await.unwrap() {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(line) = text
                .lines()
                .find(|l| l.contains(&needle) && l.contains(with))
            {
                return serde_json::from_str::<Value>(line.trim_start_matches("data:").trim())
                    .unwrap();
            }
        }
        panic!("the stream ended without a {kind} event");
    })
    .await;
    found.unwrap_or_else(|_| panic!("no {kind} event in time"))
}

#[tokio::test]
async fn progress_is_kept_on_the_delivery_and_shown_to_the_sender() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "a",
        Step::tool_call("progress", json!({"message": "thinking"})),
    );
    fake.script(
        "a",
        Step::tool_call(
            "sessions_send",
            json!({"target": "b", "message": "build it"}),
        ),
    );
    fake.script("a", Step::reply("built"));
    fake.script(
        "b",
        Step::tool_call(
            "progress",
            json!({"message": "drafting the API table", "step": 1, "of": 2}),
        ),
    );
    fake.script(
        "b",
        Step::tool_call("session_status", json!({"session": "bot:a:local:a:room"})),
    );
    fake.script("b", Step::reply("done"));
    let gw = World::agents(&fake, &["a", "b"], "").await;

    gw.say("room", "alice", "@a build it").await;
    gw.settle().await;

    let own = &fake.tool_results("a")[0];
    assert!(
        own["status"] == "ok" && own["note"].as_str().unwrap().contains("not kept"),
        "a's turn works for no delivery: {own}"
    );
    let b = fake.tool_results("b");
    assert_eq!(b[0], json!({"status": "ok"}));
    let in_flight = &b[1]["deliveries_in_flight"][0];
    assert_eq!(in_flight["from"], "a", "{in_flight}");
    assert_eq!(in_flight["progress"]["message"], "drafting the API table");
    assert_eq!(in_flight["progress"]["step"], 1);
    assert_eq!(in_flight["progress"]["of"], 2);

    let deliveries = gw.get("/api/deliveries").await;
    let d = &deliveries["deliveries"][0];
    let lines = d["progress"].as_array().unwrap();
    assert_eq!(lines.len(), 1, "{d}");
    assert_eq!(lines[0]["message"], "drafting the API table");
    let event = event_of(&gw, "progress", "\"bot\":\"b\"").await;
    assert_eq!(event["run_id"], d["run_id"]);
    assert_eq!(event["bot"], "b");
    assert_eq!(event["message"], "drafting the API table");
    gw.stop().await;
}

#[tokio::test]
async fn a_three_bot_pipeline_passes_artifacts_by_id_and_shows_their_lineage() {
    let fake = FakeOpenAi::start().await;
    // researcher: keeps competitors.json, hands it to coder, expecting a summary.
    fake.script(
        "researcher",
        Step::tool_call(
            "artifact_put",
            json!({"name": "competitors.json", "text": TABLE}),
        ),
    );
    fake.script(
        "researcher",
        Step::tool_call_with("sessions_send", |request| {
            json!({"target": "coder", "message": "compare their APIs",
                   "artifacts": [last_result_id(request)],
                   "expect": {"type": "object", "required": ["summary", "audited"],
                              "properties": {"summary": {"type": "string"},
                                             "audited": {"type": "boolean"}}}})
        }),
    );
    fake.script("researcher", Step::reply("compared and audited"));
    // coder: makes api-comparison.json from it, has auditor check it.
    fake.script(
        "coder",
        Step::tool_call_with("artifact_put", |request| {
            json!({"name": "api-comparison.json", "text": "{\"acme\":\"REST\"}",
                   "inputs": [handed_id(request)]})
        }),
    );
    fake.script(
        "coder",
        Step::tool_call_with("sessions_send", |request| {
            json!({"target": "auditor", "message": "audit this comparison",
                   "artifacts": [last_result_id(request)],
                   "expect": {"type": "object", "required": ["verdict"],
                              "properties": {"verdict": {"enum": ["pass", "fail"]}}}})
        }),
    );
    fake.script(
        "coder",
        Step::reply(r#"{"summary": "acme is REST", "audited": true}"#),
    );
    // auditor: writes audit.md from the comparison and passes it.
    fake.script(
        "auditor",
        Step::tool_call_with("artifact_put", |request| {
            json!({"name": "audit.md", "text": "looks right", "inputs": [handed_id(request)]})
        }),
    );
    fake.script("auditor", Step::reply(r#"{"verdict": "pass"}"#));
    let bots = ["researcher", "coder", "auditor"];
    let gw = World::agents(&fake, &bots, "").await;

    gw.say("room", "alice", "@researcher compare the competitors' APIs")
        .await;
    gw.settle().await;

    let researcher = fake.tool_results("researcher");
    let competitors = researcher[0]["id"].as_str().unwrap().to_owned();
    let to_coder = &researcher[1];
    assert_eq!(to_coder["status"], "ok", "{to_coder}");
    assert_eq!(
        to_coder["output"],
        json!({"summary": "acme is REST", "audited": true})
    );
    let made = to_coder["artifacts"].as_array().unwrap();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(made[0]["name"], "api-comparison.json");
    assert_eq!(made[0]["bot"], "coder");
    assert_eq!(made[0]["inputs"], json!([competitors]));
    let comparison = made[0]["id"].as_str().unwrap().to_owned();

    let coder = fake.tool_results("coder");
    let to_auditor = &coder[1];
    assert_eq!(
        to_auditor["output"],
        json!({"verdict": "pass"}),
        "{to_auditor}"
    );
    let audit = &to_auditor["artifacts"][0];
    assert_eq!(audit["name"], "audit.md");
    assert_eq!(audit["bot"], "auditor");
    assert_eq!(audit["inputs"], json!([comparison]));

    // The lineage: competitors.json -> coder -> api-comparison.json -> auditor -> audit.md.
    let deliveries = gw.get("/api/deliveries").await;
    let all = deliveries["deliveries"].as_array().unwrap();
    assert_eq!(all.len(), 2, "{all:#?}");
    let by_target = |t: &str| all.iter().find(|d| d["target"] == t).unwrap().clone();
    let first = by_target("coder");
    assert_eq!(first["sender"], "researcher");
    assert_eq!(first["state"], "delivered");
    assert_eq!(first["artifacts_in"], json!([competitors]));
    assert_eq!(first["artifacts_out"][0]["id"], comparison.as_str());
    assert_eq!(first["artifacts_out"][0]["bot"], "coder");
    let second = by_target("auditor");
    assert_eq!(second["sender"], "coder");
    assert_eq!(second["artifacts_in"], json!([comparison]));
    assert_eq!(second["artifacts_out"][0]["name"], "audit.md");
    assert_eq!(second["artifacts_out"][0]["bot"], "auditor");
    assert_eq!(second["result"]["output"]["verdict"], "pass");
    gw.stop().await;
}
