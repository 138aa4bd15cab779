//! `GET /v1/models` and `POST /v1/chat/completions`: talk to a bot with any OpenAI client.
//!
//! `model` (or `bot_id`) names the bot and `user` names the human. The request runs through the
//! full pipeline as a local direct message, so the bot's session, transcript and guards apply
//! exactly as on a platform. The conversation lives in the gateway: only the last user message
//! of `messages` is taken; earlier ones are already in the session. `stream: true` answers with
//! server-sent events in OpenAI's chunk format, each piece of the reply as the turn writes it.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use baton_contract::Platform;
use serde::Deserialize;
use serde_json::{Value, json};

use super::MAX_TEXT_BYTES;
use crate::bot_id::BotId;
use crate::dispatcher::{Dispatcher, DropReason, Handled};
use crate::engine::{Engine, Tap};
use crate::field_bound::{self, Cap};
use crate::local::LocalHub;

/// The request fields baton reads; the rest of OpenAI's request is accepted and ignored.
#[derive(Debug, Deserialize)]
pub(super) struct ChatRequest {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    bot_id: Option<String>,
    #[serde(default)]
    messages: Vec<RequestMessage>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    user: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RequestMessage {
    role: String,
    #[serde(default)]
    content: Value,
}

/// The roster as OpenAI models.
pub(super) async fn models(State(engine): State<Engine>) -> Json<Value> {
    let data: Vec<Value> = engine
        .roster()
        .bots()
        .iter()
        .map(|bot| {
            json!({
                "id": bot.id(),
                "object": "model",
                "created": 0,
                "owned_by": "baton",
                "name": bot.config.display_name(),
                "description": bot.config.description,
            })
        })
        .collect();
    Json(json!({"object": "list", "data": data}))
}

/// Run one turn and answer as a chat completion.
pub(super) async fn chat_completions(
    State(dispatcher): State<Dispatcher>,
    State(hub): State<Arc<LocalHub>>,
    request: Result<Json<ChatRequest>, JsonRejection>,
) -> Response {
    // OpenAI clients parse errors in OpenAI's shape, a bad body included.
    let Json(request) = match request {
        Ok(request) => request,
        Err(rejection) => return error(rejection.status(), &rejection.body_text()),
    };
    for (field, value) in [("model", &request.model), ("bot_id", &request.bot_id)] {
        if let Err(err) = field_bound::check_str(field, value.as_deref(), Cap::Id) {
            return error(StatusCode::PAYLOAD_TOO_LARGE, &err.to_string());
        }
    }
    let Some(bot) = request.bot_id.as_deref().or(request.model.as_deref()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "set `model` to a bot id (see GET /v1/models)",
        );
    };
    let engine = dispatcher.engine();
    let known = bot.parse().ok();
    let Some(account) = known
        .as_ref()
        .and_then(|bot: &BotId| engine.roster().account_of_bot(Platform::Local, bot))
    else {
        return error(
            StatusCode::NOT_FOUND,
            &format!("no bot `{bot}`; GET /v1/models lists them"),
        );
    };
    let Some(text) = last_user_text(&request.messages) else {
        return error(
            StatusCode::BAD_REQUEST,
            "`messages` has no user message with text",
        );
    };
    if text.len() > MAX_TEXT_BYTES {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the message is over 100 kB; send less text",
        );
    }
    let user = request.user.as_deref().unwrap_or("local-user");
    let event = match hub.direct(&account.id, user, &text).await {
        Ok(event) => event,
        Err(refusal) => return error(super::api::refused_status(&refusal), &refusal.to_string()),
    };
    if request.stream {
        let tap = engine.taps().open(&account.id, &event.message_id);
        let dispatcher = dispatcher.clone();
        // Under the caller's `traceparent`, if it sent one (`trace::continue_request`).
        let turn = tokio::spawn(crate::trace::carry(async move {
            dispatcher.handle(event).await
        }));
        return stream_response(bot.to_owned(), tap, turn);
    }
    let content = match answer(dispatcher.handle(event).await) {
        Ok(content) => content,
        Err((status, message)) => return error(status, &message),
    };
    let id = format!("chatcmpl-{}", uuid::Uuid::new_v4().simple());
    let created = crate::timing::now_ms() / 1000;
    Json(json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": bot,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop",
        }],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }))
    .into_response()
}

/// What the pipeline's outcome says to the client: the reply's content, or an error status
/// and message.
fn answer(handled: Handled) -> Result<String, (StatusCode, String)> {
    let refused = |status: StatusCode, message: &str| Err((status, message.to_owned()));
    match handled {
        Handled::Replied(text) | Handled::Admin(text) => Ok(text),
        Handled::Silent => Ok(String::new()),
        Handled::Answered(id) => Ok(format!("(your answer to {id} was passed on)")),
        Handled::Failed(err) => refused(StatusCode::BAD_GATEWAY, &err),
        Handled::Dropped(DropReason::ShuttingDown) => refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "the gateway is shutting down; retry shortly",
        ),
        Handled::Dropped(DropReason::StoreFailing) => refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "the gateway cannot record messages now (its store is failing); retry later",
        ),
        Handled::Dropped(DropReason::RateLimited) => refused(
            StatusCode::TOO_MANY_REQUESTS,
            "too many messages; slow down",
        ),
        Handled::Dropped(DropReason::Busy(full)) => refused(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("the bot is busy ({full}); try again in a moment"),
        ),
        other => refused(StatusCode::FORBIDDEN, &format!("not answered: {other:?}")),
    }
}

/// A streamed completion: each piece of the reply as soon as the turn has it (never a piece of
/// the silent token), then whatever of the finished reply was not sent yet. A failure after
/// the stream began is sent as an `error` event, which the OpenAI clients raise.
fn stream_response(bot: String, mut tap: Tap, turn: tokio::task::JoinHandle<Handled>) -> Response {
    let id = format!("chatcmpl-{}", uuid::Uuid::new_v4().simple());
    let created = crate::timing::now_ms() / 1000;
    let chunk = move |delta: Value, finish: Value| {
        let body = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": bot,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        Event::default().data(body.to_string())
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let send = |event: Event| tx.send(Ok::<_, Infallible>(event)).is_ok();
        send(chunk(
            json!({"role": "assistant", "content": ""}),
            Value::Null,
        ));
        let mut sent = String::new();
        // The tap closes when the turn is over and has dropped its sender.
        let mut turn = turn;
        let handled = loop {
            tokio::select! {
                biased;
                piece = tap.pieces.recv() => match piece {
                    Some(piece) => {
                        sent.push_str(&piece);
                        if !send(chunk(json!({"content": piece}), Value::Null)) {
                            return; // the client went away; the turn goes on
                        }
                    }
                    None => break (&mut turn).await,
                },
                handled = &mut turn => break handled,
            }
        };
        // Pieces sent before the turn ended are still in the tap.
        while let Ok(piece) = tap.pieces.try_recv() {
            sent.push_str(&piece);
            send(chunk(json!({"content": piece}), Value::Null));
        }
        let handled =
            handled.unwrap_or_else(|_| Handled::Failed("the turn stopped unexpectedly".into()));
        match answer(handled) {
            Ok(content) => {
                if let Some(rest) = content
                    .strip_prefix(sent.as_str())
                    .filter(|r| !r.is_empty())
                {
                    send(chunk(json!({"content": rest}), Value::Null));
                }
                send(chunk(json!({}), json!("stop")));
                send(Event::default().data("[DONE]"));
            }
            Err((status, message)) => {
                send(Event::default().data(error_body(status, &message).to_string()));
            }
        }
    });
    let events = tokio_stream::wrappers::UnboundedReceiverStream::new(rx);
    Sse::new(events).into_response()
}

/// The text of the last user message; `content` may be a string or a list of parts.
fn last_user_text(messages: &[RequestMessage]) -> Option<String> {
    let message = messages.iter().rev().find(|m| m.role == "user")?;
    let text = match &message.content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(text)
}

/// OpenAI's error shape: a refused request is the client's to fix (`invalid_request_error`); a
/// failure on baton's side or its backend's (5xx) is a `server_error`, worth a retry. A 503
/// (shutting down, busy, a store that cannot record the message) says when, as the room API's
/// does: the message was not taken, and sending it again shortly may be.
fn error(status: StatusCode, message: &str) -> Response {
    let mut response = (status, Json(error_body(status, message))).into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from_static("5"),
        );
    }
    response
}

/// The body of [`error`], also sent as the last event of a stream that failed.
fn error_body(status: StatusCode, message: &str) -> Value {
    let kind = if status.is_server_error() {
        "server_error"
    } else {
        "invalid_request_error"
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refusals_are_request_errors_and_failures_server_errors() {
        let cases = [
            (StatusCode::BAD_REQUEST, "invalid_request_error"),
            (StatusCode::NOT_FOUND, "invalid_request_error"),
            (StatusCode::BAD_GATEWAY, "server_error"),
            (StatusCode::SERVICE_UNAVAILABLE, "server_error"),
        ];
        for (status, kind) in cases {
            let response = error(status, "what happened");
            assert_eq!(response.status(), status);
            let retry = response.headers().get(axum::http::header::RETRY_AFTER);
            assert_eq!(
                retry.is_some(),
                status == StatusCode::SERVICE_UNAVAILABLE,
                "Retry-After on 503 only: {status}"
            );
            let bytes = axum::body::to_bytes(response.into_body(), 4096)
                .await
                .unwrap();
            let body: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(body["error"]["type"], kind, "{status}");
            assert_eq!(body["error"]["message"], "what happened");
            assert!(body["error"]["param"].is_null() && body["error"]["code"].is_null());
        }
    }

    #[test]
    fn last_user_text_reads_strings_and_parts() {
        let m = |role: &str, content: Value| RequestMessage {
            role: role.into(),
            content,
        };
        let msgs = vec![
            m("user", json!("first")),
            m("assistant", json!("a")),
            m("user", json!([{"type": "text", "text": "second"}])),
        ];
        assert_eq!(last_user_text(&msgs).as_deref(), Some("second"));
        assert_eq!(last_user_text(&[m("system", json!("s"))]), None);
    }
}
