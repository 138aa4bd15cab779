//! A2A 1.0 inbound (SPEC 14): every exposed bot is an Agent2Agent agent, over the JSON-RPC
//! binding the official SDK clients speak.
//!
//! A task is a durable delivery (`relay::send`) from the external agent to the bot, not a
//! second delivery system: the task id is the delivery's run id, the context id its target
//! session, a repeated `messageId` is the delivery's idempotency key (so it finds the same
//! task), and the task's state is read from the delivery's row. A restart therefore loses no
//! task, and on PostgreSQL any instance answers for any task. A question the bot asks in a task
//! makes it `input-required` until the caller answers on it (`relay/task_resume.rs`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use baton_contract::Platform;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::{self, error::RecvError};

use super::a2a_pages;
use crate::bot_id::BotId;
use crate::engine::{Caller, Engine};
use crate::escalation::route_back;
use crate::events::{Event, Stamped};
use crate::media_type;
use crate::relay::{self, Relay, SendOutcome, SendRequest};
use crate::roster::{Bot, glob_set};
use crate::session::{A2aCaller, SessionKey};
use crate::store::{
    AnswerCandidate, AnswerMatch, Delivery, DeliveryState, Escalation, EscalationState,
    NewArtifact, Origin, Put, TaskQuery,
};
use crate::timing::now_ms;

/// The protocol version cards declare.
const PROTOCOL_VERSION: &str = "1.0";
/// How long a streamed send or a subscription follows a task before it ends the stream with
/// the task as it stands.
const FOLLOW_FOR: Duration = Duration::from_secs(30 * 60);

/// How long an ended run's outcome may take to reach the record after it was handed over.
const SETTLE_WITHIN: Duration = Duration::from_secs(10);

/// Whether `path` is an agent card (readable without the API token: SPEC 14).
pub(super) fn is_card(path: &str) -> bool {
    path == "/.well-known/agent-card.json"
        || path
            .strip_prefix("/a2a/")
            .is_some_and(|rest| rest.ends_with("/.well-known/agent-card.json"))
}

/// `GET /.well-known/agent-card.json`: the cards of every exposed bot, as a list.
pub(super) async fn cards(State(engine): State<Engine>, headers: HeaderMap) -> Response {
    let base = base_url(&engine, &headers);
    let cards: Vec<Value> = exposed(&engine)
        .iter()
        .map(|bot| card(&engine, bot, &base))
        .collect();
    Json(cards).into_response()
}

/// `GET /a2a/<bot>/.well-known/agent-card.json`.
pub(super) async fn bot_card(
    State(engine): State<Engine>,
    Path(bot): Path<String>,
    headers: HeaderMap,
) -> Response {
    match exposed_bot(&engine, &bot) {
        Some(found) => Json(card(&engine, &found, &base_url(&engine, &headers))).into_response(),
        None => not_exposed(&engine, &bot).into_response(),
    }
}

fn not_exposed(engine: &Engine, bot: &str) -> (axum::http::StatusCode, Json<Value>) {
    let names: Vec<String> = exposed(engine).iter().map(|b| b.id().to_string()).collect();
    let message = if engine.config().a2a.enabled {
        format!(
            "no A2A agent `{bot}`; exposed: {} (`[a2a] expose` in the config)",
            names.join(", ")
        )
    } else {
        "A2A is off; set `[a2a] enabled = true` in the config".to_owned()
    };
    (
        axum::http::StatusCode::NOT_FOUND,
        Json(json!({"error": message})),
    )
}

/// The bots published as A2A agents: `[a2a] expose`, when `[a2a] enabled`.
fn exposed(engine: &Engine) -> Vec<Arc<Bot>> {
    let config = &engine.config().a2a;
    if !config.enabled {
        return Vec::new();
    }
    // Validation compiled these at start-up.
    let Ok(globs) = glob_set(&config.expose) else {
        return Vec::new();
    };
    let roster = engine.roster();
    roster
        .bots()
        .iter()
        .filter(|b| globs.is_match(b.id().as_str()))
        .filter(|b| roster.account_of_bot(Platform::Local, b.id()).is_some())
        .cloned()
        .collect()
}

fn exposed_bot(engine: &Engine, name: &str) -> Option<Arc<Bot>> {
    exposed(engine).into_iter().find(|b| b.id() == name)
}

/// Where callers reach baton: `gateway.public_url`, else the host the request was sent to.
fn base_url(engine: &Engine, headers: &HeaderMap) -> String {
    let gateway = &engine.config().gateway;
    if let Some(url) = &gateway.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or(&gateway.listen);
    format!("http://{host}")
}

/// A bot's agent card: its name and description, one skill from the description, its JSON-RPC
/// interface, streaming on, and the bearer scheme when the API needs a token.
fn card(engine: &Engine, bot: &Bot, base: &str) -> Value {
    let id = bot.id();
    let name = if bot.config.name.is_empty() {
        id.to_string()
    } else {
        bot.config.name.clone()
    };
    let description = if bot.config.description.is_empty() {
        format!("{name}, a bot on baton")
    } else {
        bot.config.description.clone()
    };
    let mut card = json!({
        "name": name,
        "description": description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": format!("{base}/a2a/{id}"),
            "protocolBinding": "JSONRPC",
            "protocolVersion": PROTOCOL_VERSION,
        }],
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": id,
            "name": name,
            "description": description,
            "tags": ["baton"],
        }],
    });
    if engine.config().gateway.api_token_env.is_some() {
        card["securitySchemes"] = json!({
            "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}
        });
        card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
    }
    card
}

/// A JSON-RPC request.
#[derive(Deserialize)]
struct RpcRequest {
    #[serde(default)]
    id: Value,
    method: String,
    #[serde(default)]
    params: Value,
}

/// A JSON-RPC error: the A2A code and what to do about it.
struct RpcError {
    code: i64,
    message: String,
}

impl RpcError {
    fn invalid(message: impl Into<String>) -> RpcError {
        RpcError {
            code: -32602,
            message: message.into(),
        }
    }

    fn task_not_found(id: &str) -> RpcError {
        RpcError {
            code: -32001,
            message: format!("no task `{id}` of this agent (ListTasks shows them)"),
        }
    }

    fn internal(err: impl std::fmt::Display) -> RpcError {
        RpcError {
            code: -32603,
            message: err.to_string(),
        }
    }
}

fn reply(id: &Value, result: Result<Value, RpcError>) -> Response {
    let body = match result {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(err) => json!({"jsonrpc": "2.0", "id": id,
                           "error": {"code": err.code, "message": err.message}}),
    };
    Json(body).into_response()
}

/// `POST /a2a/<bot>`: one JSON-RPC call.
pub(super) async fn rpc(
    State(relay): State<Relay>,
    Path(bot): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let engine = relay.engine();
    let Some(bot) = exposed_bot(engine, &bot) else {
        return not_exposed(engine, &bot).into_response();
    };
    let request: RpcRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(err) => {
            let err = RpcError {
                code: -32700,
                message: format!("the body is not a JSON-RPC request: {err}"),
            };
            return reply(&Value::Null, Err(err));
        }
    };
    let base = base_url(engine, &headers);
    let id = request.id;
    let params = request.params;
    match request.method.as_str() {
        "SendMessage" => reply(&id, send(&relay, &bot, &params, &base).await),
        "SendStreamingMessage" => {
            let live = engine.events().subscribe(None).live;
            match accept(&relay, &bot, &params, Duration::ZERO).await {
                Ok(d) => stream(relay.clone(), id, d, live, base),
                Err(err) => reply(&id, Err(err)),
            }
        }
        "GetTask" => reply(&id, get(engine, &bot, &params, &base).await),
        "SubscribeToTask" => {
            let live = engine.events().subscribe(None).live;
            match task_of(engine, &bot, &params).await {
                Ok(d) => stream(relay.clone(), id, d, live, base),
                Err(err) => reply(&id, Err(err)),
            }
        }
        "ListTasks" => reply(&id, list(engine, &bot, &params, &base).await),
        "CancelTask" => reply(&id, cancel(&relay, &bot, &params, &base).await),
        other => reply(
            &id,
            Err(RpcError {
                code: -32601,
                message: format!(
                    "no method `{other}`; this agent serves SendMessage, SendStreamingMessage, \
                     GetTask, SubscribeToTask, ListTasks and CancelTask"
                ),
            }),
        ),
    }
}

/// `SendMessage`: the task once the bot answered (or, with `returnImmediately`, at once).
async fn send(relay: &Relay, bot: &Bot, params: &Value, base: &str) -> Result<Value, RpcError> {
    let at_once = params
        .pointer("/configuration/returnImmediately")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let wait = if at_once {
        Duration::ZERO
    } else {
        Duration::from_secs(relay.engine().config().gateway.turn_timeout_seconds)
    };
    let d = accept(relay, bot, params, wait).await?;
    let asked = waits_on(relay.engine(), &d).await?;
    Ok(json!({"task": task(&d, asked.as_ref(), base)}))
}

/// The message of `params` handed to `bot` as a delivery from the caller, waited on up to
/// `wait`: the delivery as it stands then.
async fn accept(
    relay: &Relay,
    bot: &Bot,
    params: &Value,
    wait: Duration,
) -> Result<Delivery, RpcError> {
    let engine = relay.engine();
    let message = params
        .get("message")
        .ok_or_else(|| RpcError::invalid("params.message is missing"))?;
    let message_id = message
        .get("messageId")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| RpcError::invalid("message.messageId is missing"))?;
    let (text, files) = read_message(message)?;
    let caller = caller_of(params, message)?;
    if let Some(task_id) = message
        .get("taskId")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        if !files.is_empty() {
            return Err(RpcError::invalid(
                "an answer on a task carries text only; send files without `taskId`, as a new \
                 task in the same `contextId`",
            ));
        }
        let answer = Answer {
            caller: &caller,
            message_id,
            text,
        };
        return answer_task(relay, bot, task_id, answer, wait).await;
    }
    let account = engine
        .roster()
        .account_of_bot(Platform::Local, bot.id())
        .map(|a| a.id.clone())
        .ok_or_else(|| RpcError::internal("the bot has no local account"))?;
    let session = match message.get("contextId").and_then(Value::as_str) {
        Some(context) if !context.is_empty() => continued(bot.id(), &caller, context)?,
        // Named after the message, so a resend of it without a context finds its task.
        _ => SessionKey::a2a(bot.id(), account.clone(), &caller, &new_context(message_id)),
    };
    let from = Caller::external(&SessionKey::a2a_caller(bot.id(), account, &caller));
    let artifacts = keep_files(engine, &session, files).await?;
    let request = SendRequest {
        target: session.render(),
        message: text,
        timeout: wait,
        idempotency_key: Some(format!("a2a:{caller}:{message_id}")),
        artifacts,
        expect: None,
    };
    let sent = relay::send(relay, &from, request)
        .await
        .map_err(RpcError::internal)?;
    let run_id = sent.outcome.run_id();
    // A run hands its outcome over before its commit: an ended one is read once on record.
    let found = match sent.outcome {
        SendOutcome::StillWorking { .. } | SendOutcome::Accepted { .. } => {
            engine.store().delivery(run_id).await
        }
        _ => relay::settled(relay, run_id, SETTLE_WITHIN).await,
    };
    found
        .map_err(RpcError::internal)?
        .ok_or_else(|| RpcError::internal("the task was not recorded; send it again"))
}

/// The caller's answer to the question a task waits on.
struct Answer<'a> {
    caller: &'a A2aCaller,
    message_id: &'a str,
    text: String,
}

/// A message on task `task_id`: the answer to the question it waits on (`input-required`),
/// routed back to the bot, whose turn then goes on with the task. The task as it stands after
/// `wait`. The same answer sent again finds the task as it stands; a task that waits on
/// nothing takes no message.
async fn answer_task(
    relay: &Relay,
    bot: &Bot,
    task_id: &str,
    answer: Answer<'_>,
    wait: Duration,
) -> Result<Delivery, RpcError> {
    let engine = relay.engine();
    let d = task_by_id(engine, bot, task_id).await?;
    if d.sender_session.a2a_peer() != Some(answer.caller.as_str()) {
        return Err(RpcError::task_not_found(task_id));
    }
    let asked_in = d.target_session.a2a_task(&d.run_id);
    let speaker = format!("a2a:{}", answer.caller);
    let candidate = AnswerCandidate {
        chat: d.target_session.chat_key(),
        chat_key: asked_in.chat_key(),
        reply_to: None,
        message_id: answer.message_id.to_owned(),
        sent_ms: 0,
        by: speaker.clone(),
        text: answer.text.clone(),
    };
    let taken = engine
        .store()
        .answer_escalation(candidate, now_ms())
        .await
        .map_err(RpcError::internal)?;
    match taken {
        Some(AnswerMatch::First(escalation)) => {
            // Running again before this call returns: the task is read as working, not as the
            // turn that asked left it.
            relay::resume_task(engine, &d.run_id).await;
            let text = format!(
                "Answer from A2A agent '{}' to your question {}: {}",
                answer.caller, escalation.id, answer.text
            );
            let meta = json!({"escalation": escalation.id, "message_id": answer.message_id,
                              "name": speaker});
            route_back(engine, &escalation, &speaker, Origin::Bot, text, meta);
        }
        // Sent again: the answer was taken the first time.
        Some(AnswerMatch::Copy(_)) => {}
        None => {
            return Err(RpcError {
                code: -32004,
                message: format!(
                    "task `{task_id}` is not waiting for input ({}); send the message without \
                     `taskId` to start a new task in its `contextId`",
                    d.state.as_str()
                ),
            });
        }
    }
    let found = if wait.is_zero() {
        engine.store().delivery(&d.run_id).await
    } else {
        relay::settled(relay, &d.run_id, wait).await
    };
    found
        .map_err(RpcError::internal)?
        .ok_or_else(|| RpcError::task_not_found(task_id))
}

/// The question task `d` waits on its caller for (`input-required`): one pending, asked in the
/// task by a turn that has ended.
async fn waits_on(engine: &Engine, d: &Delivery) -> Result<Option<Escalation>, RpcError> {
    if d.state != DeliveryState::Delivered {
        return Ok(None);
    }
    let asked_in = d.target_session.a2a_task(&d.run_id);
    engine
        .store()
        .pending_escalation_in(&asked_in)
        .await
        .map_err(RpcError::internal)
}

/// The context a message without one starts: named after its `messageId`.
fn new_context(message_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(message_id.as_bytes());
    digest[..12].iter().map(|b| format!("{b:02x}")).collect()
}

/// The session of an earlier task's `contextId`: only one of this bot's with this caller.
fn continued(bot: &BotId, caller: &A2aCaller, context: &str) -> Result<SessionKey, RpcError> {
    let unknown = || {
        RpcError::invalid(format!(
            "contextId `{context}` is not one of this agent's conversations with `{caller}`; \
             leave it out to start one"
        ))
    };
    let key: SessionKey = context.parse().map_err(|_| unknown())?;
    if key.bot == *bot && key.a2a_peer() == Some(caller.as_str()) {
        Ok(key)
    } else {
        Err(unknown())
    }
}

/// The caller's name: `metadata.caller` on the request or the message, else `client`.
fn caller_of(params: &Value, message: &Value) -> Result<A2aCaller, RpcError> {
    let named = [params, message]
        .iter()
        .find_map(|v| v.pointer("/metadata/caller").and_then(Value::as_str));
    match named {
        None => Ok(A2aCaller::anonymous()),
        Some(name) => A2aCaller::parse(name).ok_or_else(|| {
            RpcError::invalid(format!(
                "metadata.caller `{name}` cannot name a caller: use lowercase letters, digits, \
                 `-` and `_` (at most 64)"
            ))
        }),
    }
}

/// A file part given inline (`raw`, base64): kept as an artifact the bot's turn is handed.
struct InlineFile {
    name: String,
    media_type: Option<String>,
    content: Vec<u8>,
}

/// The message's text (its text parts, its data parts as JSON, and a line naming each file
/// given by URL, one per line) and its inline files. Nothing is dropped: a part of none of
/// these kinds, or undecodable bytes, is refused.
fn read_message(message: &Value) -> Result<(String, Vec<InlineFile>), RpcError> {
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| RpcError::invalid("message.parts is empty"))?;
    let mut lines = Vec::with_capacity(parts.len());
    let mut files = Vec::new();
    for part in parts {
        let name = part
            .get("filename")
            .and_then(Value::as_str)
            .unwrap_or("file");
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            lines.push(text.to_owned());
        } else if let Some(data) = part.get("data") {
            lines.push(data.to_string());
        } else if let Some(raw) = part.get("raw").and_then(Value::as_str) {
            let content = BASE64.decode(raw).map_err(|err| RpcError {
                code: -32005,
                message: format!(
                    "file part `{name}`: `raw` is not base64 ({err}); send the bytes \
                     base64-encoded (standard alphabet, with padding)"
                ),
            })?;
            files.push(InlineFile {
                name: name.to_owned(),
                media_type: part
                    .get("mediaType")
                    .and_then(Value::as_str)
                    .filter(|m| !m.trim().is_empty())
                    .map(str::to_owned),
                content,
            });
        } else if let Some(url) = part.get("url").and_then(Value::as_str) {
            lines.push(format!("File `{name}` at {url}"));
        } else {
            return Err(RpcError {
                code: -32005,
                message: "a part is neither text, data nor a file (`raw` or `url`)".into(),
            });
        }
    }
    Ok((lines.join("\n"), files))
}

/// Keep the caller's inline files as artifacts in the task's session, so the bot's turn is
/// handed them as a `sessions_send` with `artifacts` hands them: their ids, in order.
async fn keep_files(
    engine: &Engine,
    session: &SessionKey,
    files: Vec<InlineFile>,
) -> Result<Vec<String>, RpcError> {
    let cap = engine.config().artifacts.max_bytes;
    let mut ids = Vec::with_capacity(files.len());
    for file in files {
        let bytes = file.content.len() as u64;
        if bytes > cap {
            return Err(RpcError {
                code: -32005,
                message: format!(
                    "file part `{}` is {bytes} bytes, over this agent's limit of {cap} bytes; \
                     send a smaller file or give it by `url`",
                    file.name
                ),
            });
        }
        let media_type = file.media_type.unwrap_or_else(|| {
            media_type::guess(&file.name, "application/octet-stream").to_owned()
        });
        let new = NewArtifact {
            name: file.name,
            media_type,
            content: file.content,
            bot: session.bot.clone(),
            session: session.clone(),
            run_id: None,
            inputs: Vec::new(),
            created_ms: now_ms(),
        };
        match engine.store().artifact_put(new).await {
            Ok(Put::Stored(artifact)) => ids.push(artifact.id),
            Ok(Put::UnknownInputs(_)) => {
                return Err(RpcError::internal(
                    "a file part named inputs it cannot have",
                ));
            }
            Err(err) => return Err(RpcError::internal(err)),
        }
    }
    Ok(ids)
}

/// `GetTask`.
async fn get(engine: &Engine, bot: &Bot, params: &Value, base: &str) -> Result<Value, RpcError> {
    let d = task_of(engine, bot, params).await?;
    let asked = waits_on(engine, &d).await?;
    Ok(task(&d, asked.as_ref(), base))
}

/// `CancelTask`: the bot's turn is stopped and nothing of it is posted; a task waiting on its
/// caller has its question withdrawn; a task already ended cannot be canceled.
async fn cancel(relay: &Relay, bot: &Bot, params: &Value, base: &str) -> Result<Value, RpcError> {
    let engine = relay.engine();
    let mut d = task_of(engine, bot, params).await?;
    if let Some(asked) = waits_on(engine, &d).await? {
        let by = format!("a2a:{}", d.sender_session.a2a_peer().unwrap_or_default());
        let withdrawn = engine
            .store()
            .resolve_escalation(
                &asked.id,
                EscalationState::Failed,
                Some("the A2A caller canceled the task"),
                &by,
                now_ms(),
            )
            .await
            .map_err(RpcError::internal)?;
        // Open again only to be canceled; answered meanwhile, it runs on its answer.
        d = match withdrawn {
            Some(_) => relay::resume_task(engine, &d.run_id).await.unwrap_or(d),
            None => task_by_id(engine, bot, &d.run_id).await?,
        };
    }
    if d.state.is_settled() {
        return Err(RpcError {
            code: -32002,
            message: format!("task `{}` already ended ({})", d.run_id, d.state.as_str()),
        });
    }
    let canceled = relay::cancel(relay, &d.run_id)
        .await
        .map_err(RpcError::internal)?
        .ok_or_else(|| RpcError::task_not_found(&d.run_id))?;
    Ok(task(&canceled, None, base))
}

/// The delivery `params.id` names, if it is an A2A task of `bot`.
async fn task_of(engine: &Engine, bot: &Bot, params: &Value) -> Result<Delivery, RpcError> {
    let id = params
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid("params.id is missing"))?;
    task_by_id(engine, bot, id).await
}

/// Task `id` of `bot`.
async fn task_by_id(engine: &Engine, bot: &Bot, id: &str) -> Result<Delivery, RpcError> {
    let found = engine
        .store()
        .delivery(id)
        .await
        .map_err(RpcError::internal)?;
    found
        .filter(|d| is_task_of(d, bot.id()))
        .ok_or_else(|| RpcError::task_not_found(id))
}

fn is_task_of(d: &Delivery, bot: &BotId) -> bool {
    d.target == *bot && d.sender_session.a2a_peer().is_some()
}

/// `ListTasks`: this agent's tasks, newest first, in `contextId` when given, a page at a
/// time (`a2a_pages.rs`).
async fn list(engine: &Engine, bot: &Bot, params: &Value, base: &str) -> Result<Value, RpcError> {
    let session = match params.get("contextId").and_then(Value::as_str) {
        Some(context) if !context.is_empty() => Some(
            context
                .parse::<SessionKey>()
                .map_err(|_| RpcError::invalid(format!("contextId `{context}` is not one")))?,
        ),
        _ => None,
    };
    let bad = |err: a2a_pages::PageError| RpcError::invalid(err.to_string());
    let limit = a2a_pages::page_size(params).map_err(bad)?;
    let page = engine
        .store()
        .a2a_tasks(TaskQuery {
            bot: bot.id().clone(),
            session,
            after: a2a_pages::page_start(params).map_err(bad)?,
            limit,
        })
        .await
        .map_err(RpcError::internal)?;
    let mut tasks: Vec<Value> = Vec::with_capacity(page.tasks.len());
    for d in &page.tasks {
        let asked = waits_on(engine, d).await?;
        tasks.push(task(d, asked.as_ref(), base));
    }
    Ok(json!({
        "tasks": tasks,
        "nextPageToken": a2a_pages::next_page_token(page.next.as_ref()),
        "pageSize": limit,
        "totalSize": page.total,
    }))
}

/// Stream a task over SSE: the task as it stands, `working` while it runs (again with each
/// progress line the bot reports), its reply in chunks as the bot writes it, and its final
/// status (`input-required` with the question the bot asked, if it asked one). A
/// client that goes away leaves the task running. `live` was subscribed before `d` was read:
/// no progress line falls between the two.
fn stream(
    relay: Relay,
    id: Value,
    d: Delivery,
    mut live: broadcast::Receiver<Arc<Stamped>>,
    base: String,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    // Opened before the task is read again: the turn finds it with its next piece of text, and
    // a tap found late is first given all of the text so far.
    let mut tap = relay.engine().taps().open_run(&d.run_id);
    tokio::spawn(async move {
        let send = |result: Value| {
            let body = json!({"jsonrpc": "2.0", "id": id, "result": result});
            tx.send(Ok::<_, Infallible>(
                SseEvent::default().data(body.to_string()),
            ))
            .is_ok()
        };
        let engine = relay.engine();
        let asked = waits_on(engine, &d).await.ok().flatten();
        if !send(json!({"task": task(&d, asked.as_ref(), &base)})) {
            return;
        }
        let mut chunks = ReplyChunks::default();
        let d = if d.state.is_settled() {
            d
        } else {
            let working = status(&d, DeliveryState::Running);
            if !send(json!({"statusUpdate": update(&d, working)})) {
                return;
            }
            // Lines on the row may come live too: each is told once.
            let mut told: Vec<String> = Vec::with_capacity(d.progress.len());
            for line in &d.progress {
                send(json!({"statusUpdate": update(&d, progress(&d, &line.message))}));
                told.push(line.message.clone());
            }
            let run_id = d.run_id.clone();
            let settle = relay::settled(&relay, &run_id, FOLLOW_FOR);
            tokio::pin!(settle);
            let settled = loop {
                tokio::select! {
                    settled = &mut settle => break settled,
                    Some(piece) = tap.pieces.recv() => {
                        if !chunks.add(&d, piece, &send) {
                            return;
                        }
                    }
                    heard = live.recv() => match heard {
                        Ok(stamped) => {
                            let Event::Progress { run_id, message, .. } = &stamped.event else {
                                continue;
                            };
                            if *run_id != d.run_id {
                                continue;
                            }
                            if let Some(at) = told.iter().position(|t| t == message) {
                                told.swap_remove(at);
                            } else if !send(json!({"statusUpdate": update(&d, progress(&d, message))})) {
                                return;
                            }
                        }
                        // Lines missed by a slow reader are on the task's row.
                        Err(RecvError::Lagged(_)) => {}
                        Err(RecvError::Closed) => break (&mut settle).await,
                    },
                }
            };
            // Written before the run settled: all of it is in the tap by now.
            while let Ok(piece) = tap.pieces.try_recv() {
                if !chunks.add(&d, piece, &send) {
                    return;
                }
            }
            match settled {
                Ok(Some(settled)) => settled,
                Ok(None) | Err(_) => d,
            }
        };
        let asked = waits_on(engine, &d).await.ok().flatten();
        if let Some(reply) = d
            .reply
            .as_deref()
            .filter(|r| !r.is_empty() && asked.is_none())
        {
            chunks.end(&d, reply, &send);
        }
        send(json!({"statusUpdate": update(&d, final_status(&d, asked.as_ref()))}));
    });
    let events = tokio_stream::wrappers::UnboundedReceiverStream::new(rx);
    Sse::new(events).into_response()
}

/// The reply streamed as the bot writes it: appended chunks of the task's `reply` artifact,
/// each piece sent when the next one comes, so the last can say it is the last.
#[derive(Default)]
struct ReplyChunks {
    /// What the chunks sent so far hold.
    sent: String,
    /// The newest piece, not sent yet.
    held: Option<String>,
}

impl ReplyChunks {
    /// A piece of the reply as written: the one held before goes out. False once the client
    /// is gone.
    fn add(&mut self, d: &Delivery, piece: String, send: &impl Fn(Value) -> bool) -> bool {
        match self.held.replace(piece) {
            Some(held) => self.send(d, held, false, send),
            None => true,
        }
    }

    /// The turn ended with `reply`: the rest of it as the last chunk, or, when what was
    /// streamed is not how the reply begins (text the model took back), the whole reply in
    /// place of it.
    fn end(&mut self, d: &Delivery, reply: &str, send: &impl Fn(Value) -> bool) {
        let held = self.held.take().unwrap_or_default();
        let streamed = format!("{}{held}", self.sent);
        match reply.strip_prefix(streamed.as_str()) {
            Some(rest) => self.send(d, held + rest, true, send),
            None => {
                self.sent.clear();
                self.send(d, reply.to_owned(), true, send)
            }
        };
    }

    fn send(
        &mut self,
        d: &Delivery,
        text: String,
        last: bool,
        send: &impl Fn(Value) -> bool,
    ) -> bool {
        let event = json!({
            "taskId": d.run_id,
            "contextId": d.target_session.render(),
            "artifact": {"artifactId": "reply", "name": "reply", "parts": [{"text": text}]},
            "append": !self.sent.is_empty(),
            "lastChunk": last,
        });
        self.sent.push_str(&text);
        send(json!({"artifactUpdate": event}))
    }
}

/// A `working` status carrying a progress line the bot reported.
fn progress(d: &Delivery, line: &str) -> Value {
    let mut working = status(d, DeliveryState::Running);
    working["message"] = json!({
        "messageId": format!("{}-progress-{}", d.run_id, uuid::Uuid::new_v4().simple()),
        "taskId": d.run_id,
        "contextId": d.target_session.render(),
        "role": "ROLE_AGENT",
        "parts": [{"text": line}],
    });
    working
}

fn update(d: &Delivery, status: Value) -> Value {
    json!({"taskId": d.run_id, "contextId": d.target_session.render(), "status": status})
}

/// A delivery as an A2A task, waiting on its caller when `asked` it a question.
fn task(d: &Delivery, asked: Option<&Escalation>, base: &str) -> Value {
    // What the asking turn said after its question is not the task's answer.
    let reply = reply_artifact(d).filter(|_| asked.is_none());
    let mut artifacts: Vec<Value> = reply.into_iter().collect();
    artifacts.extend(d.artifacts_out.iter().map(|a| {
        json!({"artifactId": a.id, "name": a.name, "parts": [{
            "url": format!("{base}/api/artifacts/{}/content", a.id),
            "filename": a.name,
            "mediaType": a.media_type,
        }]})
    }));
    let message_id = d
        .idempotency_key
        .as_deref()
        .and_then(|k| k.splitn(3, ':').nth(2))
        .unwrap_or_default();
    json!({
        "id": d.run_id,
        "contextId": d.target_session.render(),
        "status": final_status(d, asked),
        "artifacts": artifacts,
        "history": [{
            "messageId": message_id,
            "contextId": d.target_session.render(),
            "taskId": d.run_id,
            "role": "ROLE_USER",
            "parts": [{"text": d.message}],
        }],
    })
}

/// The bot's reply as the task's artifact, when it said something.
fn reply_artifact(d: &Delivery) -> Option<Value> {
    let reply = d.reply.as_deref().filter(|r| !r.is_empty())?;
    Some(json!({"artifactId": "reply", "name": "reply", "parts": [{"text": reply}]}))
}

/// The status task `d` stands at: `input-required` with the question while it waits on one
/// (`asked`), else its delivery's.
fn final_status(d: &Delivery, asked: Option<&Escalation>) -> Value {
    let Some(asked) = asked else {
        return status(d, d.state);
    };
    let timestamp = chrono::DateTime::from_timestamp_millis(asked.created_ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    json!({"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": timestamp, "message": {
        "messageId": format!("{}-{}", d.run_id, asked.id),
        "taskId": d.run_id,
        "contextId": d.target_session.render(),
        "role": "ROLE_AGENT",
        "parts": [{"text": asked.text}],
    }})
}

/// A task status for `state`, with the reason as the agent's message for an unhappy end.
fn status(d: &Delivery, state: DeliveryState) -> Value {
    let name = match state {
        DeliveryState::Queued => "TASK_STATE_SUBMITTED",
        DeliveryState::Running => "TASK_STATE_WORKING",
        DeliveryState::Delivered => "TASK_STATE_COMPLETED",
        DeliveryState::Refused => "TASK_STATE_REJECTED",
        DeliveryState::Canceled => "TASK_STATE_CANCELED",
        DeliveryState::Failed | DeliveryState::TimedOut | DeliveryState::InvalidOutput => {
            "TASK_STATE_FAILED"
        }
    };
    let at = d.finished_ms.or(d.started_ms).unwrap_or(d.created_ms);
    let timestamp = chrono::DateTime::from_timestamp_millis(at)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut status = json!({"state": name, "timestamp": timestamp});
    if let Some(reason) = d.reason.as_deref().filter(|_| state == d.state) {
        status["message"] = json!({
            "messageId": format!("{}-status", d.run_id),
            "taskId": d.run_id,
            "contextId": d.target_session.render(),
            "role": "ROLE_AGENT",
            "parts": [{"text": reason}],
        });
    }
    status
}
