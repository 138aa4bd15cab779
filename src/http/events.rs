//! `GET /api/events`: the event stream as server-sent events.
//!
//! Each event's SSE `id` is its bus id and its data one JSON object (`type`, `ts_ms`, the ids
//! it concerns). A client that reconnects sends `Last-Event-ID` (browsers do it by themselves;
//! `?after=ID` does the same for a first connection) and is first given what it missed from the
//! replay ring; when some of that is gone, an event named `gap` says to read the state afresh.
//! A client that falls behind is dropped (its stream ends) and catches up the same way.

use std::convert::Infallible;
use std::future::ready;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;
use tokio_stream::wrappers::BroadcastStream;
use tokio_util::sync::CancellationToken;

use super::AppState;
use crate::events::Stamped;

/// A comment line this often keeps proxies and browsers from closing a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long a browser waits before it reconnects.
const RETRY: Duration = Duration::from_secs(1);

/// `?after=ID`: resume after this event id (what `Last-Event-ID` says on a reconnect).
#[derive(Debug, Deserialize)]
pub(super) struct Resume {
    after: Option<String>,
}

/// The stream, until the client goes, falls behind, or the gateway stops.
pub(super) async fn stream(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(resume): Query<Resume>,
    stop: CancellationToken,
) -> Response {
    let given = headers
        .get("last-event-id")
        .map(|v| v.to_str().unwrap_or("?").to_owned())
        .or(resume.after);
    let after = match given.as_deref().map(str::parse::<u64>) {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(_)) => {
            let message = "Last-Event-ID (or ?after=) must be an event id: the number in the \
                           `id:` line of the last event received";
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    let subscription = state.dispatcher.shared().events().subscribe(after);
    let opening = SseEvent::default().retry(RETRY).comment("baton events");
    let gap = subscription.gap.then(|| {
        SseEvent::default()
            .event("gap")
            .data("some events were missed; read the state afresh from /api/...")
    });
    let live = BroadcastStream::new(subscription.live)
        .take_while(|received| {
            if received.is_err() {
                tracing::info!("an /api/events client fell behind and was dropped; it resumes with Last-Event-ID");
            }
            ready(received.is_ok())
        })
        .filter_map(|received| ready(received.ok()));
    let events = futures::stream::iter(subscription.backlog)
        .chain(live)
        .map(|stamped| message(&stamped));
    let all = futures::stream::iter(std::iter::once(opening).chain(gap))
        .chain(events)
        .take_until(stop.cancelled_owned())
        .map(Ok::<_, Infallible>);
    Sse::new(all)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

fn message(stamped: &Arc<Stamped>) -> SseEvent {
    let data = serde_json::to_string(&**stamped).expect("events serialise");
    SseEvent::default().id(stamped.id.to_string()).data(data)
}
