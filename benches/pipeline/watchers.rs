//! Clients of the live event stream (`GET /api/events`) attached to a bench gateway, to show
//! what readers of the stream cost the pipeline: each reads its stream over loopback HTTP as a
//! dashboard would, and counts the events it got and whether the gateway dropped it for
//! falling behind (its stream then ends with an event named `dropped`).
//!
//! Each reader is a process of its own (this bench binary again, with [`READER_FLAG`]), as a
//! browser is: readers inside the bench's process would run on the gateway's own runtime and
//! their reading would count as the gateway's cost (issue 18's first measurement could not
//! tell the two apart).

use std::process::Stdio;

use futures::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The first argument that makes this binary an event-stream reader of the URL after it.
pub(crate) const READER_FLAG: &str = "--events-reader";

/// What a reader prints once its stream is open.
const OPEN: &str = "open";

/// Stream readers, each its own process; stopped when dropped (or by [`Watchers::stop`]).
pub(crate) struct Watchers {
    readers: Vec<Reader>,
}

struct Reader {
    child: Child,
    /// Closed to tell the reader to report and exit.
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

/// What the readers got between them.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    /// Events received.
    pub(crate) received: u64,
    /// Readers the gateway dropped for falling behind.
    pub(crate) dropped: u64,
}

impl Watchers {
    /// Attach `n` readers to the gateway at `base` (`http://127.0.0.1:PORT`); returns once each
    /// one's stream is open.
    pub(crate) async fn attach(base: &str, n: usize) -> Watchers {
        let me = std::env::current_exe().expect("the bench binary's path");
        let mut readers = Vec::with_capacity(n);
        for _ in 0..n {
            let mut child = Command::new(&me)
                .arg(READER_FLAG)
                .arg(format!("{base}/api/events"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("start an event-stream reader");
            let stdin = child.stdin.take();
            let stdout = BufReader::new(child.stdout.take().expect("reader stdout"));
            readers.push(Reader {
                child,
                stdin,
                stdout,
            });
        }
        for reader in &mut readers {
            let mut line = String::new();
            reader
                .stdout
                .read_line(&mut line)
                .await
                .expect("read a reader's stdout");
            assert_eq!(line.trim(), OPEN, "an event stream opened");
        }
        Watchers { readers }
    }

    /// Stop every reader and add up what each got.
    pub(crate) async fn stop(mut self) -> Counts {
        let mut counts = Counts::default();
        for reader in &mut self.readers {
            drop(reader.stdin.take());
            let mut report = String::new();
            reader
                .stdout
                .read_to_string(&mut report)
                .await
                .expect("read a reader's report");
            let mut words = report.split_whitespace();
            let mut number = || -> u64 {
                words
                    .next()
                    .and_then(|w| w.parse().ok())
                    .unwrap_or_else(|| panic!("a reader's report: {report:?}"))
            };
            counts.received += number();
            counts.dropped += number();
            reader.child.wait().await.expect("a reader exits");
        }
        counts
    }
}

/// The reader process: reads the stream at `url` until its stdin closes, then prints how many
/// events it got and whether it was dropped (`RECEIVED DROPPED`) and exits.
pub(crate) fn read_stream(url: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("reader runtime");
    let (received, dropped) = runtime.block_on(async {
        let response = reqwest::get(url).await.expect("the event stream answers");
        assert!(response.status().is_success(), "{}", response.status());
        let mut body = response.bytes_stream();
        let mut stdin = tokio::io::stdin();
        let mut sink = [0u8; 64];
        let (mut received, mut dropped) = (0u64, 0u64);
        let mut open = false;
        loop {
            tokio::select! {
                chunk = body.next() => {
                    let Some(Ok(chunk)) = chunk else { break };
                    if !open {
                        open = true;
                        println!("{OPEN}");
                    }
                    // One `id: N` line per event (a line cut between two chunks is missed).
                    received += chunk.windows(4).filter(|w| w == b"id: ").count() as u64;
                    if chunk.windows(15).any(|w| w == b"event: dropped\n") {
                        dropped = 1;
                    }
                }
                // The bench closes stdin when the run is over.
                read = stdin.read(&mut sink) => if matches!(read, Ok(0) | Err(_)) { break },
            }
        }
        (received, dropped)
    });
    println!("{received} {dropped}");
}
