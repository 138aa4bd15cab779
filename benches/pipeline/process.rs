//! The `baton` binary as a user runs it: time from process start to `/readyz` answering 200,
//! and its resident memory once it sits idle.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The release binary cargo built beside this benchmark.
const BATON: &str = env!("CARGO_BIN_EXE_baton");

/// Which three accounts the gateway runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Accounts {
    /// Three echo bots, each with an account on the built-in local channel (the demo's roster).
    Local,
    /// Three echo bots with one Slack (Socket Mode), one Discord and one Feishu account, their
    /// `api_url` on a loopback port where nothing listens: each adapter is built in full (HTTP
    /// client, TLS config) and sits in its reconnect backoff, which `/readyz` counts as ready.
    Platforms,
}

impl Accounts {
    /// For the report.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Accounts::Local => "3 bots, 3 local accounts",
            Accounts::Platforms => {
                "3 bots, Slack + Discord + Feishu accounts (unreachable, retrying)"
            }
        }
    }
}

/// A closed loopback port: connections are refused at once.
const NOWHERE: &str = "http://127.0.0.1:9";

fn config_text(accounts: Accounts) -> String {
    let mut text = String::from(
        "[gateway]\ntimezone = \"UTC\"\n\n[chats_default]\ngroup_policy = \"open\"\n\
         dm_policy = \"open\"\n",
    );
    let platforms = match accounts {
        Accounts::Local => ["local"; 3],
        Accounts::Platforms => ["slack", "discord", "feishu"],
    };
    for (bot, platform) in ["snark", "caid", "sec"].iter().zip(platforms) {
        text.push_str(&format!(
            "\n[[bots]]\nid = \"{bot}\"\nbackend = \"echo\"\ntools = [\"sessions_send\"]\n\n\
             [[accounts]]\nbot = \"{bot}\"\nplatform = \"{platform}\"\n"
        ));
        let keys = match platform {
            "slack" => format!(
                "app_token_env = \"BENCH_TOKEN\"\nbot_token_env = \"BENCH_TOKEN\"\napi_url = \"{NOWHERE}/api\"\n"
            ),
            "discord" => format!(
                "bot_token_env = \"BENCH_TOKEN\"\napplication_id = \"1\"\napi_url = \"{NOWHERE}\"\n"
            ),
            "feishu" => format!(
                "app_id = \"cli_bench\"\napp_secret_env = \"BENCH_TOKEN\"\napi_url = \"{NOWHERE}\"\n"
            ),
            _ => String::new(),
        };
        text.push_str(&keys);
    }
    text
}

/// One started `baton run`.
struct Running {
    child: Child,
    /// From spawn to `/readyz` = 200.
    ready_after: Duration,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &Path, accounts: Accounts, database: &Path) -> Running {
    let config = dir.join(format!("{accounts:?}.toml"));
    std::fs::write(&config, config_text(accounts)).expect("write config");
    let started = Instant::now();
    let mut child = Command::new(BATON)
        .arg("run")
        .arg("--config")
        .arg(&config)
        .args(["--listen", "127.0.0.1:0", "--database"])
        .arg(database)
        .env("BENCH_TOKEN", "bench-token")
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn baton");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read baton's stdout");
    let addr = line
        .trim()
        .strip_prefix("baton listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line from baton: {line:?}"))
        .to_owned();
    let deadline = started + Duration::from_secs(20);
    while !ready(&addr) {
        assert!(Instant::now() < deadline, "baton never became ready");
        std::thread::sleep(Duration::from_micros(250));
    }
    Running {
        ready_after: started.elapsed(),
        child,
    }
}

/// Whether `GET /readyz` answers 200.
fn ready(addr: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(addr) else {
        return false;
    };
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.starts_with("HTTP/1.1 200")
}

/// A process's resident set size, in KiB.
pub(crate) fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc status")
}

/// Startup times, in runs of `runs`.
pub(crate) struct Startup {
    /// New database file each run (migrations run).
    pub(crate) fresh: Vec<Duration>,
    /// The database of an earlier run (already migrated).
    pub(crate) existing: Vec<Duration>,
}

/// Start the gateway `runs` times on a new database and `runs` times on an existing one.
pub(crate) fn startup(accounts: Accounts, runs: usize) -> Startup {
    let dir = tempfile::tempdir().expect("temp dir");
    let kept = dir.path().join("kept.db");
    let mut fresh = Vec::new();
    let mut existing = Vec::new();
    for run in 0..runs {
        let db = dir.path().join(format!("fresh-{run}.db"));
        fresh.push(start(dir.path(), accounts, &db).ready_after);
        existing.push(start(dir.path(), accounts, &kept).ready_after);
    }
    Startup { fresh, existing }
}

/// Resident memory of a ready gateway after it sat idle for `idle`, in KiB.
pub(crate) fn idle_rss(accounts: Accounts, idle: Duration) -> u64 {
    let dir = tempfile::tempdir().expect("temp dir");
    let running = start(dir.path(), accounts, &dir.path().join("idle.db"));
    std::thread::sleep(idle);
    rss_kib(running.child.id())
}
