//! The requests baton makes to agents carry the trace of the turn that makes them (SPEC 13):
//! the `http` backend's, the `a2a` backend's and a `sessions_send` to an `[[a2a.peers]]` peer.
//! One agent on loopback answers all three and keeps each request's `traceparent`; each must
//! name a span of its trigger's trace (the agent call's span, or the send's), sampled.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::{Value, json};

use super::{Traced, WAIT, climb};
use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::otlp::{Collector, Span};
use crate::support::process::eventually;
use crate::support::turns::serve;

/// Each request's path and `traceparent` header, in arrival order.
type Heard = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// An agent answering `POST /http` as the `http` backend expects (`{"reply": ...}`) and
/// `POST /a2a/<name>` with one JSON-RPC message (what both the `a2a` backend and a peer's send
/// take), saying who answered.
async fn agent() -> (String, Heard) {
    let heard = Heard::default();
    let keep = |heard: &Heard, path: String, headers: &HeaderMap| {
        let traceparent = headers.get("traceparent").map(|v| v.to_str().unwrap());
        heard
            .lock()
            .unwrap()
            .push((path, traceparent.map(str::to_owned)));
    };
    let app = Router::new()
        .route(
            "/http",
            post(
                move |State(heard): State<Heard>, headers: HeaderMap| async move {
                    keep(&heard, "/http".into(), &headers);
                    axum::Json(json!({"reply": "the http agent says hi"}))
                },
            ),
        )
        .route(
            "/a2a/{name}",
            post(
                move |State(heard): State<Heard>,
                      Path(name): Path<String>,
                      headers: HeaderMap,
                      axum::Json(call): axum::Json<Value>| async move {
                    keep(&heard, format!("/a2a/{name}"), &headers);
                    let said = format!("the {name} agent says hi");
                    axum::Json(
                        json!({"jsonrpc": "2.0", "id": call["id"], "result": {"message": {
                            "messageId": "answer", "role": "ROLE_AGENT", "parts": [{"text": said}],
                        }}}),
                    )
                },
            ),
        )
        .with_state(heard.clone());
    (serve(app).await, heard)
}

#[tokio::test]
async fn requests_to_agents_carry_the_turns_trace_under_the_call_that_makes_them() {
    let collector = Collector::start().await;
    let model = FakeOpenAi::start().await;
    let ask = json!({"target": "a2a:peer", "message": "hi", "timeout_seconds": 20});
    model.script("asker", Step::tool_call("sessions_send", ask));
    model.script("asker", Step::reply("the peer says hi"));
    let (url, heard) = agent().await;
    let agents = format!(
        "\n[[bots]]\nid = \"agent\"\nbackend = \"http\"\nurl = \"{url}/http\"\n\
         \n[[bots]]\nid = \"remote\"\nbackend = \"a2a\"\nurl = \"{url}/a2a/remote\"\n\
         \n[[a2a.peers]]\nid = \"peer\"\nurl = \"{url}/a2a/peer\"\n"
    );
    let gw = Traced::start_with(
        &model,
        &agents,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint)],
    )
    .await;

    // Each request, the bot whose turn made it, and the span it must be made under.
    let cases = [
        ("/http", "agent", "invoke_agent"),
        ("/a2a/remote", "remote", "invoke_agent"),
        ("/a2a/peer", "asker", "sessions_send a2a:peer"),
    ];
    for (path, bot, under) in cases {
        gw.say(&format!("@{bot} hi")).await;
        eventually(WAIT, "the bot's reply", || async {
            gw.said_by(bot).await.first().map(|m| m["text"].clone())
        })
        .await;
        let header = heard
            .lock()
            .unwrap()
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, h)| h.clone())
            .unwrap_or_else(|| panic!("the agent got {path}"))
            .unwrap_or_else(|| panic!("{path} carries a traceparent"));
        let parts: Vec<&str> = header.split('-').collect();
        let (trace_id, parent) = (parts[1], parts[2]);
        assert_eq!(parts[3], "01", "sampled: {header}");
        // The span it names, in the trace of the message that woke the bot.
        let trace = collector
            .wait_for("the span the request names and the bot's turn", |spans| {
                let trace: Vec<Span> = spans
                    .iter()
                    .filter(|s| s.trace_id == trace_id)
                    .cloned()
                    .collect();
                let has = |f: &dyn Fn(&Span) -> bool| trace.iter().any(f);
                let whole = has(&|s| s.span_id == parent)
                    && has(&|s| s.name == format!("turn {bot}"))
                    && has(&|s| s.name == "inbound");
                whole.then_some(trace)
            })
            .await;
        let named = trace.iter().find(|s| s.span_id == parent).unwrap();
        assert_eq!(named.name, under, "{path}: {header}");
        // ... which is the bot's turn's (through its tool call for a send).
        let turn = climb(&trace, named, |s| s.name.starts_with("turn "));
        assert_eq!(turn.name, format!("turn {bot}"), "{path}");
    }
}
