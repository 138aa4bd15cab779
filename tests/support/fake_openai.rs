//! A fake OpenAI-compatible server on loopback, for backend and end-to-end tests.
//!
//! Replies are scripted per `model` (a FIFO of [`Step`]s); with nothing scripted it answers
//! `echo: <last user message>`. Every request body is recorded, and the number of requests being
//! answered at once is tracked, so a test can prove parallelism by condition
//! ([`FakeOpenAi::hold_until_in_flight`]) instead of by timing. Response bodies follow the real
//! shapes in `shared/fixtures/openai/` (openai/openai-openapi examples).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::watch;

/// How long [`FakeOpenAi::hold_until_in_flight`] holds a request at most, so a test that fails to
/// reach the parallelism it expects fails on its assertion rather than hanging.
const HOLD_LIMIT: Duration = Duration::from_secs(10);

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Step {
    /// A normal assistant message with this content.
    Reply(String),
    /// An assistant message calling these tools: `(tool name, arguments object)`.
    ToolCalls(Vec<(String, Value)>),
    /// An OpenAI-shaped error body with this status, and a `Retry-After` header (seconds) if set.
    Error {
        /// HTTP status.
        status: u16,
        /// `Retry-After` in seconds.
        retry_after: Option<u64>,
    },
    /// Wait, then answer with the inner step (e.g. to trip a client timeout).
    Delay(Duration, Box<Step>),
    /// A single tool call whose arguments are computed from the request that gets it: for ids
    /// the model was only told earlier in the conversation (a chain id, say).
    ToolCallWith(String, Compute),
    /// A reply written slowly: to a `stream: true` request each piece is its own chunk, `gap`
    /// after the one before; a whole request gets the whole text after all the gaps.
    Slow {
        /// The reply, in the pieces the model writes it in.
        pieces: Vec<String>,
        /// The pause before each piece.
        gap: Duration,
        /// Tool calls the answer ends with: the text before them was a draft, not the reply.
        then: Vec<(String, Value)>,
    },
    /// An answer that never ends, for the read caps: to a `stream: true` request, content
    /// deltas forever; to a whole one, a JSON body whose content string never closes. It stops
    /// when the client hangs up.
    Endless,
}

/// Computes a tool call's arguments from the request body.
#[derive(Clone)]
pub struct Compute(pub Arc<dyn Fn(&Value) -> Value + Send + Sync>);

impl std::fmt::Debug for Compute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Compute(..)")
    }
}

impl Step {
    /// `Step::Reply` without the `.to_owned()`.
    pub fn reply(text: impl Into<String>) -> Step {
        Step::Reply(text.into())
    }

    /// A single tool call.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Step {
        Step::ToolCalls(vec![(name.into(), arguments)])
    }

    /// `text` written slowly, `piece_chars` characters every `gap` (see [`Step::Slow`]).
    pub fn slow(text: &str, piece_chars: usize, gap: Duration) -> Step {
        let chars: Vec<char> = text.chars().collect();
        let pieces = chars
            .chunks(piece_chars.max(1))
            .map(|c| c.iter().collect())
            .collect();
        Step::Slow {
            pieces,
            gap,
            then: Vec::new(),
        }
    }

    /// `text` written slowly (see [`Step::slow`]), then a call of `tool` in the same answer.
    pub fn slow_then_tool(text: &str, piece_chars: usize, gap: Duration, tool: &str) -> Step {
        match Step::slow(text, piece_chars, gap) {
            Step::Slow { pieces, gap, .. } => Step::Slow {
                pieces,
                gap,
                then: vec![(tool.to_owned(), json!({}))],
            },
            _ => unreachable!("Step::slow is a Slow step"),
        }
    }

    /// A single tool call with arguments computed from the request (see [`Step::ToolCallWith`]).
    pub fn tool_call_with(
        name: impl Into<String>,
        arguments: impl Fn(&Value) -> Value + Send + Sync + 'static,
    ) -> Step {
        Step::ToolCallWith(name.into(), Compute(Arc::new(arguments)))
    }
}

/// A running fake server. Stops when dropped.
pub struct FakeOpenAi {
    /// `http://127.0.0.1:PORT/v1`: what a backend's `base_url` should be.
    pub base_url: String,
    engine: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

/// State shared with the handlers. A std `Mutex` because it is never held across an `.await`.
struct Shared {
    inner: Mutex<Inner>,
    /// Bumped each time a hold is released; monotonic, so a waiter cannot miss its release.
    released: watch::Sender<u64>,
    /// Requests received so far; a watch so tests can wait for a count.
    received: watch::Sender<usize>,
    /// When each [`Step::Slow`] answer sent its last piece.
    finished: Mutex<Vec<tokio::time::Instant>>,
}

#[derive(Default)]
struct Inner {
    scripts: HashMap<String, VecDeque<Step>>,
    requests: Vec<Recorded>,
    in_flight: usize,
    max_in_flight: usize,
    hold: Option<usize>,
    hold_generation: u64,
    api_key: Option<String>,
    /// How long an unscripted answer takes ([`FakeOpenAi::answer_after`]).
    echo_delay: Option<Duration>,
    /// The `usage` every answer reports ([`FakeOpenAi::report_usage`]).
    usage: Option<Usage>,
}

/// The tokens an answer reports: `(prompt, completion)`.
type Usage = (u64, u64);

/// The `usage` object of an answer: the configured one, else 19 prompt tokens and `words`.
fn usage_json(usage: Option<Usage>, words: usize) -> Value {
    let (prompt, completion) = usage.unwrap_or((19, words as u64));
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

struct Recorded {
    body: Value,
    authorization: Option<String>,
    traceparent: Option<String>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A test that panicked while holding the lock already failed; keep serving the rest.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl FakeOpenAi {
    /// Starts the server on `127.0.0.1:0` in a background task.
    pub async fn start() -> FakeOpenAi {
        let engine = Arc::new(Shared {
            inner: Mutex::new(Inner::default()),
            released: watch::channel(0).0,
            received: watch::channel(0).0,
            finished: Mutex::default(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/models", get(models))
            .fallback(not_found)
            .with_state(engine.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .await
                .expect("fake openai serves");
        });
        FakeOpenAi {
            base_url: format!("http://{addr}/v1"),
            engine,
            task,
        }
    }

    /// Queues `step` as the next answer to a request whose `model` is `model` (FIFO per model).
    pub fn script(&self, model: &str, step: Step) {
        self.engine
            .lock()
            .scripts
            .entry(model.to_owned())
            .or_default()
            .push_back(step);
    }

    /// Every answer from now on reports this `usage` (prompt, completion tokens), streamed
    /// (when the request asks for it with `stream_options.include_usage`) or not.
    pub fn report_usage(&self, prompt: u64, completion: u64) {
        self.engine.lock().usage = Some((prompt, completion));
    }

    /// Every request body received, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.engine
            .lock()
            .requests
            .iter()
            .map(|r| r.body.clone())
            .collect()
    }

    /// The request bodies whose `model` is `model`, in arrival order.
    pub fn requests_for(&self, model: &str) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|body| body["model"] == model)
            .collect()
    }

    /// Every tool result `model` was given, parsed, each once, in order (a later request repeats
    /// the earlier ones in its history).
    pub fn tool_results(&self, model: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        for request in self.requests_for(model) {
            for line in request["messages"].as_array().cloned().unwrap_or_default() {
                if line["role"] == "tool" {
                    let parsed = serde_json::from_str(line["content"].as_str().unwrap()).unwrap();
                    if !seen.contains(&parsed) {
                        seen.push(parsed);
                    }
                }
            }
        }
        seen
    }

    /// The last user line of each request `model` received: what woke each of its turns.
    pub fn woken_by(&self, model: &str) -> Vec<String> {
        self.requests_for(model)
            .iter()
            .map(|r| {
                let lines = r["messages"].as_array().cloned().unwrap_or_default();
                let user = lines.iter().rev().find(|l| l["role"] == "user").cloned();
                user.and_then(|l| l["content"].as_str().map(str::to_owned))
                    .unwrap_or_default()
            })
            .collect()
    }

    /// The `Authorization` header of every request, in arrival order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.engine
            .lock()
            .requests
            .iter()
            .map(|r| r.authorization.clone())
            .collect()
    }

    /// The W3C `traceparent` header of each request whose `model` is `model`, in arrival order.
    pub fn traceparents_for(&self, model: &str) -> Vec<Option<String>> {
        self.engine
            .lock()
            .requests
            .iter()
            .filter(|r| r.body["model"] == model)
            .map(|r| r.traceparent.clone())
            .collect()
    }

    /// Let every unscripted (echo) answer take `wait`, as a real model takes a while: keeps
    /// turns in flight long enough for a fault test's kills to land in them.
    pub fn answer_after(&self, wait: Duration) {
        self.engine.lock().echo_delay = Some(wait);
    }

    /// Answer 401 (`invalid_api_key`) to any request not bearing `Bearer <key>`.
    pub fn require_api_key(&self, key: &str) {
        self.engine.lock().api_key = Some(key.to_owned());
    }

    /// Highest number of requests that were being answered at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.engine.lock().max_in_flight
    }

    /// Hold each request until `n` requests are in flight at the same time (or 10 s pass), to
    /// prove parallelism without timing. Once `n` is reached every held request is released and
    /// later requests pass straight through; call again to re-arm.
    pub fn hold_until_in_flight(&self, n: usize) {
        self.engine.lock().hold = Some(n);
    }

    /// Hold every request until [`FakeOpenAi::release`] (or 10 s pass): keeps a turn running
    /// for exactly as long as a test needs it to.
    pub fn hold(&self) {
        self.engine.lock().hold = Some(usize::MAX);
    }

    /// Let every held request go on; later requests pass straight through.
    pub fn release(&self) {
        let mut inner = self.engine.lock();
        release(&self.engine, &mut inner);
    }

    /// When each slow answer ([`Step::Slow`]) had sent its last piece, in order.
    pub fn finished(&self) -> Vec<tokio::time::Instant> {
        self.engine
            .finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Waits until at least `n` requests have arrived (or `timeout` passes) and returns them all.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<Value> {
        let mut rx = self.engine.received.subscribe();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|&count| count >= n)).await;
        self.requests()
    }
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Counts a request as in flight for as long as its handler runs (also when the client goes away).
struct InFlight(Arc<Shared>);

impl InFlight {
    /// Enters, and returns the hold generation to wait past if this request must be held.
    fn enter(engine: &Arc<Shared>) -> (InFlight, Option<u64>) {
        let mut inner = engine.lock();
        inner.in_flight += 1;
        inner.max_in_flight = inner.max_in_flight.max(inner.in_flight);
        let wait = match inner.hold {
            Some(n) if inner.in_flight >= n => {
                release(engine, &mut inner);
                None
            }
            Some(_) => Some(inner.hold_generation),
            None => None,
        };
        (InFlight(engine.clone()), wait)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.lock().in_flight -= 1;
    }
}

/// Ends the current hold: every request waiting on it goes on, later ones are not held.
fn release(engine: &Shared, inner: &mut Inner) {
    inner.hold = None;
    inner.hold_generation += 1;
    engine.released.send_replace(inner.hold_generation);
}

/// Waits until the hold of `generation` is released, or [`HOLD_LIMIT`] passes (then releases it).
async fn wait_for_release(engine: &Shared, generation: u64) {
    let mut rx = engine.released.subscribe();
    let released = tokio::time::timeout(HOLD_LIMIT, rx.wait_for(|&g| g > generation)).await;
    if released.is_err() {
        let mut inner = engine.lock();
        if inner.hold_generation == generation {
            release(engine, &mut inner);
        }
    }
}

async fn chat_completions(
    State(engine): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (_in_flight, held) = InFlight::enter(&engine);
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(e) => {
            return error_response(
                400,
                None,
                &format!("We could not parse the JSON body of your request. ({e})"),
            );
        }
    };
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let traceparent = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let model = body["model"].as_str().unwrap_or_default().to_owned();
    let (step, key_ok, index, usage) = {
        let mut inner = engine.lock();
        let key_ok = inner
            .api_key
            .as_ref()
            .is_none_or(|key| authorization.as_deref() == Some(&format!("Bearer {key}")));
        inner.requests.push(Recorded {
            body: body.clone(),
            authorization,
            traceparent,
        });
        let step = inner.scripts.get_mut(&model).and_then(VecDeque::pop_front);
        let step = step.or_else(|| {
            let echo = Step::Reply(format!("echo: {}", last_user_text(&body)));
            inner
                .echo_delay
                .map(|wait| Step::Delay(wait, Box::new(echo)))
        });
        (step, key_ok, inner.requests.len(), inner.usage)
    };
    engine.received.send_modify(|count| *count += 1);

    if let Some(generation) = held {
        wait_for_release(&engine, generation).await;
    }
    if !key_ok {
        return error_response(
            401,
            None,
            "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.",
        );
    }

    let mut step = step.unwrap_or_else(|| Step::Reply(format!("echo: {}", last_user_text(&body))));
    loop {
        match step {
            Step::Delay(wait, next) => {
                tokio::time::sleep(wait).await;
                step = *next;
            }
            Step::ToolCallWith(name, compute) => {
                step = Step::ToolCalls(vec![(name, (compute.0)(&body))]);
            }
            Step::Error {
                status,
                retry_after,
            } => return error_response(status, retry_after, default_error_message(status)),
            Step::Slow { pieces, gap, then } => {
                return slow(&engine, &body, (index, usage), pieces, gap, then).await;
            }
            Step::Endless => return endless(&body),
            Step::Reply(text) => {
                let message = json!({
                    "role": "assistant",
                    "content": text,
                    "refusal": null,
                    "annotations": [],
                });
                return completion(&body, (index, usage), message, "stop");
            }
            Step::ToolCalls(calls) => {
                let calls: Vec<Value> = calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, arguments))| {
                        json!({
                            "id": format!("call_fake_{index}_{i}"),
                            "type": "function",
                            "function": { "name": name, "arguments": arguments.to_string() },
                        })
                    })
                    .collect();
                let message = json!({ "role": "assistant", "content": null, "tool_calls": calls });
                return completion(&body, (index, usage), message, "tool_calls");
            }
        }
    }
}

/// A `chat.completion` (or, for `"stream": true`, its SSE form) around `message`.
/// `at` is the answer's index and the usage it reports.
fn completion(
    request: &Value,
    at: (usize, Option<Usage>),
    message: Value,
    finish_reason: &str,
) -> Response {
    let (index, usage) = at;
    let id = format!("chatcmpl-fake{index}");
    let model = request["model"].clone();
    let created = 1_741_569_952 + index as u64;
    let content_len = message["content"]
        .as_str()
        .map_or(0, |c| c.split_whitespace().count());
    let usage = usage_json(usage, content_len);
    if request["stream"] == true {
        let usage = (request["stream_options"]["include_usage"] == true).then_some(usage);
        return stream(&id, &model, created, message, finish_reason, usage);
    }
    axum::Json(json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason,
        }],
        "usage": usage,
        "service_tier": "default",
    }))
    .into_response()
}

/// The same answer as server-sent `chat.completion.chunk`s, as in `chat_stream_*.sse`.
fn stream(
    id: &str,
    model: &Value,
    created: u64,
    message: Value,
    finish_reason: &str,
    usage: Option<Value>,
) -> Response {
    let chunk = |delta: Value, finish: Value| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "system_fingerprint": null,
            "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
        })
    };
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    if let Some(text) = message["content"].as_str() {
        chunks.push(chunk(json!({ "content": text }), Value::Null));
    }
    if let Some(calls) = message["tool_calls"].as_array() {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                let mut call = call.clone();
                call["index"] = i.into();
                call
            })
            .collect();
        chunks.push(chunk(json!({ "tool_calls": calls }), Value::Null));
    }
    chunks.push(chunk(json!({}), finish_reason.into()));
    if let Some(usage) = usage {
        let mut last = chunk(Value::Null, Value::Null);
        last["choices"] = json!([]);
        last["usage"] = usage;
        chunks.push(last);
    }
    let mut text = String::new();
    for chunk in chunks {
        text.push_str(&format!("data: {chunk}\n\n"));
    }
    text.push_str("data: [DONE]\n\n");
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(text))
        .expect("valid response")
}

/// A [`Step::Slow`] answer: streamed piece by piece, or whole after the same time.
async fn slow(
    engine: &Arc<Shared>,
    request: &Value,
    at: (usize, Option<Usage>),
    pieces: Vec<String>,
    gap: Duration,
    then: Vec<(String, Value)>,
) -> Response {
    let index = at.0;
    let calls: Vec<Value> = then
        .into_iter()
        .enumerate()
        .map(|(i, (name, arguments))| {
            json!({
                "index": i,
                "id": format!("call_fake_{index}_{i}"),
                "type": "function",
                "function": { "name": name, "arguments": arguments.to_string() },
            })
        })
        .collect();
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let done = {
        let engine = engine.clone();
        move || {
            engine
                .finished
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(tokio::time::Instant::now());
        }
    };
    if request["stream"] != true {
        tokio::time::sleep(gap * pieces.len() as u32).await;
        done();
        let mut message = json!({"role": "assistant", "content": pieces.concat()});
        if !calls.is_empty() {
            message["tool_calls"] = calls.into();
        }
        return completion(request, at, message, finish);
    }
    let id = format!("chatcmpl-fake{index}");
    let model = request["model"].clone();
    let chunk = move |delta: Value, finish: Value| {
        let chunk = json!({
            "id": id, "object": "chat.completion.chunk", "created": 1_741_569_952, "model": model,
            "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
        });
        Ok::<_, std::convert::Infallible>(Bytes::from(format!("data: {chunk}\n\n")))
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        let _ = tx
            .send(chunk(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
            ))
            .await;
        for piece in pieces {
            tokio::time::sleep(gap).await;
            if tx
                .send(chunk(json!({ "content": piece }), Value::Null))
                .await
                .is_err()
            {
                return;
            }
        }
        if !calls.is_empty() {
            let _ = tx
                .send(chunk(json!({ "tool_calls": calls }), Value::Null))
                .await;
        }
        let _ = tx.send(chunk(json!({}), finish.into())).await;
        let usage = json!({"choices": [], "usage": usage_json(at.1, 5)});
        let _ = tx
            .send(Ok(Bytes::from(format!(
                "data: {usage}\n\ndata: [DONE]\n\n"
            ))))
            .await;
        done();
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .expect("valid response")
}

/// A [`Step::Endless`] answer: 64 KiB pieces of `x` until the client hangs up.
fn endless(request: &Value) -> Response {
    let streamed = request["stream"] == true;
    let (start, piece, content_type) = if streamed {
        let delta = |text: &str| {
            let chunk = json!({
                "id": "chatcmpl-endless", "object": "chat.completion.chunk",
                "created": 1_741_569_952, "model": request["model"],
                "choices": [{ "index": 0, "delta": { "content": text }, "finish_reason": null }],
            });
            format!("data: {chunk}\n\n")
        };
        (delta(""), delta(&"x".repeat(64 << 10)), "text/event-stream")
    } else {
        let start = json!({"id": "chatcmpl-endless", "object": "chat.completion", "model": request["model"]})
            .to_string();
        let start = format!(
            "{},\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"",
            start.trim_end_matches('}')
        );
        (start, "x".repeat(64 << 10), "application/json")
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        if tx
            .send(Ok::<_, std::convert::Infallible>(Bytes::from(start)))
            .await
            .is_err()
        {
            return;
        }
        let piece = Bytes::from(piece);
        while tx.send(Ok(piece.clone())).await.is_ok() {}
    });
    Response::builder()
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .expect("valid response")
}

/// `GET /v1/models`: every model scripted or asked for so far, plus `fake-model`.
async fn models(State(engine): State<Arc<Shared>>) -> Response {
    let inner = engine.lock();
    let mut names: BTreeSet<String> = inner.scripts.keys().cloned().collect();
    names.extend(
        inner
            .requests
            .iter()
            .filter_map(|r| r.body["model"].as_str().map(str::to_owned)),
    );
    names.insert("fake-model".to_owned());
    let data: Vec<Value> = names
        .into_iter()
        .map(|id| json!({ "id": id, "object": "model", "created": 1_686_935_002, "owned_by": "baton-fake" }))
        .collect();
    axum::Json(json!({ "object": "list", "data": data })).into_response()
}

async fn not_found() -> Response {
    error_response(
        404,
        None,
        "Unknown request URL. Please check the URL for typos.",
    )
}

/// An OpenAI-shaped error (`error_examples.json`): message, type, param, code.
fn error_response(status: u16, retry_after: Option<u64>, message: &str) -> Response {
    let (kind, code) = match status {
        401 => ("invalid_request_error", json!("invalid_api_key")),
        404 => ("invalid_request_error", json!("model_not_found")),
        429 => ("requests", json!("rate_limit_exceeded")),
        500..=599 => ("server_error", Value::Null),
        _ => ("invalid_request_error", Value::Null),
    };
    let body = json!({
        "error": { "message": message, "type": kind, "param": null, "code": code }
    });
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, axum::Json(body)).into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, seconds.into());
    }
    response
}

/// The message the real API gives for a status (`error_examples.json`).
fn default_error_message(status: u16) -> &'static str {
    match status {
        400 => "Unrecognized request argument supplied: foo",
        401 => {
            "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
        }
        404 => "The model does not exist or you do not have access to it.",
        429 => {
            "Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1. Please try again in 1s."
        }
        500..=599 => "The server had an error while processing your request. Sorry about that!",
        _ => "The request failed.",
    }
}

/// The content of the last `user` message (string, or the text parts of a parts array).
fn last_user_text(body: &Value) -> String {
    let Some(message) = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}
