//! A2A outbound (SPEC 14): a bot's `sessions_send(target = "a2a:<peer>")` to an agent built
//! with the official a2a-sdk server classes (peer.py) on loopback, judged by what the peer
//! received, what the sender's model was told, and the sender's transcript.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::DEADLINE;
use crate::support::world::World;

/// The SDK peer: `peer.py <delay_seconds> <log_file>`.
const PEER: &str = include_str!("peer.py");

const A_ROOM: &str = "bot:a:local:a:room";

/// An a2a-sdk agent answering every message after a delay, and the messages it received.
pub(crate) struct Peer {
    /// Its JSON-RPC endpoint.
    pub(crate) url: String,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
    _child: tokio::process::Child,
}

impl Peer {
    async fn start(delay: Duration) -> Peer {
        Peer::spawn(delay, None).await
    }

    /// A peer streaming `reply` (then a file `notes.txt`) to every message.
    pub(crate) async fn streaming(reply: &str) -> Peer {
        Peer::spawn(Duration::ZERO, Some(reply)).await
    }

    async fn spawn(delay: Duration, reply: Option<&str>) -> Peer {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("received.jsonl");
        let mut child = tokio::process::Command::new("python3")
            .arg("-c")
            .arg(PEER)
            .arg(delay.as_secs_f64().to_string())
            .arg(&log)
            .args(reply)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("python3 runs (a2a-sdk and uvicorn come from scripts/test-deps-python)");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let port = tokio::time::timeout(DEADLINE, lines.next_line())
            .await
            .expect("the a2a-sdk peer started in time")
            .unwrap()
            .expect("the peer printed its port (run scripts/test-deps-python)");
        Peer {
            url: format!("http://127.0.0.1:{}/", port.trim()),
            log,
            _dir: dir,
            _child: child,
        }
    }

    /// The messages it received.
    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// A server that answers every request with an HTML page: garbage to an A2A client.
async fn garbage() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf).await;
            let body = "<html>oops</html>";
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all((head + body).as_bytes()).await;
        }
    });
    url
}

fn peer_config(url: &str) -> String {
    format!("\n[[a2a.peers]]\nid = \"peer\"\nurl = \"{url}\"\ntimeout_seconds = 20\n")
}

fn send(args: Value) -> Step {
    Step::tool_call("sessions_send", args)
}

/// The sender stops waiting after a second and is told the peer is still on it; the peer's
/// answer, when it comes, wakes the sender's session as a late reply. The sender's
/// idempotency key is the A2A `messageId`, and the peer is told who calls.
#[tokio::test]
async fn a_send_to_a_peer_times_out_then_the_late_reply_wakes_the_sender() {
    let peer = Peer::start(Duration::from_millis(2500)).await;
    let fake = FakeOpenAi::start().await;
    fake.script(
        "a",
        send(
            json!({"target": "a2a:peer", "message": "slow job", "timeout_seconds": 1,
                    "idempotency_key": "job-1"}),
        ),
    );
    fake.script("a", Step::reply("the peer is still on it"));
    fake.script("a", Step::reply("the peer answered"));
    let gw = World::agents(&fake, &["a"], &peer_config(&peer.url)).await;

    gw.say("room", "alice", "@a ask the peer").await;
    gw.settle().await;

    let results = fake.tool_results("a");
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(
        (
            results[0]["status"].as_str(),
            results[0]["in_flight"].as_bool()
        ),
        (Some("timeout"), Some(true)),
        "{results:?}"
    );
    let run_id = results[0]["run_id"].as_str().unwrap();
    let received = peer.received();
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(
        (
            &received[0]["messageId"],
            &received[0]["text"],
            &received[0]["metadata"]["caller"]
        ),
        (&json!("job-1"), &json!("slow job"), &json!("a"))
    );
    let woke = fake.woken_by("a");
    assert_eq!(
        woke.last().map(String::as_str),
        Some(
            format!(
                "Message from A2A agent 'peer': [reply to your sessions_send, run {run_id}] \
                 peer heard: slow job"
            )
            .as_str()
        ),
        "{woke:?}"
    );
    let late: Vec<Value> = gw
        .transcript(A_ROOM)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "inbound" && e["speaker"] == "a2a:peer")
        .collect();
    assert_eq!(late.len(), 1, "the late reply reached a's session");
    assert_eq!(late[0]["run_id"], format!("reply:{run_id}"));
    let rows = gw.get("/api/deliveries").await;
    let row = &rows["deliveries"][0];
    assert_eq!(
        (
            row["state"].as_str(),
            row["target"].as_str(),
            row["reply"].as_str()
        ),
        (
            Some("delivered"),
            Some("peer"),
            Some("peer heard: slow job")
        )
    );
    gw.stop().await;
}

/// A peer that is not there fails the send at once with the reason; one that answers garbage
/// too. Neither hangs the sender.
#[tokio::test]
async fn a_peer_that_is_down_or_answers_garbage_fails_the_send_with_the_reason() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down = format!("http://{}/", closed.local_addr().unwrap());
    drop(closed);
    let fake = FakeOpenAi::start().await;
    fake.script(
        "a",
        send(json!({"target": "a2a:peer", "message": "hi", "timeout_seconds": 30})),
    );
    fake.script("a", Step::reply("the peer is down"));
    fake.script(
        "a",
        send(json!({"target": "a2a:junk", "message": "hi", "timeout_seconds": 30})),
    );
    fake.script("a", Step::reply("the junk peer is broken"));
    let junk = format!(
        "\n[[a2a.peers]]\nid = \"junk\"\nurl = \"{}\"\n",
        garbage().await
    );
    let extra = peer_config(&down) + &junk;
    let gw = World::agents(&fake, &["a"], &extra).await;

    let started = std::time::Instant::now();
    gw.say("room", "alice", "@a ask the peer").await;
    gw.settle().await;
    gw.say("room", "alice", "@a ask the junk peer").await;
    gw.settle().await;
    assert!(started.elapsed() < Duration::from_secs(20), "nothing hung");

    let results = fake.tool_results("a");
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["status"], "failed", "{results:?}");
    let reason = results[0]["error"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!("A2A peer `peer` could not be reached at {down}")),
        "{reason}"
    );
    assert_eq!(results[1]["status"], "failed", "{results:?}");
    let reason = results[1]["error"].as_str().unwrap();
    assert_eq!(
        reason,
        "A2A peer `junk` answered something that is not JSON-RPC: <html>oops</html>"
    );
    gw.stop().await;
}
