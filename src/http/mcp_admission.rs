//! What `/mcp` checks before rmcp sees a POST: the body is JSON and a JSON-RPC message (400
//! otherwise, where rmcp would answer 415 as if the content type were wrong), it is not too
//! large, and an `initialize` fits the session budget.
//!
//! A session keeps its client's `initialize` request (name, version, capabilities, which a
//! client may pad freely) until it expires, so the budget has two parts: at most
//! `gateway.mcp_max_sessions` sessions, each opened by an `initialize` of at most
//! `gateway.mcp_max_init_bytes`. Sessions unused for `gateway.mcp_session_idle_seconds` end,
//! and rmcp then drops them from its table, which frees their slot here.
//!
//! The count is read from rmcp's own session table, so it cannot drift from what is really
//! held; openings are serialised so two clients racing for the last slot cannot both get it.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use super::body_deadline::TooSlow;

/// Any `/mcp` request body: a tool call carries at most 100 kB of text, which JSON escaping
/// can grow several times. Nothing of it is kept after the call.
pub(super) const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// How long a refused client should wait before trying to open a session again.
const RETRY_AFTER_SECONDS: u64 = 10;

/// The session budget, over rmcp's session table.
pub(super) struct Admission {
    sessions: Arc<LocalSessionManager>,
    max_sessions: usize,
    max_init_bytes: usize,
    /// Held from the count to the new session being in the table.
    opening: Mutex<()>,
}

impl Admission {
    pub(super) fn new(
        sessions: Arc<LocalSessionManager>,
        max_sessions: usize,
        max_init_bytes: usize,
    ) -> Self {
        Self {
            sessions,
            max_sessions,
            max_init_bytes,
            opening: Mutex::new(()),
        }
    }
}

/// Check a POST, then hand it on with its body already read.
pub(super) async fn admit(
    State(admission): State<Arc<Admission>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST || !is_json(&request) {
        // rmcp answers these (GET streams, DELETE, 415 for another content type).
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_REQUEST_BYTES).await {
        Ok(bytes) => bytes,
        Err(err) => return unreadable(&err),
    };
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(value) => value,
        Err(err) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                None,
                &format!("the body is not valid JSON ({err}); send one JSON-RPC message"),
            );
        }
    };
    let id = message.get("id").cloned();
    if let Err(err) = serde_json::from_slice::<ClientJsonRpcMessage>(&bytes) {
        return refuse(
            StatusCode::BAD_REQUEST,
            id,
            &format!(
                "the body is not an MCP JSON-RPC message ({err}); send one request, \
                 notification or response object with \"jsonrpc\": \"2.0\""
            ),
        );
    }
    let request = Request::from_parts(parts, Body::from(bytes.clone()));
    if message.get("method").and_then(Value::as_str) != Some("initialize") {
        return next.run(request).await;
    }
    open_session(&admission, bytes, id, request, next).await
}

/// An `initialize`: within the size limit and the session cap, or refused saying which.
async fn open_session(
    admission: &Admission,
    bytes: Bytes,
    id: Option<Value>,
    request: Request,
    next: Next,
) -> Response {
    if bytes.len() > admission.max_init_bytes {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            id,
            &format!(
                "the initialize request is {} bytes, over gateway.mcp_max_init_bytes ({}): a \
                 session keeps it for its whole life; send less client info",
                bytes.len(),
                admission.max_init_bytes
            ),
        );
    }
    let _opening = admission.opening.lock().await;
    let open = admission.sessions.sessions.read().await.len();
    if open >= admission.max_sessions {
        tracing::warn!(
            open,
            max = admission.max_sessions,
            "MCP session refused: the session cap is reached"
        );
        let mut response = refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            id,
            &format!(
                "too many MCP sessions open ({open}, the cap gateway.mcp_max_sessions is {}); \
                 close sessions you no longer use (HTTP DELETE /mcp with their Mcp-Session-Id) \
                 or retry after unused ones expire (gateway.mcp_session_idle_seconds)",
                admission.max_sessions
            ),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        return response;
    }
    next.run(request).await
}

fn is_json(request: &Request) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split(';').next().unwrap_or_default().trim();
            essence.eq_ignore_ascii_case("application/json")
        })
}

/// The body could not be read: too slow, too large, or the client went away.
fn unreadable(err: &axum::Error) -> Response {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(c) = cause {
        if let Some(slow) = c.downcast_ref::<TooSlow>() {
            return refuse(StatusCode::REQUEST_TIMEOUT, None, &slow.to_string());
        }
        cause = c.source();
    }
    refuse(
        StatusCode::PAYLOAD_TOO_LARGE,
        None,
        &format!(
            "the request body could not be read whole ({err}); /mcp takes at most \
             {MAX_REQUEST_BYTES} bytes"
        ),
    )
}

/// A JSON-RPC error object (so MCP clients show the message), with an HTTP status that says
/// the same.
fn refuse(status: StatusCode, id: Option<Value>, message: &str) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": {"code": -32600, "message": message},
    });
    (status, axum::Json(body)).into_response()
}
