//! `GET /api/events`: the event stream as server-sent events.
//!
//! Each event's SSE `id` is its bus id and its data one JSON object (`type`, `ts_ms`, the ids
//! it concerns). A client that reconnects sends `Last-Event-ID` (browsers do it by themselves;
//! `?after=ID` does the same for a first connection) and is first given what it missed from the
//! replay ring; when some of that is gone, an event named `gap` says to read the state afresh.
//! A client that falls behind is dropped: an event named `dropped` says so and the stream ends;
//! it reconnects and catches up the same way.

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
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_util::sync::CancellationToken;

use super::AppState;
use crate::events::{LAG, Stamped};

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
    let live = BroadcastStream::new(subscription.live).scan(false, |dropped, received| {
        if *dropped {
            return ready(None);
        }
        ready(Some(match received {
            Ok(stamped) => message(&stamped),
            Err(BroadcastStreamRecvError::Lagged(missed)) => {
                tracing::info!(
                    missed,
                    "an /api/events client fell behind and was dropped; it resumes with Last-Event-ID"
                );
                *dropped = true;
                SseEvent::default().event("dropped").data(format!(
                    "this client fell more than {LAG} events behind and is dropped; reconnect \
                     with Last-Event-ID (the id of the last event received) to catch up"
                ))
            }
        }))
    });
    let events = futures::stream::iter(subscription.backlog)
        .map(|stamped| message(&stamped))
        .chain(live);
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

#[cfg(test)]
mod tests {
    //! The route itself, served on loopback by the real accept loop and read as SSE text. The
    //! tests run on one thread on purpose: while a test emits in a loop, the stream cannot
    //! drain, which is how a slow client is made without timing.

    use std::time::Duration;

    use tokio::net::TcpListener;
    use tokio::time::Instant;
    use tokio_util::sync::CancellationToken;

    use crate::events::{Event, Events, LAG, REPLAY};
    use crate::gateway::testing::{echo_config, parts};
    use crate::http::{AppState, serve};

    /// How long a stream has to show what a test waits for.
    const DEADLINE: Duration = Duration::from_secs(10);

    /// A gateway serving HTTP on loopback, and its event bus.
    struct Served {
        base: String,
        events: Events,
        stop: CancellationToken,
    }

    impl Drop for Served {
        fn drop(&mut self) {
            self.stop.cancel();
        }
    }

    async fn served() -> Served {
        let parts = parts(&echo_config(&["a"], "")).await;
        let events = parts.dispatcher.shared().events().clone();
        let state = AppState::new(parts.dispatcher, parts.hub, None);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let stop = CancellationToken::new();
        tokio::spawn(serve(listener, state, stop.clone()));
        Served { base, events, stop }
    }

    fn emit(events: &Events, count: usize) {
        for n in 0..count {
            events.emit(Event::GuardRefused {
                guard: "chain".into(),
                reason: format!("r{n}"),
                bot: "a".into(),
                chat: None,
            });
        }
    }

    /// One open stream and the text it has sent so far.
    struct Stream {
        response: reqwest::Response,
        text: String,
    }

    impl Stream {
        async fn open(url: &str, last_event_id: Option<u64>) -> Self {
            let mut request = reqwest::Client::new().get(url);
            if let Some(id) = last_event_id {
                request = request.header("last-event-id", id.to_string());
            }
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200, "{url}");
            let mut stream = Self {
                response,
                text: String::new(),
            };
            // Subscribed once the opening comment is out: what is emitted from now on is live.
            stream.until(": baton events").await;
            stream
        }

        /// Read until the text holds `needle`; panics with what was read at the deadline.
        async fn until(&mut self, needle: &str) {
            let deadline = Instant::now() + DEADLINE;
            // Only the new text is searched: a replay of thousands of events arrives in as
            // many chunks.
            let mut from = 0;
            while !self
                .text
                .get(from..)
                .is_some_and(|new| new.contains(needle))
            {
                from = self.text.len().saturating_sub(needle.len());
                while !self.text.is_char_boundary(from) {
                    from -= 1;
                }
                match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                    Ok(Ok(Some(chunk))) => self.text.push_str(&String::from_utf8_lossy(&chunk)),
                    Ok(Ok(None)) => panic!("the stream ended before {needle:?}:\n{}", self.text),
                    Ok(Err(e)) => panic!("reading the stream: {e}\n{}", self.text),
                    Err(_) => panic!("no {needle:?} within {DEADLINE:?}:\n{}", self.text),
                }
            }
        }

        /// Read until the server ends the stream.
        async fn read_to_end(&mut self) {
            let deadline = Instant::now() + DEADLINE;
            loop {
                match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                    Ok(Ok(Some(chunk))) => self.text.push_str(&String::from_utf8_lossy(&chunk)),
                    Ok(Ok(None)) => return,
                    Ok(Err(e)) => panic!("reading the stream: {e}\n{}", self.text),
                    Err(_) => panic!("the stream was still open after {DEADLINE:?}"),
                }
            }
        }

        /// The ids of the events received, in order.
        fn ids(&self) -> Vec<u64> {
            self.text
                .lines()
                .filter_map(|line| line.strip_prefix("id: "))
                .map(|id| id.parse().unwrap())
                .collect()
        }

        /// The names of the named events received (`gap`, `dropped`), in order.
        fn named(&self) -> Vec<&str> {
            self.text
                .lines()
                .filter_map(|line| line.strip_prefix("event: "))
                .collect()
        }
    }

    #[tokio::test]
    async fn a_client_resumes_after_last_event_id_or_after_then_gets_live_events() {
        let gateway = served().await;
        let url = format!("{}/api/events", gateway.base);
        let base = gateway.events.last_id();
        emit(&gateway.events, 5);

        let mut header = Stream::open(&url, Some(base + 3)).await;
        header.until(&format!("id: {}\n", base + 5)).await;
        assert_eq!(header.ids(), [base + 4, base + 5], "{}", header.text);
        emit(&gateway.events, 1);
        header.until(&format!("id: {}\n", base + 6)).await;
        assert_eq!(header.ids(), [base + 4, base + 5, base + 6]);
        assert!(header.named().is_empty(), "{}", header.text);
        assert!(header.text.contains(r#""type":"guard_refused""#));
        assert!(header.text.contains(r#""reason":"r0""#));

        let mut query = Stream::open(&format!("{url}?after={}", base + 4), None).await;
        query.until(&format!("id: {}\n", base + 6)).await;
        assert_eq!(query.ids(), [base + 5, base + 6], "{}", query.text);

        // No id: only what happens from now on.
        let mut fresh = Stream::open(&url, None).await;
        emit(&gateway.events, 1);
        fresh.until(&format!("id: {}\n", base + 7)).await;
        assert_eq!(fresh.ids(), [base + 7], "{}", fresh.text);

        let bad = reqwest::Client::new()
            .get(&url)
            .header("last-event-id", "yesterday")
            .send()
            .await
            .unwrap();
        assert_eq!(bad.status(), 400);
        assert!(bad.text().await.unwrap().contains("must be an event id"));
    }

    #[tokio::test]
    async fn a_resume_past_the_replay_ring_starts_with_a_gap_event() {
        let gateway = served().await;
        let url = format!("{}/api/events", gateway.base);
        let base = gateway.events.last_id();
        emit(&gateway.events, REPLAY + 10);
        let last = base + (REPLAY + 10) as u64;

        let mut behind = Stream::open(&format!("{url}?after={}", base + 2), None).await;
        behind.until(&format!("id: {last}\n")).await;
        assert_eq!(behind.named(), ["gap"], "a gap event first");
        let gap_at = behind.text.find("event: gap").unwrap();
        let first_id_at = behind.text.find("id: ").unwrap();
        assert!(gap_at < first_id_at, "the gap is told before any event");
        let ids = behind.ids();
        assert_eq!(ids.len(), REPLAY);
        assert_eq!(ids[0], last - REPLAY as u64 + 1);
        assert!(
            ids.windows(2).all(|w| w[1] == w[0] + 1),
            "in order, none twice"
        );

        // Still in the ring: no gap.
        let mut close = Stream::open(&format!("{url}?after={}", last - 1), None).await;
        close.until(&format!("id: {last}\n")).await;
        assert!(close.named().is_empty(), "{}", close.text);
    }

    #[tokio::test]
    async fn a_slow_client_is_told_it_is_dropped_and_its_stream_ends() {
        let gateway = served().await;
        let url = format!("{}/api/events", gateway.base);
        let mut slow = Stream::open(&url, None).await;
        // One thread: the stream cannot read while this runs, so it falls far behind.
        emit(&gateway.events, LAG * 3);
        slow.read_to_end().await;
        assert_eq!(slow.named(), ["dropped"], "{}", slow.text);
        assert!(
            slow.text.contains("reconnect with Last-Event-ID"),
            "{}",
            slow.text
        );
        assert!(
            slow.ids().is_empty(),
            "nothing before the drop: {}",
            slow.text
        );

        // The bus went on, and a reconnect with the last id catches up from the ring.
        let last = gateway.events.last_id();
        let mut again = Stream::open(&url, Some(last - 5)).await;
        again.until(&format!("id: {last}\n")).await;
        assert_eq!(again.ids().len(), 5);
    }
}
