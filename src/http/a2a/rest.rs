//! The HTTP+JSON (REST) binding of A2A 1.0, under each agent's URL `/a2a/<bot>`:
//!
//! - `POST /message:send` and `POST /message:stream` (SSE), the send request's JSON as body;
//! - `GET /tasks/<id>`, `POST /tasks/<id>:cancel`, `GET|POST /tasks/<id>:subscribe` (SSE);
//! - `GET /tasks?contextId=&pageSize=&pageToken=`.
//!
//! Answers are the protocol's JSON as the JSON-RPC binding's results are; an error is its HTTP
//! status with a `google.rpc.Status` body (`error.rs`).

use std::collections::HashMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query};
use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::addressed::Addressed;
use super::error::{A2aError, ErrorKind};
use super::stream::{self, Follow};
use super::tasks;
use crate::relay::Relay;
use crate::roster::Bot;

/// The media type of the binding's JSON bodies.
const A2A_JSON: &str = "application/a2a+json";

/// An answer, or the error as its HTTP status and body.
fn respond(result: Result<Value, A2aError>) -> Response {
    let (status, body) = match result {
        Ok(body) => (axum::http::StatusCode::OK, body),
        Err(err) => err.http(),
    };
    (status, [(header::CONTENT_TYPE, A2A_JSON)], Json(body)).into_response()
}

/// The request's JSON body (`SendMessageRequest`).
fn body_of(body: &Bytes) -> Result<Value, A2aError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(A2aError::new(
            ErrorKind::Parse,
            "the body is not a JSON object; send the request as one",
        )),
        Err(err) => Err(A2aError::new(
            ErrorKind::Parse,
            format!("the body is not JSON: {err}"),
        )),
    }
}

/// A stream's events, each the protocol's `StreamResponse`, or the error that kept it from
/// opening.
async fn open(relay: &Relay, bot: &Bot, what: Follow<'_>, base: String) -> Response {
    stream::follow(relay, bot, what, base, std::convert::identity)
        .await
        .unwrap_or_else(|err| respond(Err(err)))
}

/// `POST /a2a/<bot>/message:send`.
pub(in crate::http) async fn send_message(to: Addressed, body: Bytes) -> Response {
    let answer = match to.asked.supported().and_then(|()| body_of(&body)) {
        Ok(params) => tasks::send(&to.relay, &to.bot, &params, &to.base).await,
        Err(err) => Err(err),
    };
    respond(answer)
}

/// `POST /a2a/<bot>/message:stream`.
pub(in crate::http) async fn stream_message(to: Addressed, body: Bytes) -> Response {
    match to.asked.supported().and_then(|()| body_of(&body)) {
        Ok(params) => open(&to.relay, &to.bot, Follow::Send(&params), to.base).await,
        Err(err) => respond(Err(err)),
    }
}

/// `GET /a2a/<bot>/tasks`: the query's parameters are `ListTasks`'s.
pub(in crate::http) async fn list_tasks(
    to: Addressed,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    if let Err(err) = to.asked.supported() {
        return respond(Err(err));
    }
    let params: Value = query
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect::<serde_json::Map<_, _>>()
        .into();
    respond(tasks::list(to.relay.engine(), &to.bot, &params, &to.base).await)
}

/// What a request under `/tasks/<segment>` asks of a task.
#[derive(Debug, PartialEq, Eq)]
enum TaskCall<'a> {
    Get(&'a str),
    Cancel(&'a str),
    Subscribe(&'a str),
}

impl<'a> TaskCall<'a> {
    /// `GET <id>`, `POST <id>:cancel`, `GET|POST <id>:subscribe`; task ids hold no `:`.
    fn parse(method: &Method, segment: &'a str) -> Option<TaskCall<'a>> {
        match (segment.split_once(':'), method) {
            (None, &Method::GET) => Some(TaskCall::Get(segment)),
            (Some((id, "cancel")), &Method::POST) => Some(TaskCall::Cancel(id)),
            (Some((id, "subscribe")), &Method::GET | &Method::POST) => {
                Some(TaskCall::Subscribe(id))
            }
            _ => None,
        }
    }
}

/// `GET /a2a/<bot>/tasks/<id>`, `POST …/tasks/<id>:cancel`, `GET|POST …/tasks/<id>:subscribe`.
pub(in crate::http) async fn task_call(
    to: Addressed,
    Path((_, segment)): Path<(String, String)>,
    method: Method,
) -> Response {
    let Some(call) = TaskCall::parse(&method, &segment) else {
        return respond(Err(A2aError::new(
            ErrorKind::MethodNotFound,
            format!(
                "no `{method} /tasks/{segment}`; this agent serves GET /tasks/<id>, \
                 POST /tasks/<id>:cancel and GET or POST /tasks/<id>:subscribe"
            ),
        )));
    };
    if let Err(err) = to.asked.supported() {
        return respond(Err(err));
    }
    let Addressed {
        relay, bot, base, ..
    } = to;
    respond(match call {
        TaskCall::Get(id) => tasks::get(relay.engine(), &bot, id, &base).await,
        TaskCall::Cancel(id) => tasks::cancel(&relay, &bot, id, &base).await,
        TaskCall::Subscribe(id) => return open(&relay, &bot, Follow::Task(id), base).await,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_segment_names_the_call_by_its_suffix_and_method() {
        assert_eq!(
            TaskCall::parse(&Method::GET, "run_1"),
            Some(TaskCall::Get("run_1"))
        );
        assert_eq!(
            TaskCall::parse(&Method::POST, "run_1:cancel"),
            Some(TaskCall::Cancel("run_1"))
        );
        for method in [Method::GET, Method::POST] {
            assert_eq!(
                TaskCall::parse(&method, "run_1:subscribe"),
                Some(TaskCall::Subscribe("run_1"))
            );
        }
        assert_eq!(TaskCall::parse(&Method::GET, "run_1:cancel"), None);
        assert_eq!(TaskCall::parse(&Method::POST, "run_1"), None);
        assert_eq!(TaskCall::parse(&Method::POST, "run_1:archive"), None);
    }
}
