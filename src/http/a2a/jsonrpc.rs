//! The JSON-RPC binding of A2A 1.0: `POST /a2a/<bot>` with one call (`SendMessage`,
//! `SendStreamingMessage`, `GetTask`, `SubscribeToTask`, `ListTasks`, `CancelTask`), answered
//! as a JSON-RPC response or, for the streaming calls, as SSE events each carrying one.

use axum::Json;
use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::addressed::Addressed;
use super::error::{A2aError, ErrorKind};
use super::stream::{self, Follow};
use super::tasks;
use crate::relay::Relay;
use crate::roster::Bot;

/// A JSON-RPC request.
#[derive(Deserialize)]
struct RpcRequest {
    #[serde(default)]
    id: Value,
    method: String,
    #[serde(default)]
    params: Value,
}

fn reply(id: &Value, result: Result<Value, A2aError>) -> Response {
    Json(response(id.clone(), result)).into_response()
}

/// The JSON-RPC response to call `id`, the result or error moved in (`json!` would copy it
/// through serialization).
fn response(id: Value, result: Result<Value, A2aError>) -> Value {
    let (key, value) = match result {
        Ok(result) => ("result", result),
        Err(err) => ("error", err.rpc()),
    };
    Value::Object(serde_json::Map::from_iter([
        ("jsonrpc".to_owned(), Value::from("2.0")),
        ("id".to_owned(), id),
        (key.to_owned(), value),
    ]))
}

/// The task `params.id` names.
fn task_id(params: &Value) -> Result<&str, A2aError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| A2aError::invalid("params.id is missing"))
}

/// `POST /a2a/<bot>`: one JSON-RPC call.
pub(in crate::http) async fn rpc(to: Addressed, body: Bytes) -> Response {
    let request: RpcRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(err) => {
            let err = A2aError::new(
                ErrorKind::Parse,
                format!("the body is not a JSON-RPC request: {err}"),
            );
            return reply(&Value::Null, Err(err));
        }
    };
    let id = request.id;
    if let Err(err) = to.asked.supported() {
        return reply(&id, Err(err));
    }
    let Addressed {
        relay, bot, base, ..
    } = to;
    let params = request.params;
    match request.method.as_str() {
        "SendStreamingMessage" => open(&relay, &bot, &id, Ok(Follow::Send(&params)), base).await,
        "SubscribeToTask" => {
            let what = task_id(&params).map(Follow::Task);
            open(&relay, &bot, &id, what, base).await
        }
        method => reply(&id, call(&relay, &bot, method, &params, &base).await),
    }
}

/// A call answered with one response.
async fn call(
    relay: &Relay,
    bot: &Bot,
    method: &str,
    params: &Value,
    base: &str,
) -> Result<Value, A2aError> {
    let engine = relay.engine();
    match method {
        "SendMessage" => tasks::send(relay, bot, params, base).await,
        "GetTask" => tasks::get(engine, bot, task_id(params)?, base).await,
        "ListTasks" => tasks::list(engine, bot, params, base).await,
        "CancelTask" => tasks::cancel(relay, bot, task_id(params)?, base).await,
        other => Err(A2aError::new(
            ErrorKind::MethodNotFound,
            format!(
                "no method `{other}`; this agent serves SendMessage, SendStreamingMessage, \
                 GetTask, SubscribeToTask, ListTasks and CancelTask"
            ),
        )),
    }
}

/// A streaming call: its events, each a JSON-RPC response to call `id`, or the error that
/// kept the stream from opening.
async fn open(
    relay: &Relay,
    bot: &Bot,
    id: &Value,
    what: Result<Follow<'_>, A2aError>,
    base: String,
) -> Response {
    let call = id.clone();
    let frame = move |result| response(call.clone(), Ok(result));
    let opened = match what {
        Ok(what) => stream::follow(relay, bot, what, base, frame).await,
        Err(err) => Err(err),
    };
    opened.unwrap_or_else(|err| reply(id, Err(err)))
}
