//! The `openai` backend against the fake OpenAI-compatible server (and a few tiny axum servers),
//! plus tests of the fake itself.

use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use baton::backend::{
    Backend, BackendError, ChatLine, MAX_TOOL_ROUNDS, NoSink, NoTools, OpenAiBackend,
    OpenAiSettings, Role, ToolSpec,
};
use baton_contract::Secret;
use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::turns::{RecordingTools, closed_port_url, serve, turn};

const SECRET_KEY: &str = "sk-test-0123456789-very-secret";

fn sessions_send_spec() -> ToolSpec {
    ToolSpec {
        name: "sessions_send".into(),
        description: "Send a message to another bot".into(),
        parameters: json!({
            "type": "object",
            "properties": {"target": {"type": "string"}, "message": {"type": "string"}},
            "required": ["target", "message"],
        }),
    }
}

fn settings(base_url: &str) -> OpenAiSettings {
    let mut settings = OpenAiSettings::new(base_url, "default-model");
    settings.retry_base_delay = Duration::from_millis(5);
    settings.idle_timeout = Duration::from_secs(10);
    settings
}

fn openai(base_url: &str) -> OpenAiBackend {
    OpenAiBackend::new(settings(base_url)).unwrap()
}

fn roles(request: &Value) -> Vec<&str> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect()
}

// ---- openai ------------------------------------------------------------------------------------

/// A model that never stops answering, whole or streamed: the read stops at the cap, the call
/// fails at once (not retried) with the cap in its reason, and the next call is served.
#[tokio::test]
async fn openai_answer_past_the_read_cap_fails_the_call_unread() {
    let fake = FakeOpenAi::start().await;
    let mut settings = settings(&fake.base_url);
    settings.max_read = 1 << 20;
    let backend = OpenAiBackend::new(settings).unwrap();
    for streamed in [false, true] {
        fake.script("gpt-test", Step::Endless);
        let asked = Instant::now();
        let request = turn("gpt-test", "say everything");
        let err = if streamed {
            backend.run_streaming(&request, &NoTools, &NoSink).await
        } else {
            backend.run(&request, &NoTools).await
        }
        .unwrap_err();
        assert!(
            matches!(err, BackendError::TooLong(max) if max == 1 << 20),
            "streamed {streamed}: {err:?}"
        );
        assert!(err.to_string().contains("max_reply_bytes"), "{err}");
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "{:?}",
            asked.elapsed()
        );
    }
    assert_eq!(fake.requests_for("gpt-test").len(), 2, "never retried");
    let reply = backend
        .run(&turn("gpt-test", "hi"), &NoTools)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("echo: hi"));
}

#[tokio::test]
async fn openai_plain_reply() {
    let fake = FakeOpenAi::start().await;
    let reply = openai(&fake.base_url)
        .run(&turn("gpt-test", "hello there"), &NoTools)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("echo: hello there"));
    assert_eq!(reply.model, "gpt-test");

    fake.script("gpt-test", Step::reply("scripted answer"));
    let reply = openai(&fake.base_url)
        .run(&turn("gpt-test", "again"), &NoTools)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("scripted answer"));
    assert_eq!(fake.requests_for("gpt-test").len(), 2);
}

#[tokio::test]
async fn openai_uses_settings_model_when_turn_names_none() {
    let fake = FakeOpenAi::start().await;
    let reply = openai(&fake.base_url)
        .run(&turn("", "hi"), &NoTools)
        .await
        .unwrap();
    assert_eq!(reply.model, "default-model");
    assert_eq!(fake.requests_for("default-model").len(), 1);
}

#[tokio::test]
async fn openai_request_body_shape() {
    let fake = FakeOpenAi::start().await;
    let mut request = turn("gpt-shape", "what now?");
    let mut earlier = ChatLine::new(Role::User, "earlier question");
    earlier.name = Some("Ada Lovelace".into());
    request.messages.insert(1, earlier);
    request
        .messages
        .insert(2, ChatLine::new(Role::Assistant, "earlier answer"));
    request.messages[3].name = Some("bot:caid".into());
    request.tools = vec![sessions_send_spec()].into();

    openai(&fake.base_url)
        .run(&request, &NoTools)
        .await
        .unwrap();

    let sent = fake.requests();
    assert_eq!(sent.len(), 1);
    let body = &sent[0];
    assert_eq!(body["model"], "gpt-shape");
    assert_eq!(roles(body), ["system", "user", "assistant", "user"]);
    assert_eq!(body["messages"][0]["content"], "You are Snark.");
    assert_eq!(body["messages"][1]["name"], "Ada_Lovelace");
    assert!(body["messages"][2].get("name").is_none());
    assert_eq!(body["messages"][3]["name"], "bot_caid");
    assert_eq!(body["messages"][3]["content"], "what now?");
    assert_eq!(
        body["tools"],
        json!([{
            "type": "function",
            "function": {
                "name": "sessions_send",
                "description": "Send a message to another bot",
                "parameters": sessions_send_spec().parameters,
            }
        }])
    );

    // No tools: no `tools` key at all (some servers reject an empty list).
    openai(&fake.base_url)
        .run(&turn("gpt-shape", "x"), &NoTools)
        .await
        .unwrap();
    assert!(fake.requests()[1].get("tools").is_none());
}

#[tokio::test]
async fn openai_tool_call_round_trip() {
    let fake = FakeOpenAi::start().await;
    let args = json!({"target": "caid", "message": "write a haiku"});
    fake.script("gpt-tools", Step::tool_call("sessions_send", args.clone()));
    fake.script("gpt-tools", Step::reply("caid says: leaves fall"));
    let tools = RecordingTools::answering(json!({"status": "ok", "reply": "leaves fall"}));
    let mut request = turn("gpt-tools", "ask caid for a haiku");
    request.tools = vec![sessions_send_spec()].into();

    let reply = openai(&fake.base_url).run(&request, &tools).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("caid says: leaves fall"));

    let calls = tools.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "sessions_send");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].arguments).unwrap(),
        args
    );

    let sent = fake.requests_for("gpt-tools");
    assert_eq!(sent.len(), 2);
    let second = &sent[1];
    assert_eq!(roles(second), ["system", "user", "assistant", "tool"]);
    let assistant = &second["messages"][2];
    assert_eq!(assistant["content"], Value::Null);
    assert_eq!(assistant["tool_calls"][0]["id"], calls[0].id);
    assert_eq!(assistant["tool_calls"][0]["type"], "function");
    assert_eq!(
        assistant["tool_calls"][0]["function"]["name"],
        "sessions_send"
    );
    let tool = &second["messages"][3];
    assert_eq!(tool["tool_call_id"], calls[0].id.as_str());
    assert_eq!(
        serde_json::from_str::<Value>(tool["content"].as_str().unwrap()).unwrap(),
        json!({"status": "ok", "reply": "leaves fall"})
    );
    assert_eq!(second["tools"][0]["function"]["name"], "sessions_send");
}

#[tokio::test]
async fn openai_runs_every_call_of_a_round_in_order() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "gpt-multi",
        Step::ToolCalls(vec![
            ("bots_list".into(), json!({})),
            (
                "sessions_send".into(),
                json!({"target": "caid", "message": "x"}),
            ),
        ]),
    );
    fake.script("gpt-multi", Step::reply("done"));
    let tools = RecordingTools::answering(json!({"status": "ok"}));
    openai(&fake.base_url)
        .run(&turn("gpt-multi", "go"), &tools)
        .await
        .unwrap();
    let names: Vec<String> = tools.calls().into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["bots_list", "sessions_send"]);
    let second = &fake.requests()[1];
    assert_eq!(
        roles(second),
        ["system", "user", "assistant", "tool", "tool"]
    );
    assert_ne!(
        second["messages"][3]["tool_call_id"],
        second["messages"][4]["tool_call_id"]
    );
}

#[tokio::test]
async fn openai_tool_loop_is_bounded() {
    let fake = FakeOpenAi::start().await;
    for _ in 0..MAX_TOOL_ROUNDS + 3 {
        fake.script("gpt-loop", Step::tool_call("bots_list", json!({})));
    }
    let tools = RecordingTools::answering(json!({"bots": []}));
    let err = openai(&fake.base_url)
        .run(&turn("gpt-loop", "loop forever"), &tools)
        .await
        .unwrap_err();
    assert!(
        matches!(err, BackendError::ToolLoop(n) if n == MAX_TOOL_ROUNDS),
        "{err:?}"
    );
    assert_eq!(fake.requests().len(), MAX_TOOL_ROUNDS as usize);
    // The last round's calls are not run: no model would read their results.
    assert_eq!(tools.calls().len(), MAX_TOOL_ROUNDS as usize - 1);
}

#[tokio::test]
async fn openai_429_honours_retry_after_then_succeeds() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "gpt-limited",
        Step::Error {
            status: 429,
            retry_after: Some(1),
        },
    );
    fake.script("gpt-limited", Step::reply("made it"));
    let started = Instant::now();
    let reply = openai(&fake.base_url)
        .run(&turn("gpt-limited", "hi"), &NoTools)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("made it"));
    assert_eq!(fake.requests().len(), 2);
    // Base delay is 5 ms: only the Retry-After header explains a one-second wait.
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn openai_5xx_retried_until_attempts_run_out() {
    let fake = FakeOpenAi::start().await;
    for _ in 0..5 {
        fake.script(
            "gpt-down",
            Step::Error {
                status: 500,
                retry_after: None,
            },
        );
    }
    let mut settings = settings(&fake.base_url);
    settings.max_attempts = 3;
    let err = OpenAiBackend::new(settings)
        .unwrap()
        .run(&turn("gpt-down", "hi"), &NoTools)
        .await
        .unwrap_err();
    match &err {
        BackendError::Status {
            status,
            attempts,
            message,
        } => {
            assert_eq!(*status, 500);
            assert_eq!(*attempts, 3);
            assert!(message.contains("The server had an error"), "{message}");
        }
        other => panic!("expected Status, got {other:?}"),
    }
    assert_eq!(fake.requests().len(), 3);
    assert!(err.to_string().contains("after 3 attempt(s)"), "{err}");
}

#[tokio::test]
async fn openai_client_errors_are_not_retried() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "gpt-missing",
        Step::Error {
            status: 404,
            retry_after: None,
        },
    );
    let err = openai(&fake.base_url)
        .run(&turn("gpt-missing", "hi"), &NoTools)
        .await
        .unwrap_err();
    // A permanent error: named with its model and what to fix, and not retried.
    assert!(
        matches!(&err, BackendError::Refused { model, status: 404, message, .. } if model == "gpt-missing" && message.contains("does not exist")),
        "{err:?}"
    );
    assert!(err.is_permanent());
    let text = err.to_string();
    assert!(
        text.contains("`gpt-missing`") && text.contains("check the bot's `model`"),
        "{text}"
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn openai_sends_api_key_as_bearer_and_never_shows_it() {
    let fake = FakeOpenAi::start().await;
    fake.require_api_key(SECRET_KEY);
    let keyed = |url: &str| {
        OpenAiBackend::new(settings(url).with_api_key(Some(Secret::new(SECRET_KEY)))).unwrap()
    };
    keyed(&fake.base_url)
        .run(&turn("gpt-key", "hi"), &NoTools)
        .await
        .unwrap();
    assert_eq!(
        fake.authorizations(),
        [Some(format!("Bearer {SECRET_KEY}"))]
    );

    // A server that echoes the credential it got into its error message.
    let echoing = serve(Router::new().route(
        "/v1/chat/completions",
        post(|headers: HeaderMap| async move {
            let auth = headers["authorization"].to_str().unwrap().to_owned();
            (
                StatusCode::UNAUTHORIZED,
                axum::Json(
                    json!({"error": {"message": format!("bad credential {auth}"),
                    "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
                ),
            )
        }),
    ))
    .await;
    let err = keyed(&format!("{echoing}/v1"))
        .run(&turn("gpt-key", "hi"), &NoTools)
        .await
        .unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(
        matches!(err, BackendError::Refused { status: 401, .. }),
        "{shown}"
    );
    assert!(!shown.contains(SECRET_KEY), "{shown}");
    assert!(shown.contains("[redacted]"), "{shown}");

    // Unreachable and settings' Debug output do not show it either.
    let mut unreachable =
        settings(&closed_port_url().await).with_api_key(Some(Secret::new(SECRET_KEY)));
    unreachable.max_attempts = 1;
    assert!(!format!("{unreachable:?}").contains(SECRET_KEY));
    let err = OpenAiBackend::new(unreachable)
        .unwrap()
        .run(&turn("gpt-key", "hi"), &NoTools)
        .await
        .unwrap_err();
    assert!(!format!("{err} {err:?}").contains(SECRET_KEY));
}

#[tokio::test]
async fn openai_unreachable_after_retries() {
    let mut settings = settings(&format!("{}/v1", closed_port_url().await));
    settings.max_attempts = 2;
    let err = OpenAiBackend::new(settings)
        .unwrap()
        .run(&turn("gpt-x", "hi"), &NoTools)
        .await
        .unwrap_err();
    match err {
        BackendError::Unreachable(text) => {
            assert!(text.contains("127.0.0.1"), "{text}");
            assert!(text.contains("after 2 attempt(s)"), "{text}");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn openai_timeout_is_unreachable() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "gpt-slow",
        Step::Delay(Duration::from_secs(5), Box::new(Step::reply("too late"))),
    );
    let mut settings = settings(&fake.base_url);
    settings.idle_timeout = Duration::from_millis(200);
    settings.max_attempts = 1;
    let started = Instant::now();
    let err = OpenAiBackend::new(settings)
        .unwrap()
        .run(&turn("gpt-slow", "hi"), &NoTools)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BackendError::Unreachable(text) if text.contains("was silent")),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test]
async fn openai_unparseable_body_is_bad_response() {
    let url = serve(Router::new().route(
        "/v1/chat/completions",
        post(|| async { "<html>surprise</html>" }),
    ))
    .await;
    let err = openai(&format!("{url}/v1/"))
        .run(&turn("m", "hi"), &NoTools)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BackendError::BadResponse(text) if text.contains("surprise")),
        "{err:?}"
    );
}

#[test]
fn openai_base_url_resolution() {
    let resolve = OpenAiSettings::resolve_base_url;
    assert_eq!(resolve(None, None), OpenAiSettings::DEFAULT_BASE_URL);
    assert_eq!(
        resolve(None, Some("http://127.0.0.1:11434/v1")),
        "http://127.0.0.1:11434/v1"
    );
    assert_eq!(
        resolve(
            Some("http://vllm:8000/v1/"),
            Some("http://127.0.0.1:11434/v1")
        ),
        "http://vllm:8000/v1"
    );
    assert_eq!(resolve(Some(""), None), OpenAiSettings::DEFAULT_BASE_URL);
}

// ---- the fake itself ---------------------------------------------------------------------------

#[tokio::test]
async fn fake_proves_parallel_requests_without_timing() {
    let fake = FakeOpenAi::start().await;
    fake.hold_until_in_flight(2);
    let backend = openai(&fake.base_url);
    let (one, two) = (turn("gpt-a", "one"), turn("gpt-b", "two"));
    let (a, b) = tokio::join!(backend.run(&one, &NoTools), backend.run(&two, &NoTools));
    assert_eq!(a.unwrap().text.as_deref(), Some("echo: one"));
    assert_eq!(b.unwrap().text.as_deref(), Some("echo: two"));
    assert_eq!(fake.max_in_flight(), 2);

    // Once released, later requests are not held.
    let started = Instant::now();
    backend
        .run(&turn("gpt-a", "three"), &NoTools)
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(fake.max_in_flight(), 2);
}

#[tokio::test]
async fn fake_lists_models_on_loopback() {
    let fake = FakeOpenAi::start().await;
    fake.script("gpt-listed", Step::reply("x"));
    let client = reqwest::Client::new();
    let models: Value = client
        .get(format!("{}/models", fake.base_url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"gpt-listed"), "{ids:?}");
    assert!(fake.base_url.starts_with("http://127.0.0.1:"));

    let waited = fake.wait_for_requests(1, Duration::from_millis(50)).await;
    assert!(waited.is_empty());
}
