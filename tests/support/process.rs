//! The real `baton` binary as a child process, for the tests that need a process: the CLI's,
//! and the fault tests that kill it. Waits poll for a state with a deadline; nothing sleeps to
//! synchronise.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};

pub const BATON: &str = env!("CARGO_BIN_EXE_baton");

/// Start-up should take well under a second; this only bounds a hung test.
pub const START_DEADLINE: Duration = Duration::from_secs(10);
/// A reply from the echo backend, a transcript write, a CLI command.
pub const STEP_DEADLINE: Duration = Duration::from_secs(10);
/// SIGTERM to exit: the drain period (`gateway.drain_seconds`, 10 s by default) plus margin.
pub const EXIT_DEADLINE: Duration = Duration::from_secs(20);
/// Between two polls of a state we are waiting for.
pub const POLL: Duration = Duration::from_millis(25);
/// The demo config in this repository.
pub fn demo_config() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo.toml")
}

/// Run a short command to completion (bounded by a deadline).
pub async fn output(mut cmd: Command) -> std::process::Output {
    let child = cmd.spawn().expect("spawn baton");
    match tokio::time::timeout(STEP_DEADLINE, child.wait_with_output()).await {
        Ok(out) => out.expect("wait for baton"),
        Err(_) => panic!("baton did not finish within {STEP_DEADLINE:?}: {cmd:?}"),
    }
}

/// A finished command's status, stdout and stderr, for an assertion's message.
pub fn show(out: &std::process::Output) -> String {
    format!(
        "status: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `baton` with a clean environment for config lookup, run from `cwd` so that nothing it
/// writes by default (a `baton-demo.db`) lands in the repository.
pub fn baton(cwd: &Path) -> Command {
    let mut cmd = Command::new(BATON);
    cmd.current_dir(cwd)
        .env_remove("BATON_CONFIG")
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// A spawned long-running `baton`, killed if the test ends (or panics) before it exits.
pub struct Running {
    pub child: Option<Child>,
    pub pid: u32,
    /// Everything it wrote on stderr so far, for failure messages.
    stderr: Arc<Mutex<String>>,
}

impl Running {
    pub fn spawn(mut cmd: Command) -> (Running, tokio::process::ChildStdout) {
        let mut child = cmd.spawn().expect("spawn baton");
        let pid = child.id().expect("a running child has a pid");
        let out = child.stdout.take().expect("stdout is piped");
        let mut err = child.stderr.take().expect("stderr is piped");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let running = Running {
            child: Some(child),
            pid,
            stderr,
        };
        (running, out)
    }

    pub fn logs(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Send SIGTERM, as a service manager would.
    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// SIGSTOP: the process freezes with its sockets open, as in a network pause or a frozen
    /// VM; [`Running::resume`] wakes it.
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// SIGCONT after [`Running::pause`].
    pub fn resume(&self) {
        self.signal("CONT");
    }

    fn signal(&self, name: &str) {
        let status = std::process::Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {} failed", self.pid);
    }

    /// SIGKILL: no drain, no flush, no goodbye; what a crash or the OOM killer does.
    pub fn kill(&mut self) {
        let child = self.child.as_mut().expect("still running");
        child.start_kill().expect("SIGKILL baton");
    }

    /// Read the `baton listening on http://ADDR` line from `out` and return `http://ADDR`;
    /// stdout keeps being drained after it, so the gateway never blocks on a full pipe.
    pub async fn base_url(&self, out: ChildStdout) -> String {
        let mut lines = BufReader::new(out).lines();
        let addr = match tokio::time::timeout(START_DEADLINE, lines.next_line()).await {
            Ok(Ok(Some(line))) => line
                .strip_prefix("baton listening on http://")
                .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
                .trim()
                .to_owned(),
            other => panic!(
                "no `baton listening on` line within {START_DEADLINE:?} ({other:?})\n--- stderr ---\n{}",
                self.logs()
            ),
        };
        let addr: std::net::SocketAddr = addr.parse().expect("ADDR is IP:PORT");
        assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        format!("http://{addr}")
    }

    /// Wait for the process to exit, at most `deadline`.
    pub async fn wait(&mut self, deadline: Duration) -> ExitStatus {
        let child = self.child.as_mut().expect("not waited for yet");
        match tokio::time::timeout(deadline, child.wait()).await {
            Ok(status) => {
                let status = status.expect("wait for baton");
                self.child = None;
                status
            }
            Err(_) => panic!(
                "baton did not exit within {deadline:?}\n--- stderr ---\n{}",
                self.logs()
            ),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
    }
}

/// Poll `probe` until it yields a value or `deadline` passes.
pub async fn eventually<T, F, Fut>(deadline: Duration, what: &str, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    match within(deadline, probe).await {
        Some(value) => value,
        None => panic!("timed out after {deadline:?} waiting for {what}"),
    }
}

/// Poll `probe` until it yields a value; `None` once `deadline` passes, for a test whose
/// failure message says more than [`eventually`]'s (the instances' logs).
pub async fn within<T, F, Fut>(deadline: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let until = Instant::now() + deadline;
    loop {
        if let Some(value) = probe().await {
            return Some(value);
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The fault tests' random choices (kill points, which instance dies): seeded from
/// `BATON_FAULT_SEED` when it is set, to replay a failure, else at random. The seed is printed,
/// and returned for the test's failure messages.
pub fn fault_rng() -> (u64, rand::rngs::StdRng) {
    use rand::SeedableRng;
    let seed = std::env::var("BATON_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    println!("BATON_FAULT_SEED={seed}");
    (seed, rand::rngs::StdRng::seed_from_u64(seed))
}
