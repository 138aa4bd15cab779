//! `GET /api/chats/{platform}/{chat}/export?since=&until=&format=jsonl|markdown`: the whole
//! multi-bot room in time order (SPEC section 13; `src/export.rs`), read from the store a page
//! at a time as the body is sent, so a large room never sits in memory.

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::api::bad;
use crate::export::{self, ExportParams};
use crate::store::Store;
use crate::timing::now_ms;

/// The room as a streamed body; parameters that do not parse are a 400 saying what to write. A
/// store that fails part way ends the body early, as an aborted response.
pub(super) async fn export(
    State(store): State<Store>,
    Path((platform, chat)): Path<(String, String)>,
    Query(params): Query<ExportParams>,
) -> Response {
    let wanted = match params.resolve(&platform, &chat, now_ms()) {
        Ok(wanted) => wanted,
        Err(why) => return bad(StatusCode::BAD_REQUEST, &why.to_string()),
    };
    let content_type = wanted.format.content_type();
    let body = export::lines(store, wanted).map(|line| match line {
        Ok(line) => Ok(Bytes::from(line)),
        Err(err) => {
            tracing::warn!(error = %err, "export: reading the room failed; the body ends here");
            Err(std::io::Error::other(err.to_string()))
        }
    });
    (
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(body),
    )
        .into_response()
}
