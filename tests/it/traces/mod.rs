//! OpenTelemetry traces (SPEC section 13), exported by a real `baton run` to a collector on
//! loopback that decodes the OTLP it receives (`tests/support/otlp.rs`):
//!
//! - a mention that delegates to another bot (`sessions_send`) is one trace holding both bots'
//!   turns and model calls as one tree; both fake-model requests carry that trace's
//!   `traceparent`, under their model-call span; the model spans carry the fake's token usage;
//! - a `/v1/chat/completions` request carrying `traceparent` is continued (over OTLP/JSON),
//!   and so are a local room post and an A2A call carrying one (over both A2A bindings): the
//!   turn it wakes runs in the caller's trace;
//! - a `sessions_send` that timed out and was answered late: the woken turn's span links to the
//!   send's;
//! - a collector that is down fails no turn, and its dropped spans are counted in `/metrics`;
//!   so are the spans ended while the export queue is full behind a collector that never answers.
//!
//! - the same delegation across two `baton run` instances on PostgreSQL, asker's account on one
//!   and helper's on the other: the context travels with the delivery.
//!
//! The requests baton makes to agents (`http` and `a2a` backends, A2A peers) carry the trace
//! too: `agents.rs`.
//!
//! Every wait is on a condition with a deadline.

mod agents;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::fake_slack::FakeSlack;
use crate::support::gateway::config_with;
use crate::support::instances::{Instances, held, mention};
use crate::support::otlp::{Collector, Span};
use crate::support::process::{Running, baton, eventually};

const WAIT: Duration = Duration::from_secs(20);

/// A `baton run` on SQLite with `asker` and `helper` (both may call every tool) on the fake
/// model, exporting traces as `env` says, logging JSON.
struct Traced {
    process: Running,
    base: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Traced {
    async fn start(model: &FakeOpenAi, env: &[(&str, &str)]) -> Traced {
        Traced::start_with(model, "", env).await
    }

    /// [`Traced::start`] with `extra` appended to the config (more bots, `[a2a]`).
    async fn start_with(model: &FakeOpenAi, extra: &str, env: &[(&str, &str)]) -> Traced {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("baton.toml");
        let bots = [("asker", "tools = [\"*\"]"), ("helper", "tools = [\"*\"]")];
        std::fs::write(&config, config_with(&model.base_url, &bots, extra)).unwrap();
        let mut cmd = baton(dir.path());
        cmd.args(["--log-format", "json", "run", "--listen", "127.0.0.1:0"])
            .arg("--config")
            .arg(&config)
            .arg("--database")
            .arg(dir.path().join("baton.db"))
            .env("RUST_LOG", "info,baton=debug")
            // Exported within a moment, not the default 5 s.
            .env("OTEL_BSP_SCHEDULE_DELAY", "50");
        for (name, value) in env {
            cmd.env(name, value);
        }
        let (process, out) = Running::spawn(cmd);
        let base = process.base_url(out).await;
        Traced {
            process,
            base,
            http: reqwest::Client::new(),
            _dir: dir,
        }
    }

    async fn say(&self, text: &str) {
        self.say_under(text, None).await;
    }

    /// Posts `text` to the local room, with the caller's `traceparent` header if given.
    async fn say_under(&self, text: &str, traceparent: Option<&str>) {
        let mut request = self
            .http
            .post(format!("{}/api/local/rooms/room/messages", self.base))
            .json(&json!({"sender": "alice", "text": text}));
        if let Some(traceparent) = traceparent {
            request = request.header("traceparent", traceparent);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 202, "post refused");
    }

    async fn said_by(&self, bot: &str) -> Vec<Value> {
        let all: Vec<Value> = self
            .http
            .get(format!("{}/api/local/rooms/room/messages", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        all.into_iter().filter(|m| m["author"] == bot).collect()
    }

    async fn metrics(&self) -> String {
        let url = format!("{}/metrics", self.base);
        self.http
            .get(url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// `baton_trace_spans_dropped_total` on `/metrics`.
    async fn dropped(&self) -> Option<u64> {
        let metrics = self.metrics().await;
        let line = metrics
            .lines()
            .find(|l| l.starts_with("baton_trace_spans_dropped_total "))?;
        line.rsplit(' ').next()?.parse().ok()
    }
}

/// The delegation every test here scripts: asker sends helper `ping` and waits, helper answers
/// `pong`, asker replies with it. Every answer reports 11 prompt and 7 completion tokens.
pub(crate) fn script_delegation(model: &FakeOpenAi) {
    model.report_usage(11, 7);
    let ask = json!({"target": "helper", "message": "ping", "timeout_seconds": 20});
    model.script("asker", Step::tool_call("sessions_send", ask));
    model.script("helper", Step::reply("pong"));
    model.script("asker", Step::reply("helper says pong"));
}

/// The trace of asker's delegation, once the collector holds all of it: both turns, the three
/// model calls and the post of asker's reply.
pub(crate) async fn delegation_trace(collector: &Collector) -> Vec<Span> {
    collector
        .wait_for("the whole delegation's trace", |spans| {
            let turn = spans.iter().find(|s| s.name == "turn asker")?;
            let trace: Vec<Span> = spans
                .iter()
                .filter(|s| s.trace_id == turn.trace_id)
                .cloned()
                .collect();
            let count = |name: &str| trace.iter().filter(|s| s.name == name).count();
            let whole = count("turn helper") == 1
                && count("chat asker") == 2
                && count("chat helper") == 1
                && count("post") >= 1
                && count("inbound") == 1;
            whole.then_some(trace)
        })
        .await
}

/// Checks the shape SPEC section 13 asks of a delegation's trace, and returns it by span id.
pub(crate) fn check_delegation(trace: &[Span], model: &FakeOpenAi) -> HashMap<String, Span> {
    let by_id: HashMap<String, Span> = trace
        .iter()
        .map(|s| (s.span_id.clone(), s.clone()))
        .collect();
    let names = || trace.iter().map(|s| s.name.as_str()).collect::<Vec<_>>();
    let roots: Vec<&Span> = trace
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "one root: {:?}", names());
    assert_eq!(roots[0].name, "inbound", "{:?}", names());
    assert!(
        !roots[0].text("baton.message_id").is_empty(),
        "{:?}",
        roots[0]
    );
    for span in trace.iter().filter(|s| !s.parent_span_id.is_empty()) {
        assert!(
            by_id.contains_key(&span.parent_span_id),
            "{}'s parent is in the trace: {:?}",
            span.name,
            names()
        );
    }
    let parent = |span: &Span| by_id[&span.parent_span_id].clone();
    let one = |name: &str| trace.iter().find(|s| s.name == name).unwrap().clone();
    // helper's turn is the child of asker's sessions_send, which is asker's tool call.
    let send = parent(&one("turn helper"));
    assert_eq!(send.name, "sessions_send helper", "{:?}", names());
    assert_eq!(parent(&send).name, "execute_tool sessions_send");
    // Each model call under its bot's turn, with the GenAI attributes and the fake's usage.
    for span in trace.iter().filter(|s| s.name.starts_with("chat ")) {
        let bot = &span.name["chat ".len()..];
        assert_eq!(parent(span).name, format!("turn {bot}"));
        assert_eq!(span.text("gen_ai.request.model"), bot, "{span:?}");
        assert_eq!(span.text("gen_ai.operation.name"), "chat", "{span:?}");
        assert_eq!(span.text("gen_ai.system"), "openai", "{span:?}");
        assert_eq!(span.attributes["gen_ai.usage.input_tokens"], 11, "{span:?}");
        assert_eq!(span.attributes["gen_ai.usage.output_tokens"], 7, "{span:?}");
    }
    let post = trace.iter().find(|s| s.name == "post").unwrap();
    assert!(
        !post.text("baton.platform_message_id").is_empty(),
        "{post:?}"
    );
    let pipeline = parent(&one("turn asker"));
    assert_eq!(pipeline.name, "pipeline");
    assert_eq!(pipeline.text("baton.outcome"), "replied", "{pipeline:?}");
    // Every request the fake model got carries the trace, sampled, under its model call.
    for bot in ["asker", "helper"] {
        let sent = model.traceparents_for(bot);
        assert_eq!(sent.len(), if bot == "asker" { 2 } else { 1 }, "{sent:?}");
        for header in sent {
            let header = header.unwrap_or_else(|| panic!("{bot}'s request has a traceparent"));
            let parts: Vec<&str> = header.split('-').collect();
            assert_eq!(parts[1], roots[0].trace_id, "{header}");
            assert_eq!(parts[3], "01", "sampled: {header}");
            let under = &by_id[parts[2]];
            assert_eq!(under.name, format!("chat {bot}"), "{header}");
        }
    }
    for span in trace {
        assert_eq!(span.resource["service.name"], "baton", "{span:?}");
        assert!(
            span.resource.contains_key("service.instance.id"),
            "{span:?}"
        );
    }
    by_id
}

/// Helper's `n`th request to the model carries the caller's trace `caller_trace`.
fn assert_continued(model: &FakeOpenAi, n: usize, caller_trace: &str) {
    let sent = model.traceparents_for("helper");
    let header = sent[n].as_deref().expect("the model request's traceparent");
    assert!(header.contains(caller_trace), "{header}");
}

/// The spans of trace `trace_id` once it holds a span named each of `names`: spans are
/// exported as they end, in batches (a server span ends last, once the answer is sent).
async fn trace_holding(collector: &Collector, trace_id: &str, names: &[&str]) -> Vec<Span> {
    collector
        .wait_for("the named spans in the trace", |spans| {
            let trace: Vec<Span> = spans
                .iter()
                .filter(|s| s.trace_id == trace_id)
                .cloned()
                .collect();
            let has = |name: &&str| trace.iter().any(|s| s.name == *name);
            names.iter().all(has).then_some(trace)
        })
        .await
}

/// The first span up from `from` (itself included) through its parents in `trace` that
/// `reached` picks; fails if the way up leaves the trace first.
fn climb<'t>(trace: &'t [Span], from: &'t Span, reached: impl Fn(&Span) -> bool) -> &'t Span {
    let mut at = from;
    while !reached(at) {
        at = trace
            .iter()
            .find(|s| s.span_id == at.parent_span_id)
            .unwrap_or_else(|| panic!("{}'s parent is in the trace", at.name));
    }
    at
}

#[tokio::test]
async fn a_delegation_is_one_trace_with_both_bots_turns_and_model_calls() {
    let collector = Collector::start().await;
    let model = FakeOpenAi::start().await;
    script_delegation(&model);
    let gw = Traced::start(
        &model,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint)],
    )
    .await;

    gw.say("@asker ask helper").await;
    eventually(WAIT, "asker's reply", || async {
        let said = gw.said_by("asker").await;
        said.first().map(|m| m["text"].clone())
    })
    .await;
    let trace = delegation_trace(&collector).await;
    check_delegation(&trace, &model);

    // The JSON log lines written while the trace ran carry its id.
    let trace_id = &trace[0].trace_id;
    let logs = gw.process.logs();
    assert!(
        logs.lines()
            .any(|l| l.starts_with(&format!("{{\"trace_id\":\"{trace_id}\""))),
        "a log line with the trace id:\n{logs}"
    );
}

#[tokio::test]
async fn a_v1_request_carrying_traceparent_continues_the_callers_trace() {
    let collector = Collector::start().await;
    let model = FakeOpenAi::start().await;
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
    ];
    let gw = Traced::start(&model, &env).await;
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let response = gw
        .http
        .post(format!("{}/v1/chat/completions", gw.base))
        .header("traceparent", format!("00-{caller_trace}-{caller_span}-01"))
        .json(&json!({"model": "helper", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let names = ["chat helper", "POST /v1/chat/completions"];
    let trace = trace_holding(&collector, caller_trace, &names).await;
    let server = trace
        .iter()
        .find(|s| s.name == "POST /v1/chat/completions")
        .expect("a server span");
    assert_eq!(server.parent_span_id, caller_span);
    let inbound = trace.iter().find(|s| s.name == "inbound").unwrap();
    assert_eq!(inbound.parent_span_id, server.span_id);
    assert_continued(&model, 0, caller_trace);
}

/// A local room post carrying `traceparent`: the pipeline it wakes runs in the caller's trace,
/// under the request's server span, and the model request carries that trace.
#[tokio::test]
async fn a_local_room_post_carrying_traceparent_continues_the_callers_trace() {
    let collector = Collector::start().await;
    let model = FakeOpenAi::start().await;
    model.script("helper", Step::reply("hello"));
    let gw = Traced::start(
        &model,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint)],
    )
    .await;
    let caller_trace = "0af7651916cd43dd8448eb211c80319c";
    let caller_span = "b7ad6b7169203331";
    let traceparent = format!("00-{caller_trace}-{caller_span}-01");

    gw.say_under("@helper hi", Some(&traceparent)).await;
    let names = [
        "POST /api/local/rooms/room/messages",
        "inbound",
        "chat helper",
        "turn helper",
    ];
    let trace = trace_holding(&collector, caller_trace, &names).await;
    let one = |name: &str| trace.iter().find(|s| s.name == name).unwrap();
    let server = one("POST /api/local/rooms/room/messages");
    assert_eq!(server.parent_span_id, caller_span);
    assert_eq!(one("inbound").parent_span_id, server.span_id);
    assert_eq!(one("turn helper").trace_id, caller_trace);
    assert_continued(&model, 0, caller_trace);
}

/// An A2A call carrying `traceparent`, over each binding (JSON-RPC `SendMessage` and HTTP+JSON
/// `message:send`): the task's turn runs in the caller's trace, under the request's server span,
/// and the model request carries that trace.
#[tokio::test]
async fn an_a2a_call_carrying_traceparent_continues_the_callers_trace() {
    let collector = Collector::start().await;
    let model = FakeOpenAi::start().await;
    model.script("helper", Step::reply("over JSON-RPC"));
    model.script("helper", Step::reply("over HTTP+JSON"));
    let gw = Traced::start_with(
        &model,
        "\n[a2a]\nenabled = true\n",
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint)],
    )
    .await;
    let send = |id: &str| json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
    let calls = [
        (
            "/a2a/helper",
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send("m-rpc")}),
            "over JSON-RPC",
            "5a1f0c7be0e84b8f9d2a3c4b5d6e7f80",
            "a1b2c3d4e5f60718",
        ),
        (
            "/a2a/helper/message:send",
            send("m-rest"),
            "over HTTP+JSON",
            "6b2e1d8cf1f95c90ae3b4d5c6e7f8091",
            "b2c3d4e5f6071829",
        ),
    ];
    for (n, (path, body, reply, caller_trace, caller_span)) in calls.into_iter().enumerate() {
        let answer: Value = gw
            .http
            .post(format!("{}{path}", gw.base))
            .header("traceparent", format!("00-{caller_trace}-{caller_span}-01"))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let text = answer
            .pointer("/result/task/artifacts/0/parts/0/text")
            .or_else(|| answer.pointer("/task/artifacts/0/parts/0/text"));
        assert_eq!(text, Some(&json!(reply)), "{path}: {answer}");

        let server_name = format!("POST {path}");
        // The task's send is named for its bot, not its conversation's session key.
        let names = [
            server_name.as_str(),
            "sessions_send helper",
            "turn helper",
            "chat helper",
        ];
        let trace = trace_holding(&collector, caller_trace, &names).await;
        let server = trace.iter().find(|s| s.name == server_name).unwrap();
        assert_eq!(server.parent_span_id, caller_span, "{path}");
        // The model call sits under the turn, and the turn, through the task's delivery,
        // under the request.
        let chat = trace.iter().find(|s| s.name == "chat helper").unwrap();
        let turn = climb(&trace, chat, |s| s.name.starts_with("turn "));
        assert_eq!(turn.name, "turn helper", "{path}");
        climb(&trace, turn, |s| s.span_id == server.span_id);
        assert_continued(&model, n, caller_trace);
    }
}

/// A `sessions_send` that timed out, answered late: the turn the late reply wakes is linked to
/// the send's span, in the trace of the message that asked.
#[tokio::test]
async fn a_late_reply_is_linked_to_the_send_it_answers() {
    let collector = Collector::start().await;
    let model = FakeOpenAi::start().await;
    let ask = json!({"target": "helper", "message": "ping", "timeout_seconds": 1});
    model.script("asker", Step::tool_call("sessions_send", ask));
    // Four pieces a second apart: the send's second is up long before the answer is.
    model.script("helper", Step::slow("pong", 1, Duration::from_secs(1)));
    model.script("asker", Step::reply("helper is slow"));
    model.script("asker", Step::reply("helper says pong after all"));
    let gw = Traced::start(
        &model,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.endpoint)],
    )
    .await;

    gw.say("@asker ask helper").await;
    eventually(WAIT, "asker's reply to the late answer", || async {
        let said = gw.said_by("asker").await;
        said.iter()
            .any(|m| m["text"] == "helper says pong after all")
            .then_some(())
    })
    .await;
    let (send, wake) = collector
        .wait_for("the send's span and the late reply's", |spans| {
            let send = spans.iter().find(|s| s.name == "sessions_send helper")?;
            let wake = spans.iter().find(|s| s.name == "wake")?;
            Some((send.clone(), wake.clone()))
        })
        .await;
    assert_eq!(
        wake.links,
        vec![(send.trace_id.clone(), send.span_id.clone())],
        "{wake:?}"
    );
    // The woken turn runs under it.
    let turn = collector
        .wait_for("the woken turn", |spans| {
            spans
                .iter()
                .find(|s| s.name == "turn asker" && s.parent_span_id == wake.span_id)
                .cloned()
        })
        .await;
    assert_eq!(turn.trace_id, wake.trace_id);
}

#[tokio::test]
async fn a_collector_that_is_down_fails_no_turn_and_its_spans_are_counted_as_dropped() {
    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let model = FakeOpenAi::start().await;
    script_delegation(&model);
    let gw = Traced::start(&model, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)]).await;

    gw.say("@asker ask helper").await;
    let said = eventually(WAIT, "asker's reply", || async {
        gw.said_by("asker").await.first().map(|m| m["text"].clone())
    })
    .await;
    assert_eq!(said, "helper says pong");
    // Both bots' inbound and pipeline spans, both turns, three model calls, the tool call, the
    // send and the post: at least ten, in however many batches.
    eventually(
        WAIT,
        "every span of the delegation counted as dropped",
        || async { gw.dropped().await.filter(|&n| n >= 10) },
    )
    .await;
}

#[tokio::test]
async fn spans_ended_while_the_export_queue_is_full_are_counted_as_dropped() {
    // Takes connections (the kernel's backlog) and never answers: the first export hangs.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", silent.local_addr().unwrap());
    let model = FakeOpenAi::start().await;
    script_delegation(&model);
    let gw = Traced::start(
        &model,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "120000"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "2"),
        ],
    )
    .await;

    gw.say("@asker ask helper").await;
    let said = eventually(WAIT, "asker's reply", || async {
        gw.said_by("asker").await.first().map(|m| m["text"].clone())
    })
    .await;
    assert_eq!(said, "helper says pong");
    // At least ten spans, two of them in the hanging export: the rest had no room, and are
    // counted long before that export times out.
    eventually(
        WAIT,
        "the spans with no room counted as dropped",
        || async { gw.dropped().await.filter(|&n| n >= 8) },
    )
    .await;
    drop(silent);
}

/// `baton run` without an endpoint exports nothing and sends no `traceparent`.
#[tokio::test]
async fn without_an_endpoint_nothing_is_traced() {
    let model = FakeOpenAi::start().await;
    let gw = Traced::start(&model, &[]).await;
    gw.say("@helper hi").await;
    eventually(WAIT, "helper's reply", || async {
        gw.said_by("helper")
            .await
            .first()
            .map(|m| m["text"].clone())
    })
    .await;
    assert_eq!(model.traceparents_for("helper"), vec![None]);
    assert!(
        gw.metrics()
            .await
            .contains("baton_trace_spans_dropped_total 0")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegation_across_two_instances_on_postgresql_is_one_trace() {
    let collector = Collector::start().await;
    let model = FakeOpenAi::start().await;
    script_delegation(&model);
    let slack = FakeSlack::start().await;
    slack.app("asker", "U_ASKER");
    slack.app("helper", "U_HELPER");
    let backend = format!(
        "backend = \"openai\"\nmodel = \"{{bot}}\"\nbase_url = \"{}\"\ntools = [\"*\"]",
        model.base_url
    );
    let cluster = Instances::new(&slack, &["asker", "helper"], &backend, "").await;
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "50"),
    ];
    let a = cluster.start_with_env("baton-a", &env).await;
    let b = cluster.start_with_env("baton-b", &env).await;
    let spread = eventually(WAIT, "each instance holds one account", || async {
        let held = held(&a.get("/api/cluster").await);
        let one_each = held.len() == 2 && held.iter().all(|(_, accounts)| accounts.len() == 1);
        one_each.then_some(held)
    })
    .await;
    let home_of = |account: &str| {
        let holder = spread.iter().find(|(_, held)| held[0] == account);
        holder.map(|(id, _)| id.clone()).unwrap()
    };
    let (asker_home, helper_home) = (home_of("slack/asker"), home_of("slack/helper"));

    slack.deliver("asker", "env-1", mention("asker", 1));
    eventually(WAIT, "asker's reply in Slack", || async {
        let posts = slack.posts();
        posts
            .iter()
            .any(|p| p.text == "helper says pong")
            .then_some(())
    })
    .await;
    let trace = delegation_trace(&collector).await;
    check_delegation(&trace, &model);
    let instance = |name: &str| {
        let span = trace.iter().find(|s| s.name == name).unwrap();
        span.resource["service.instance.id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(instance("turn asker"), asker_home);
    assert_eq!(
        instance("turn helper"),
        helper_home,
        "helper's turn ran on its home"
    );
    drop((a, b));
}
