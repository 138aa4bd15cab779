//! `GET /api/events`: the event stream as server-sent events.
//!
//! Each event's SSE `id` is `<run>.<n>`, the gateway run's token and the bus id, and its data
//! one JSON object (`type`, `ts_ms`, the ids it concerns). A client that reconnects sends
//! `Last-Event-ID` (browsers do it by themselves; `?after=ID` does the same for a first
//! connection; a bare `n` means this run's) and is first given what it missed from the replay
//! ring; when some of that is gone, or the id is from an earlier run of the gateway, an event
//! named `gap` says to read the state afresh.
//! A client that falls behind is dropped: an event named `dropped` says so and the stream ends;
//! it reconnects and catches up the same way.
//!
//! Readers are capped ([`max_readers`], a quarter of `gateway.max_connections`), so streams
//! can never take every connection from webhooks and the rest: over the cap a reader gets 503
//! with `Retry-After`. Each reader's frames wait in a small buffer ([`SEND_BUFFER`] writes); a
//! reader that takes none of them for [`STALL`] (it stopped reading, its socket is full) is
//! sent a `gap` marker if the buffer has room and its connection is closed, so an unread
//! stream holds no memory and no connection.

use std::convert::Infallible;
use std::future::ready;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::time::Instant;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::{BroadcastStream, ReceiverStream};
use tokio_util::sync::CancellationToken;

use super::server::CloseConnection;
use crate::events::{Events, LAG};

/// A comment this often keeps proxies and browsers from closing a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The keep-alive: an empty comment.
const KEEP_ALIVE_FRAME: &[u8] = b":\n\n";
/// The stream's first words: browsers reconnect 1 s (`retry:`, in ms) after losing it, and the
/// comment tells a client it is subscribed.
const OPENING: &[u8] = b"retry: 1000\n: baton events\n\n";
/// Most frames sent in one write.
const BATCH: usize = 256;
/// How long a reader's frames gather after the first before they are written. Without it a
/// busy gateway writes to every reader's socket once per event; with it, at most once per
/// window (a dashboard does not see 20 ms). The reader keeps taking events from the bus while
/// they gather, so gathering never makes it fall behind.
const GATHER: Duration = Duration::from_millis(20);

/// Writes waiting for one reader at most.
const SEND_BUFFER: usize = 16;
/// How long a reader may take none of its writes before it is dropped.
const STALL: Duration = Duration::from_secs(5);

/// The event-stream readers `gateway.max_connections` allows: a quarter of them, at least one.
pub(super) fn max_readers(max_connections: usize) -> usize {
    (max_connections / 4).max(1)
}

/// The places for open `/api/events` streams, one taken per reader.
#[derive(Clone)]
pub(super) struct EventReaders(Arc<Semaphore>);

impl EventReaders {
    /// As many places as `gateway.max_connections` allows ([`max_readers`]).
    pub(super) fn new(max_connections: usize) -> EventReaders {
        EventReaders(Arc::new(Semaphore::new(max_readers(max_connections))))
    }
}

/// `?after=ID`: resume after this event id (what `Last-Event-ID` says on a reconnect).
#[derive(Debug, Deserialize)]
pub(super) struct Resume {
    after: Option<String>,
}

/// The stream, until the client goes, falls behind, or the gateway stops.
///
/// Written out here rather than with axum's `Sse`: its events can only be built by copying
/// their text in, once per reader. Here every reader sends the frame the bus made once per
/// event (`Stamped::frame`), and the frames of a short window go in one write.
pub(super) async fn stream(
    State(events): State<Events>,
    State(readers): State<EventReaders>,
    close: Option<Extension<CloseConnection>>,
    headers: HeaderMap,
    Query(resume): Query<Resume>,
    stop: CancellationToken,
) -> Response {
    let Ok(reader) = readers.0.try_acquire_owned() else {
        let message = "as many /api/events readers are connected as the gateway allows (a \
                       quarter of gateway.max_connections); retry shortly";
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "5")],
            message,
        )
            .into_response();
    };
    let given = headers
        .get("last-event-id")
        .map(|v| v.to_str().unwrap_or("?").to_owned())
        .or(resume.after);
    let events = &events;
    let subscription = match given.as_deref().map(|id| resume_at(id, events.run())) {
        None => events.subscribe(None),
        Some(Some(ResumeAt::After(id))) => events.subscribe(Some(id)),
        Some(Some(ResumeAt::EarlierRun)) => events.subscribe_after_restart(),
        Some(None) => {
            let message = "Last-Event-ID (or ?after=) must be an event id: what the `id:` line \
                           of the last event received says";
            return (StatusCode::BAD_REQUEST, message).into_response();
        }
    };
    let gap = subscription.gap.then(|| {
        named(
            "gap",
            "some events were missed; read the state afresh from /api/...",
        )
    });
    let live = BroadcastStream::new(subscription.live).scan(false, |dropped, received| {
        if *dropped {
            return ready(None);
        }
        ready(Some(match received {
            Ok(stamped) => stamped.frame().clone(),
            Err(BroadcastStreamRecvError::Lagged(missed)) => {
                tracing::info!(
                    missed,
                    "an /api/events client fell behind and was dropped; it resumes with Last-Event-ID"
                );
                *dropped = true;
                named(
                    "dropped",
                    &format!(
                        "this client fell more than {LAG} events behind and is dropped; \
                         reconnect with Last-Event-ID (the id of the last event received) to \
                         catch up"
                    ),
                )
            }
        }))
    });
    let backlog =
        futures::stream::iter(subscription.backlog).map(|stamped| stamped.frame().clone());
    let frames = futures::stream::iter(std::iter::once(Bytes::from_static(OPENING)).chain(gap))
        .chain(backlog)
        .chain(live);
    let frames = tokio_stream::StreamExt::chunks_timeout(frames, BATCH, GATHER)
        .map(joined)
        .take_until(stop.cancelled_owned());
    let (send, sent) = mpsc::channel(SEND_BUFFER);
    tokio::spawn(forward(
        kept_alive(frames, KEEP_ALIVE),
        send,
        close.map(|Extension(close)| close),
        reader,
    ));
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(ReceiverStream::new(sent).map(Ok::<_, Infallible>)),
    )
        .into_response()
}

/// Hand `frames` to the reader's body through `send`, holding its place (`reader`) until the
/// stream ends and the reader has taken what was left, or the reader goes. A reader that takes
/// nothing for [`STALL`] is told of the gap if there is room, and its connection closed.
async fn forward(
    frames: impl Stream<Item = Bytes>,
    send: mpsc::Sender<Bytes>,
    close: Option<CloseConnection>,
    reader: OwnedSemaphorePermit,
) {
    let _reader = reader;
    let mut frames = std::pin::pin!(frames);
    loop {
        let frame = tokio::select! {
            frame = frames.next() => frame,
            // The reader is gone.
            () = send.closed() => return,
        };
        let last = frame.is_none();
        // `Ok(false)`: the reader is gone.
        let taken = match frame {
            Some(frame) => tokio::time::timeout(STALL, send.send(frame))
                .await
                .map(|sent| sent.is_ok()),
            // The end (the gateway stops, or the reader fell behind): once the reader has
            // taken every frame left, the stream ends and its connection is free again.
            None => tokio::time::timeout(STALL, send.reserve_many(SEND_BUFFER))
                .await
                .map(|room| room.is_ok()),
        };
        let Ok(taken) = taken else {
            tracing::info!(
                "an /api/events reader took nothing for {STALL:?} and is dropped; it resumes \
                 with Last-Event-ID"
            );
            let _ = send.try_send(named(
                "gap",
                "this reader fell behind and is dropped; reconnect with Last-Event-ID",
            ));
            if let Some(close) = &close {
                close.close();
            }
            return;
        };
        if last || !taken {
            return;
        }
    }
}

/// Where a client resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ResumeAt {
    /// After this run's event `n`.
    After(u64),
    /// From an earlier run of the gateway: what it sent last is gone.
    EarlierRun,
}

/// Where `id` (`<run>.<n>`, or a bare `n` for this run) resumes, given this run's token;
/// `None` when it is not an event id.
fn resume_at(id: &str, run: &str) -> Option<ResumeAt> {
    let (from, n) = id.split_once('.').unwrap_or((run, id));
    let n = n.parse::<u64>().ok()?;
    Some(if from == run {
        ResumeAt::After(n)
    } else {
        ResumeAt::EarlierRun
    })
}

/// A named event (`gap`, `dropped`) with a one-line `data`.
fn named(name: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// Frames that were waiting together, as one write.
fn joined(frames: Vec<Bytes>) -> Bytes {
    match <[Bytes; 1]>::try_from(frames) {
        Ok([one]) => one,
        Err(many) => {
            let mut joined = BytesMut::with_capacity(many.iter().map(Bytes::len).sum());
            for frame in many {
                joined.extend_from_slice(&frame);
            }
            joined.freeze()
        }
    }
}

/// `frames`, with a keep-alive comment whenever none was sent for `every`; ends with them.
fn kept_alive(
    frames: impl Stream<Item = Bytes> + Send + 'static,
    every: Duration,
) -> impl Stream<Item = Bytes> {
    let quiet = Box::pin(tokio::time::sleep(every));
    futures::stream::unfold(
        (Box::pin(frames), quiet),
        move |(mut frames, mut quiet)| async move {
            let frame = tokio::select! {
                biased;
                frame = frames.next() => frame?,
                () = &mut quiet => Bytes::from_static(KEEP_ALIVE_FRAME),
            };
            quiet.as_mut().reset(Instant::now() + every);
            Some((frame, (frames, quiet)))
        },
    )
}

#[cfg(test)]
mod tests {
    //! The route itself, served on loopback by the real accept loop and read as SSE text. The
    //! tests run on one thread on purpose: while a test emits in a loop, the stream cannot
    //! drain, which is how a slow client is made without timing.

    use std::time::Duration;

    use bytes::Bytes;
    use futures::StreamExt;
    use tokio::net::TcpListener;
    use tokio::time::Instant;
    use tokio_util::sync::CancellationToken;

    use crate::events::{Event, Events, LAG, REPLAY};
    use crate::gateway::testing::{echo_config, parts};
    use crate::http::{AppState, serve};

    use super::{ResumeAt, kept_alive, resume_at};

    /// The `id:` line of this run's event `n`.
    fn id_line(events: &Events, n: u64) -> String {
        format!("id: {}.{n}\n", events.run())
    }

    /// How long a stream has to show what a test waits for.
    const DEADLINE: Duration = Duration::from_secs(10);

    /// A gateway serving HTTP on loopback, and its event bus.
    struct Served {
        base: String,
        events: Events,
        /// The readers' places: all free when no stream is open.
        readers: std::sync::Arc<tokio::sync::Semaphore>,
        stop: CancellationToken,
    }

    impl Drop for Served {
        fn drop(&mut self) {
            self.stop.cancel();
        }
    }

    async fn served() -> Served {
        served_with_readers(64).await
    }

    /// [`served`], with room for `readers` event streams.
    async fn served_with_readers(readers: usize) -> Served {
        let parts = parts(&echo_config(&["a"], "")).await;
        let events = parts.dispatcher.engine().events().clone();
        let mut state = AppState::new(parts.dispatcher, parts.relay, parts.hub, None);
        let readers = std::sync::Arc::new(tokio::sync::Semaphore::new(readers));
        state.event_readers = super::EventReaders(std::sync::Arc::clone(&readers));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let stop = CancellationToken::new();
        tokio::spawn(serve(listener, state, stop.clone()));
        Served {
            base,
            events,
            readers,
            stop,
        }
    }

    fn emit(events: &Events, count: usize) {
        for n in 0..count {
            events.emit(Event::GuardRefused {
                guard: "chain".into(),
                reason: format!("r{n}"),
                bot: "a".parse().unwrap(),
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
                .map(|id| id.rsplit('.').next().unwrap().parse().unwrap())
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
        header.until(&id_line(&gateway.events, base + 5)).await;
        assert_eq!(header.ids(), [base + 4, base + 5], "{}", header.text);
        emit(&gateway.events, 1);
        header.until(&id_line(&gateway.events, base + 6)).await;
        assert_eq!(header.ids(), [base + 4, base + 5, base + 6]);
        assert!(header.named().is_empty(), "{}", header.text);
        assert!(header.text.contains(r#""type":"guard_refused""#));
        assert!(header.text.contains(r#""reason":"r0""#));

        let mut query = Stream::open(&format!("{url}?after={}", base + 4), None).await;
        query.until(&id_line(&gateway.events, base + 6)).await;
        assert_eq!(query.ids(), [base + 5, base + 6], "{}", query.text);

        // No id: only what happens from now on.
        let mut fresh = Stream::open(&url, None).await;
        emit(&gateway.events, 1);
        fresh.until(&id_line(&gateway.events, base + 7)).await;
        assert_eq!(fresh.ids(), [base + 7], "{}", fresh.text);
        // Byte for byte: the opening, then the event's id and its JSON on one `data:` line.
        let seventh = gateway.events.subscribe(Some(base + 6)).backlog;
        let json = serde_json::to_string(&*seventh[0]).unwrap();
        let expected = format!(
            "retry: 1000\n: baton events\n\nid: {}.{}\ndata: {json}\n\n",
            gateway.events.run(),
            base + 7
        );
        assert_eq!(fresh.text, expected);

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
        behind.until(&id_line(&gateway.events, last)).await;
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
        close.until(&id_line(&gateway.events, last)).await;
        assert!(close.named().is_empty(), "{}", close.text);
    }

    #[test]
    fn an_event_id_names_its_run() {
        assert_eq!(resume_at("ab12.7", "ab12"), Some(ResumeAt::After(7)));
        assert_eq!(resume_at("7", "ab12"), Some(ResumeAt::After(7)));
        assert_eq!(resume_at("ff00.7", "ab12"), Some(ResumeAt::EarlierRun));
        assert_eq!(resume_at("ab12.x", "ab12"), None);
        assert_eq!(resume_at("yesterday", "ab12"), None);
    }

    #[tokio::test]
    async fn an_id_from_an_earlier_run_starts_with_a_gap_event() {
        let gateway = served().await;
        let url = format!("{}/api/events", gateway.base);
        emit(&gateway.events, 3);
        let last = gateway.events.last_id();
        let client = reqwest::Client::new();
        let response = client
            .get(&url)
            .header("last-event-id", "0earlier.1")
            .send()
            .await
            .unwrap();
        let mut earlier = Stream {
            response,
            text: String::new(),
        };
        earlier.until(&id_line(&gateway.events, last)).await;
        assert_eq!(earlier.named(), ["gap"], "{}", earlier.text);
        assert_eq!(
            earlier.ids().first(),
            Some(&1),
            "all this run kept: {}",
            earlier.text
        );
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
        again.until(&id_line(&gateway.events, last)).await;
        assert_eq!(again.ids().len(), 5);
    }

    #[tokio::test]
    async fn readers_past_their_cap_get_503_with_retry_after() {
        let gateway = served_with_readers(2).await;
        let url = format!("{}/api/events", gateway.base);
        let first = Stream::open(&url, None).await;
        let _second = Stream::open(&url, None).await;
        let over = reqwest::get(&url).await.unwrap();
        assert_eq!(over.status(), 503);
        assert!(over.headers().contains_key("retry-after"));
        assert!(over.text().await.unwrap().contains("max_connections"));
        drop(first);
        let deadline = Instant::now() + DEADLINE;
        while gateway.readers.available_permits() == 0 {
            assert!(Instant::now() < deadline, "a closed stream kept its place");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Stream::open(&url, None).await;
    }

    /// A reader that never reads falls behind: its stream ends (closed outright when its
    /// socket is full for `STALL`), its place is freed, and what it finally reads says why.
    #[tokio::test]
    async fn a_reader_that_stops_reading_is_dropped_and_frees_its_place() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let gateway = served_with_readers(4).await;
        let addr = gateway.base.trim_start_matches("http://");
        let mut socket = tokio::net::TcpStream::connect(addr).await.unwrap();
        socket
            .write_all(b"GET /api/events HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .unwrap();
        let deadline = Instant::now() + DEADLINE + super::STALL;
        while gateway.readers.available_permits() == 4 {
            assert!(Instant::now() < deadline, "the stream never opened");
            tokio::task::yield_now().await;
        }
        // Far more than the socket's buffers hold, a batch at a time so the stream writes.
        for _ in 0..200 {
            emit(&gateway.events, 500);
            tokio::task::yield_now().await;
        }
        while gateway.readers.available_permits() < 4 {
            assert!(
                Instant::now() < deadline,
                "a reader that never reads kept its place"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Ended: what was buffered drains, then the stream ends, saying why.
        let mut sink = vec![0; 64 * 1024];
        let mut tail = Vec::new();
        loop {
            let read = tokio::time::timeout_at(deadline, socket.read(&mut sink)).await;
            match read.expect("the stream did not end") {
                Ok(0) | Err(_) => break,
                Ok(n) => tail.extend_from_slice(&sink[..n]),
            }
            if tail.ends_with(b"0\r\n\r\n") {
                break;
            }
            let keep = tail.len().saturating_sub(4096);
            tail.drain(..keep);
        }
        let tail = String::from_utf8_lossy(&tail);
        assert!(
            tail.contains("event: dropped") || tail.contains("event: gap"),
            "{tail}"
        );
    }

    #[tokio::test]
    async fn a_quiet_stream_is_kept_alive_and_ends_with_its_frames() {
        let every = Duration::from_millis(20);
        let mut quiet = Box::pin(kept_alive(futures::stream::pending(), every));
        for _ in 0..2 {
            let frame = tokio::time::timeout(DEADLINE, quiet.next()).await;
            assert_eq!(frame.unwrap().as_deref(), Some(&b":\n\n"[..]));
        }
        let frames = futures::stream::iter([Bytes::from_static(b"id: 1\n\n")]);
        let sent: Vec<Bytes> = kept_alive(frames, every).collect().await;
        assert_eq!(sent, [Bytes::from_static(b"id: 1\n\n")]);
    }
}
