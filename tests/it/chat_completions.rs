//! `/v1/chat/completions` and `/v1/models` with the official OpenAI request shapes, plain and
//! streaming (SSE), through the full pipeline as a local DM session.

use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{TestGateway, config_text, temp_db};

async fn completion(gw: &TestGateway, body: Value) -> reqwest::Response {
    gw.http
        .post(format!("{}/v1/chat/completions", gw.base))
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn models_lists_the_roster() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha", "beta"], ""), &db).await;
    let models: Value = gw
        .http
        .get(format!("{}/v1/models", gw.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["alpha", "beta"]);
    assert_eq!(models["object"], "list");
    gw.stop().await;
}

#[tokio::test]
async fn a_completion_runs_the_pipeline_in_a_dm_session_and_keeps_the_conversation() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], ""), &db).await;
    fake.script("alpha", Step::reply("Hello Ann."));
    let request = json!({
        "model": "alpha",
        "messages": [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Hi, I am Ann."}
        ],
        "user": "ann"
    });
    let response = completion(&gw, request).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "alpha");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    assert_eq!(body["choices"][0]["message"]["content"], "Hello Ann.");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");

    let again = json!({"model": "alpha", "messages": [{"role": "user", "content": "Who am I?"}], "user": "ann"});
    completion(&gw, again).await;
    let second = &fake.requests_for("alpha")[1];
    let contents: Vec<&str> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        contents.contains(&"Hi, I am Ann.") && contents.contains(&"Hello Ann."),
        "{contents:?}"
    );
    let transcript = gw.transcript("bot:alpha:local:alpha:dm:ann").await;
    assert_eq!(transcript[0]["speaker"], "ann");
    assert_eq!(transcript[1]["speaker"], "alpha");
    gw.stop().await;
}

#[tokio::test]
async fn streaming_answers_with_openai_sse_chunks() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], ""), &db).await;
    fake.script("alpha", Step::reply("streamed answer"));
    let request =
        json!({"model": "alpha", "stream": true, "messages": [{"role": "user", "content": "go"}]});
    let response = completion(&gw, request).await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let text = response.text().await.unwrap();
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "streamed answer");
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
    gw.stop().await;
}

#[tokio::test]
async fn bad_requests_get_clear_errors() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], ""), &db).await;
    let unknown = completion(
        &gw,
        json!({"model": "nobody", "messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    assert_eq!(unknown.status(), 404);
    let body: Value = unknown.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/v1/models")
    );
    let huge = "x".repeat(101 * 1024);
    let too_big = completion(
        &gw,
        json!({"model": "alpha", "messages": [{"role": "user", "content": huge}]}),
    )
    .await;
    assert_eq!(too_big.status(), 413);
    assert!(fake.requests_for("alpha").is_empty());
    gw.stop().await;
}

/// Every field `/v1/chat/completions` reads is bounded, and the refusal names it.
#[tokio::test]
async fn each_field_over_its_cap_is_refused_naming_it() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], ""), &db).await;
    let hello = json!([{"role": "user", "content": "hello"}]);
    let long_id = "a".repeat(257);
    let cases = [
        (
            json!({"model": long_id, "messages": hello}),
            413,
            "`model` is 257 bytes, over the 256",
        ),
        (
            json!({"model": "alpha", "bot_id": long_id, "messages": hello}),
            413,
            "`bot_id` is 257 bytes, over the 256",
        ),
        (
            json!({"model": "alpha", "user": "u".repeat(65), "messages": hello}),
            400,
            "1 to 64 characters",
        ),
        (
            json!({"model": "alpha", "messages": [{"role": "user", "content": "x".repeat(100 * 1024 + 1)}]}),
            413,
            "over 100 kB",
        ),
    ];
    for (body, status, says) in cases {
        let answer = completion(&gw, body).await;
        assert_eq!(answer.status(), status, "{says}");
        let answer: Value = answer.json().await.unwrap();
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
    assert!(fake.requests_for("alpha").is_empty());
    gw.stop().await;
}

/// What the official `openai` Python client does with a stream: prints each content delta as a
/// JSON line the moment it arrives.
const PYTHON_STREAM: &str = r#"
import json, sys
import openai
client = openai.OpenAI(base_url=sys.argv[1], api_key="unused", max_retries=0)
stream = client.chat.completions.create(
    model="alpha",
    messages=[{"role": "user", "content": "tell me slowly"}],
    stream=True,
)
for chunk in stream:
    if chunk.choices and chunk.choices[0].delta.content:
        print(json.dumps(chunk.choices[0].delta.content), flush=True)
print(json.dumps({"done": True}), flush=True)
"#;

#[tokio::test]
async fn the_openai_python_client_gets_the_first_token_before_the_model_has_finished() {
    use tokio::io::AsyncBufReadExt;

    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], ""), &db).await;
    let reply = "One, two, three, four, five, six, seven, eight, nine, ten: counted slowly.";
    fake.script(
        "alpha",
        Step::slow(reply, 6, std::time::Duration::from_millis(80)),
    );
    let mut child = tokio::process::Command::new("python3")
        .arg("-c")
        .arg(PYTHON_STREAM)
        .arg(format!("{}/v1", gw.base))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3 runs (the openai client comes from scripts/test-deps-python)");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut pieces = Vec::new();
    let mut first_at = None;
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let value: Value = serde_json::from_str(&line).unwrap();
            match value {
                Value::String(piece) => {
                    first_at.get_or_insert_with(tokio::time::Instant::now);
                    pieces.push(piece);
                }
                _ => break,
            }
        }
    };
    tokio::time::timeout(crate::support::gateway::DEADLINE, read)
        .await
        .expect("the stream ended in time");
    let out = child.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "the python client failed (run scripts/test-deps-python): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(pieces.concat(), reply);
    assert!(pieces.len() > 3, "not streamed: {pieces:?}");
    let finished = fake.finished()[0];
    let first_at = first_at.expect("a token");
    assert!(
        first_at + std::time::Duration::from_millis(300) < finished,
        "the first token came {:?} before the model finished",
        finished.saturating_duration_since(first_at)
    );
    gw.stop().await;
}
