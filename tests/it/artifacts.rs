//! Artifacts end to end: a bot on the openai backend (answered by the scripted fake model) puts,
//! reads and lists artifacts with its tools in a real gateway (store file, HTTP on loopback);
//! the HTTP API serves what it made, and the size cap refuses with its reason.

use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::config_with;
use crate::support::world::World;

const SCOUT_ROOM: &str = "bot:scout:local:scout:room";
const TABLE: &str = r#"[{"name":"acme","price":10}]"#;

/// The id in the first tool result of the request: the artifact the turn just put.
fn first_put_id(request: &Value) -> Value {
    let lines = request["messages"].as_array().unwrap();
    let result = lines.iter().find(|l| l["role"] == "tool").unwrap();
    let parsed: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    parsed["id"].clone()
}

#[tokio::test]
async fn a_bot_puts_reads_and_lists_artifacts_and_the_api_serves_them() {
    let fake = FakeOpenAi::start().await;
    let big = "x".repeat(300);
    fake.script(
        "scout",
        Step::ToolCalls(vec![
            (
                "artifact_put".into(),
                json!({"name": "competitors.json", "text": TABLE}),
            ),
            (
                "artifact_put".into(),
                json!({"name": "huge.txt", "text": big}),
            ),
            (
                "artifact_put".into(),
                json!({"name": "derived.json", "text": "{}", "inputs": ["art-nosuch"]}),
            ),
        ]),
    );
    fake.script(
        "scout",
        Step::tool_call_with(
            "artifact_get",
            |request| json!({"id": first_put_id(request)}),
        ),
    );
    fake.script("scout", Step::tool_call("artifacts_list", json!({})));
    fake.script("scout", Step::reply("kept the table"));
    let config = config_with(
        &fake.base_url,
        &[("scout", "tools = [\"artifact*\"]")],
        "\n[artifacts]\nmax_bytes = 256\n",
    );
    let gw = World::start(&config).await;

    gw.say("room", "alice", "@scout collect the competitors")
        .await;
    gw.settle().await;

    let results = fake.tool_results("scout");
    assert_eq!(results.len(), 5, "{results:#?}");
    let put = &results[0];
    assert_eq!(put["status"], "ok", "{put}");
    let id = put["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("art-"), "{id}");
    let record = &put["artifact"];
    assert_eq!(
        record["media_type"], "application/json",
        "guessed from the name"
    );
    assert_eq!(record["bytes"], TABLE.len());
    let run_id = record["run_id"].as_str().expect("made by the turn's run");

    let refused = &results[1];
    assert_eq!(refused["status"], "refused", "{refused}");
    assert_eq!(refused["reason"], "too_large");
    let why = refused["message"].as_str().unwrap();
    assert!(
        why.contains("300 bytes") && why.contains("max_bytes"),
        "{why}"
    );

    let unknown_input = &results[2];
    assert_eq!(unknown_input["status"], "error", "{unknown_input}");
    assert!(
        unknown_input["error"]
            .as_str()
            .unwrap()
            .contains("art-nosuch"),
        "{unknown_input}"
    );

    let got = &results[3];
    assert_eq!(got["status"], "ok", "{got}");
    assert_eq!(got["text"], TABLE, "text content comes inline");
    assert_eq!(got["artifact"]["id"], id.as_str());

    let listed = results[4]["artifacts"].as_array().unwrap();
    let ids: Vec<&str> = listed.iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [id.as_str()], "only what was stored: {listed:?}");

    // The HTTP API: the record, the bytes, the lists by session and by run.
    let meta = gw.get(&format!("/api/artifacts/{id}")).await;
    assert_eq!(meta["name"], "competitors.json");
    assert_eq!(meta["bot"], "scout");
    assert_eq!(meta["session"], SCOUT_ROOM);
    assert_eq!(meta["run_id"], run_id);
    assert_eq!(meta["content_url"], format!("/api/artifacts/{id}/content"));
    let sha = meta["sha256"].as_str().unwrap();
    assert_eq!(sha, baton::store::sha256_hex(TABLE.as_bytes()));

    let response = gw
        .http
        .get(format!("{}/api/artifacts/{id}/content", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(header("content-type").as_deref(), Some("application/json"));
    assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
    assert!(
        header("content-disposition").is_some_and(|d| d.starts_with("attachment")),
        "served as a download"
    );
    assert_eq!(response.text().await.unwrap(), TABLE);

    let by_run = gw.get(&format!("/api/artifacts?run={run_id}")).await;
    assert_eq!(by_run["artifacts"].as_array().unwrap().len(), 1);
    let by_session = gw
        .get(&format!("/api/artifacts?session={SCOUT_ROOM}"))
        .await;
    assert_eq!(by_session["artifacts"][0]["id"], id.as_str());

    let missing = gw
        .http
        .get(format!("{}/api/artifacts/art-nosuch/content", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    gw.stop().await;
}

#[tokio::test]
async fn binary_content_goes_in_as_base64_and_comes_back_the_same() {
    let fake = FakeOpenAi::start().await;
    // A PNG signature and a byte that is not UTF-8.
    let png: &[u8] = &[0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0xff];
    let encoded = "iVBORw0KGgr/";
    fake.script(
        "scout",
        Step::tool_call(
            "artifact_put",
            json!({"name": "logo.png", "base64": encoded}),
        ),
    );
    fake.script(
        "scout",
        Step::tool_call_with(
            "artifact_get",
            |request| json!({"id": first_put_id(request)}),
        ),
    );
    fake.script("scout", Step::reply("stored"));
    let config = config_with(&fake.base_url, &[("scout", "tools = [\"artifact*\"]")], "");
    let gw = World::start(&config).await;

    gw.say("room", "alice", "@scout keep the logo").await;
    gw.settle().await;

    let results = fake.tool_results("scout");
    assert_eq!(results.len(), 2, "{results:#?}");
    let id = results[0]["id"].as_str().unwrap();
    assert_eq!(results[0]["artifact"]["media_type"], "image/png");
    assert_eq!(results[1]["base64"], encoded, "binary comes back as base64");
    let bytes = gw
        .http
        .get(format!("{}/api/artifacts/{id}/content", gw.base))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(&bytes[..], png);
    gw.stop().await;
}
