//! Clients of the live event stream (`GET /api/events`) attached to a bench gateway, to show
//! what readers of the stream cost the pipeline: each reads its stream over loopback HTTP as a
//! dashboard would, and counts the events it got and whether the gateway dropped it for
//! falling behind (its stream then ends with an event named `dropped`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::StreamExt;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Stream readers, stopped when dropped.
pub(crate) struct Watchers {
    tasks: Vec<JoinHandle<()>>,
    received: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
}

impl Watchers {
    /// Attach `n` readers to the gateway at `base` (`http://127.0.0.1:PORT`); returns once each
    /// one's stream is open.
    pub(crate) async fn attach(base: &str, n: usize) -> Watchers {
        let received = Arc::new(AtomicU64::new(0));
        let dropped = Arc::new(AtomicU64::new(0));
        let http = reqwest::Client::new();
        let mut tasks = Vec::with_capacity(n);
        let mut opened = Vec::with_capacity(n);
        for _ in 0..n {
            let (open, is_open) = oneshot::channel();
            opened.push(is_open);
            let request = http.get(format!("{base}/api/events"));
            let received = Arc::clone(&received);
            let dropped = Arc::clone(&dropped);
            tasks.push(tokio::spawn(async move {
                let response = request.send().await.expect("the event stream answers");
                assert!(response.status().is_success(), "{}", response.status());
                let mut body = response.bytes_stream();
                let mut open = Some(open);
                while let Some(Ok(chunk)) = body.next().await {
                    if let Some(open) = open.take() {
                        let _ = open.send(());
                    }
                    // One `id: N` line per event (a line cut between two chunks is missed).
                    let events = chunk.windows(4).filter(|w| w == b"id: ").count();
                    received.fetch_add(events as u64, Ordering::Relaxed);
                    if chunk.windows(15).any(|w| w == b"event: dropped\n") {
                        dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        for is_open in opened {
            is_open.await.expect("an event stream opened");
        }
        Watchers {
            tasks,
            received,
            dropped,
        }
    }

    /// Events the readers got between them.
    pub(crate) fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Readers the gateway dropped for falling behind.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for Watchers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
