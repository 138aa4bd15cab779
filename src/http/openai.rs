//! `GET /v1/models` and `POST /v1/chat/completions`: talk to a bot with any OpenAI client.
//!
//! `model` (or `bot_id`) names the bot and `user` names the human. The request runs through the
//! full pipeline as a local direct message, so the bot's session, transcript and guards apply
//! exactly as on a platform. The conversation lives in the gateway: only the last user message
//! of `messages` is taken; earlier ones are already in the session. `stream: true` answers with
//! server-sent events in OpenAI's chunk format.

use std::convert::Infallible;

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use baton_contract::Platform;
use futures::stream;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{AppState, MAX_TEXT_BYTES};
use crate::dispatcher::{DropReason, Handled};

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
pub(super) async fn models(State(state): State<AppState>) -> Json<Value> {
    let data: Vec<Value> = state
        .dispatcher
        .shared()
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
    State(state): State<AppState>,
    request: Result<Json<ChatRequest>, JsonRejection>,
) -> Response {
    // OpenAI clients parse errors in OpenAI's shape, a bad body included.
    let Json(request) = match request {
        Ok(request) => request,
        Err(rejection) => return error(rejection.status(), &rejection.body_text()),
    };
    let Some(bot) = request.bot_id.as_deref().or(request.model.as_deref()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "set `model` to a bot id (see GET /v1/models)",
        );
    };
    let shared = state.dispatcher.shared();
    let Some(account) = shared.roster().account_of_bot(Platform::Local, bot) else {
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
    let event = match state.hub.direct(&account.id, user, &text) {
        Ok(event) => event,
        Err(refusal) => return error(super::api::refused_status(&refusal), &refusal.to_string()),
    };
    let content = match state.dispatcher.handle(event).await {
        Handled::Replied(text) | Handled::Admin(text) => text,
        Handled::Silent => String::new(),
        Handled::Answered(id) => format!("(your answer to {id} was passed on)"),
        Handled::Failed(err) => return error(StatusCode::BAD_GATEWAY, &err),
        Handled::Dropped(DropReason::ShuttingDown) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the gateway is shutting down; retry shortly",
            );
        }
        Handled::Dropped(DropReason::StoreFailing) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the gateway cannot record messages now (its store is failing); retry later",
            );
        }
        Handled::Dropped(DropReason::RateLimited) => {
            return error(
                StatusCode::TOO_MANY_REQUESTS,
                "too many messages; slow down",
            );
        }
        Handled::Dropped(DropReason::Busy(full)) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the bot is busy ({full}); try again in a moment"),
            );
        }
        other => return error(StatusCode::FORBIDDEN, &format!("not answered: {other:?}")),
    };
    let id = format!("chatcmpl-{}", uuid::Uuid::new_v4().simple());
    let created = crate::mirror::now_ms() / 1000;
    if request.stream {
        stream_response(id, created, bot, content)
    } else {
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
}

fn stream_response(id: String, created: i64, bot: &str, content: String) -> Response {
    let chunk = |delta: Value, finish: Value| {
        let body = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": bot,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        Ok::<_, Infallible>(Event::default().data(body.to_string()))
    };
    let events = vec![
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": content}), Value::Null),
        chunk(json!({}), json!("stop")),
        Ok(Event::default().data("[DONE]")),
    ];
    Sse::new(stream::iter(events)).into_response()
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
/// failure on baton's side or its backend's (5xx) is a `server_error`, worth a retry.
fn error(status: StatusCode, message: &str) -> Response {
    let kind = if status.is_server_error() {
        "server_error"
    } else {
        "invalid_request_error"
    };
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": null}});
    (status, Json(body)).into_response()
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
