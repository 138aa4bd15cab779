//! The `http` backend against a tiny axum agent, the `command` backend against `sh -c` scripts,
//! and the `echo` backend's directives through a recording executor.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use baton::turn::{
    Backend, BackendError, ChatLine, CommandBackend, EchoBackend, HttpBackend, NoTools, Role,
};
use serde_json::{Value, json};
use support::turns::{RecordingTools, closed_port_url, serve, turn};

// ---- http --------------------------------------------------------------------------------------

/// A tiny agent: `/reply` answers with what it got, `/silent` stays silent, `/fail` fails.
async fn agent() -> (String, Arc<AtomicUsize>, Arc<Mutex<Vec<Value>>>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    type AgentState = (Arc<AtomicUsize>, Arc<Mutex<Vec<Value>>>);
    let app =
        Router::new()
            .route(
                "/reply",
                post(
                    |State((hits, seen)): State<AgentState>,
                     axum::Json(turn): axum::Json<Value>| async move {
                        hits.fetch_add(1, Ordering::SeqCst);
                        let text = turn["messages"][1]["content"]
                            .as_str()
                            .unwrap_or("")
                            .to_owned();
                        seen.lock().unwrap().push(turn);
                        axum::Json(
                            json!({"reply": format!("agent got: {text}"), "model": "agent-7"}),
                        )
                    },
                ),
            )
            .route(
                "/silent",
                post(|State((hits, _)): State<AgentState>| async move {
                    hits.fetch_add(1, Ordering::SeqCst);
                    axum::Json(json!({"silent": true}))
                }),
            )
            .route(
                "/fail",
                post(|State((hits, _)): State<AgentState>| async move {
                    hits.fetch_add(1, Ordering::SeqCst);
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        axum::Json(json!({"error": "agent overloaded"})),
                    )
                }),
            )
            .with_state((hits.clone(), seen.clone()));
    (serve(app).await, hits, seen)
}

#[tokio::test]
async fn http_reply_posts_the_turn() {
    let (url, _, seen) = agent().await;
    let reply = HttpBackend::new(format!("{url}/reply"))
        .unwrap()
        .run(&turn("", "hello agent"), &NoTools)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("agent got: hello agent"));
    assert_eq!(reply.model, "agent-7");
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0]["bot"], "snark");
    assert_eq!(seen[0]["session"], "bot:snark:local:snark:c1");
    assert_eq!(seen[0]["messages"][0]["role"], "system");
    assert_eq!(seen[0]["messages"][1]["role"], "user");
}

#[tokio::test]
async fn http_silent_is_explicit_silence() {
    let (url, _, _) = agent().await;
    let reply = HttpBackend::new(format!("{url}/silent"))
        .unwrap()
        .run(&turn("", "psst"), &NoTools)
        .await
        .unwrap();
    assert_eq!(reply.text, None);
}

#[tokio::test]
async fn http_error_status_is_not_retried() {
    let (url, hits, _) = agent().await;
    let err = HttpBackend::new(format!("{url}/fail"))
        .unwrap()
        .run(&turn("", "hi"), &NoTools)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BackendError::Status { status: 503, attempts: 1, message } if message == "agent overloaded"),
        "{err:?}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn http_unreachable() {
    let err = HttpBackend::new(format!("{}/agent", closed_port_url().await))
        .unwrap()
        .run(&turn("", "hi"), &NoTools)
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::Unreachable(_)), "{err:?}");
}

#[tokio::test]
async fn http_answer_past_the_read_bound_fails_the_turn_unread() {
    let app = Router::new().route(
        "/big",
        post(|| async { axum::Json(json!({"reply": "y".repeat(200_000)})) }),
    );
    let url = serve(app).await;
    let err = HttpBackend::new(format!("{url}/big"))
        .unwrap()
        .with_max_read(10_000)
        .run(&turn("", "hi"), &NoTools)
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::TooLong(10_000)), "{err:?}");
}

// ---- command -----------------------------------------------------------------------------------

fn sh(script: &str) -> CommandBackend {
    CommandBackend::new(vec!["sh".into(), "-c".into(), script.into()])
}

#[tokio::test]
async fn command_reads_the_turn_on_stdin() {
    let script = r#"input=$(cat)
case "$input" in
  *'"content":"hello command"'*'"session":"bot:snark:local:snark:c1"'*) echo "  $BATON_BOT saw the turn  " ;;
  *) echo "wrong input: $input" ;;
esac"#;
    let reply = sh(script)
        .run(&turn("", "hello command"), &NoTools)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("snark saw the turn"));
    assert_eq!(reply.model, "command");
}

#[tokio::test]
async fn command_json_reply_and_silence() {
    let reply = sh(r#"cat >/dev/null; printf '{"reply":"structured","model":"cli-agent"}\n'"#)
        .run(&turn("", "x"), &NoTools)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("structured"));
    assert_eq!(reply.model, "cli-agent");

    let reply = sh(r#"cat >/dev/null; echo '{"silent": true}'"#)
        .run(&turn("", "x"), &NoTools)
        .await
        .unwrap();
    assert_eq!(reply.text, None);

    // A JSON object in neither form is plain text.
    let reply = sh(r#"echo '{"other": 1}'"#)
        .run(&turn("", "x"), &NoTools)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some(r#"{"other": 1}"#));
}

#[tokio::test]
async fn command_failure_reports_status_and_stderr_tail() {
    let script = r#"cat >/dev/null
for i in 1 2 3 4 5 6 7; do echo "noise $i" >&2; done
echo "fatal: model file missing" >&2
exit 3"#;
    let err = sh(script).run(&turn("", "x"), &NoTools).await.unwrap_err();
    let BackendError::Command(text) = &err else {
        panic!("expected Command, got {err:?}");
    };
    assert!(text.contains("exited with status 3"), "{text}");
    assert!(text.contains("fatal: model file missing"), "{text}");
    assert!(text.contains("noise 7"), "{text}");
    assert!(!text.contains("noise 1"), "{text}");
}

#[tokio::test]
async fn command_output_past_the_read_bound_fails_the_turn_and_kills_it() {
    let started = Instant::now();
    let err = sh("yes")
        .with_max_read(10_000)
        .run(&turn("", "hi"), &NoTools)
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::TooLong(10_000)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn command_timeout_kills_the_program() {
    let started = Instant::now();
    let err = sh("sleep 30")
        .with_timeout(Duration::from_millis(200))
        .run(&turn("", "x"), &NoTools)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, BackendError::Command(text) if text.contains("killed")),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn command_that_ignores_stdin_still_replies() {
    let reply = sh("echo hi").run(&turn("", "x"), &NoTools).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("hi"));
    let err = CommandBackend::new(Vec::new())
        .run(&turn("", "x"), &NoTools)
        .await
        .unwrap_err();
    assert!(matches!(err, BackendError::Command(_)));
}

// ---- echo --------------------------------------------------------------------------------------

#[tokio::test]
async fn echo_plain() {
    let tools = RecordingTools::answering(json!({}));
    let reply = EchoBackend::new()
        .run(&turn("", "  hello world "), &tools)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("hello world"));
    assert_eq!(reply.model, "echo");
    assert!(tools.calls().is_empty());
}

#[tokio::test]
async fn echo_strips_bot_prefix_and_mentions() {
    let mut request = turn("", "@echo @other   what's up");
    request
        .messages
        .push(ChatLine::new(Role::Assistant, "not this"));
    let reply = EchoBackend::new().run(&request, &NoTools).await.unwrap();
    assert_eq!(reply.text.as_deref(), Some("what's up"));

    let reply = EchoBackend::new()
        .run(
            &turn("", "Message from bot 'snark': @echo relay me"),
            &NoTools,
        )
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("relay me"));
}

#[tokio::test]
async fn echo_ask_directive_calls_sessions_send() {
    let tools = RecordingTools::answering(json!({"status": "ok", "reply": "pong", "bot": "caid"}));
    let reply = EchoBackend::new()
        .run(&turn("", "@echo ask @caid: ping please"), &tools)
        .await
        .unwrap();
    assert_eq!(reply.text.as_deref(), Some("pong"));
    let calls = tools.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "sessions_send");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].arguments).unwrap(),
        json!({"target": "caid", "message": "ping please"})
    );

    let refused = RecordingTools::answering(json!({"status": "refused", "reason": "max_depth"}));
    let reply = EchoBackend::new()
        .run(&turn("", "ask @caid: again"), &refused)
        .await
        .unwrap();
    assert_eq!(
        reply.text.as_deref(),
        Some("sessions_send to caid: refused (max_depth)")
    );
}
