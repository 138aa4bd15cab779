//! The `command` backend: run a program per turn (a CLI agent), turn JSON on stdin, reply on
//! stdout: plain text, one JSON reply object, or JSON Lines events ([`super::agent_events`]),
//! read as they come so streamed text reaches the chat while the agent works.
//!
//! The program is started from an argv vector, never through a shell, so nothing in the config
//! or the turn is ever interpreted as shell syntax. It runs in a process group of its own
//! ([`super::process_group`]): whatever ends the turn ends every process of it. Its environment
//! is the allow list only (`env`, plus `PATH`, `HOME` and the per-turn `BATON_MCP_URL` /
//! `BATON_MCP_TOKEN`), so no secret of baton's reaches it unless the operator names it.
//!
//! There is no time limit here: the turn's (the bot's `turn_timeout_seconds`) is the only one,
//! and the engine enforces it by dropping the turn, which ends the group. What it prints is
//! bounded: past `max_read` bytes of stdout the program is ended and the turn fails.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use super::agent_events::{AgentOutput, is_event};
use super::http::agent_reply;
use super::process_group::Reaper;
use super::{
    Backend, BackendError, BackendReply, DEFAULT_MAX_READ, NoSink, TextSink, ToolExecutor,
    TurnRequest, quote,
};

/// How many trailing stderr lines a failure quotes: enough for a traceback's last frame and
/// message, short enough for a log line.
const STDERR_TAIL_LINES: usize = 5;

/// How much of the end of stderr is kept for that quote; an agent logging megabytes costs this.
const STDERR_KEPT: usize = 8 * 1024;

/// How long stderr may stay open after the program exited before its tail is read anyway.
const STDERR_GRACE: Duration = Duration::from_secs(1);

/// Variables of baton's own environment every agent gets.
const ALWAYS_PASSED: [&str; 2] = ["PATH", "HOME"];

/// Runs a program per turn. baton's tools reach it over MCP (the turn's `tools`), not through
/// the executor, which only hears its `progress` events.
pub struct CommandBackend {
    argv: Vec<String>,
    workdir: Option<PathBuf>,
    env: Vec<(String, String)>,
    reaper: Reaper,
    /// Bytes of stdout read at most; past them the program is ended and the turn fails.
    max_read: usize,
}

impl CommandBackend {
    /// A backend running `argv[0]` with `argv[1..]` as arguments, with only `PATH` and `HOME`
    /// of `env` passed. An empty `argv` fails each turn with a message saying so.
    pub fn new(argv: Vec<String>, reaper: Reaper, env: impl Fn(&str) -> Option<String>) -> Self {
        Self {
            argv,
            workdir: None,
            env: passed(&ALWAYS_PASSED.map(str::to_owned), &env),
            reaper,
            max_read: DEFAULT_MAX_READ,
        }
    }

    /// The most of stdout read before the program is ended and the turn fails, builder style.
    pub fn with_max_read(mut self, bytes: usize) -> Self {
        self.max_read = bytes;
        self
    }

    /// The agent's working directory, builder style.
    pub fn with_workdir(mut self, dir: PathBuf) -> Self {
        self.workdir = Some(dir);
        self
    }

    /// Pass these variables of `env` through as well (those set), builder style.
    pub fn with_env(mut self, names: &[String], env: impl Fn(&str) -> Option<String>) -> Self {
        self.env.extend(passed(names, &env));
        self
    }
}

/// The set variables among `names`, with their values.
fn passed(names: &[String], env: &impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    names
        .iter()
        .filter_map(|name| env(name).map(|value| (name.clone(), value)))
        .collect()
}

#[async_trait]
impl Backend for CommandBackend {
    async fn run(
        &self,
        request: &TurnRequest,
        tools: &dyn ToolExecutor,
    ) -> Result<BackendReply, BackendError> {
        self.run_streaming(request, tools, &NoSink).await
    }

    async fn run_streaming(
        &self,
        request: &TurnRequest,
        tools: &dyn ToolExecutor,
        sink: &dyn TextSink,
    ) -> Result<BackendReply, BackendError> {
        let Some((program, args)) = self.argv.split_first() else {
            return Err(BackendError::Command(
                "no program configured; set `command = [\"program\", \"arg\"...]` for this bot"
                    .to_owned(),
            ));
        };
        let input = serde_json::to_vec(request)
            .map_err(|e| BackendError::Command(format!("could not encode the turn: {e}")))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(access) = &request.access {
            command
                .env("BATON_MCP_URL", &access.mcp_url)
                .env("BATON_MCP_TOKEN", &access.token);
        }
        if let Some(dir) = &self.workdir {
            command.current_dir(dir);
        }
        let mut child = command
            .spawn()
            .map_err(|e| BackendError::Command(format!("could not start `{program}`: {e}")))?;
        // From here on, however the turn ends, every process of it ends with it.
        let group = child.id().and_then(|pid| self.reaper.guard(pid));

        // Written from its own task so a program that prints before it reads cannot deadlock us.
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let writer = tokio::spawn(async move {
            // A program may exit without reading its input; that is its choice, not an error.
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        });
        let kept = Arc::new(Mutex::new(Vec::new()));
        let stderr = tokio::spawn(tail(
            child.stderr.take().expect("stderr is piped"),
            Arc::clone(&kept),
        ));
        // One byte past the bound tells an answer that ran past it from one that ended there.
        let mut stdout = child
            .stdout
            .take()
            .expect("stdout is piped")
            .take(self.max_read as u64 + 1);
        let read = read_stdout(&mut stdout, sink, tools).await;
        writer.abort();
        if stdout.limit() == 0 {
            // Dropping the group ends the program, which may still be printing.
            drop(group);
            return Err(BackendError::TooLong(self.max_read));
        }
        let failed = |what: String| {
            let tail = kept.lock().map(|k| k.clone()).unwrap_or_default();
            let tail = stderr_tail(&tail, &self.secrets(request));
            BackendError::Command(format!("`{program}` {what}{tail}"))
        };
        let read = match read {
            Ok(read) => read,
            Err(err) => {
                // Ended now, so its last words on stderr are in before they are quoted.
                drop(group);
                let _ = tokio::time::timeout(STDERR_GRACE, stderr).await;
                return Err(failed(err));
            }
        };
        let status = child
            .wait()
            .await
            .map_err(|e| BackendError::Command(format!("`{program}` failed to run: {e}")))?;
        // The last words on stderr, unless a process the agent left behind holds it open.
        let _ = tokio::time::timeout(STDERR_GRACE, stderr).await;
        if !status.success() {
            return Err(failed(describe_status(status)));
        }
        drop(group);
        let default_model = if request.model.is_empty() {
            "command"
        } else {
            &request.model
        };
        match read {
            Stdout::Events(output) => Ok(output.finish(default_model)),
            Stdout::Plain(text) => {
                let text = text.trim();
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(text)
                    && let Some(reply) = agent_reply(&value, default_model)
                {
                    return reply;
                }
                Ok(BackendReply {
                    text: Some(text.to_owned()),
                    model: default_model.to_owned(),
                    usage: None,
                    attachments: Vec::new(),
                })
            }
        }
    }
}

impl CommandBackend {
    /// The values a stderr quote must not show: the passed variables' (but `PATH`/`HOME`,
    /// which are no secrets and too common to blank out) and the turn's MCP token.
    fn secrets(&self, request: &TurnRequest) -> Vec<String> {
        let passed = self
            .env
            .iter()
            .filter(|(name, _)| !ALWAYS_PASSED.contains(&name.as_str()))
            .map(|(_, value)| value.clone());
        let token = request.access.iter().map(|a| a.token.clone());
        passed.chain(token).filter(|v| v.len() >= 4).collect()
    }
}

/// What the program printed: plain text (or one JSON reply), or events.
enum Stdout<'a> {
    Plain(String),
    Events(AgentOutput<'a>),
}

/// Read stdout to its end: the first non-blank line decides between events and plain text.
async fn read_stdout<'a>(
    stdout: impl AsyncRead + Unpin,
    sink: &'a dyn TextSink,
    tools: &'a dyn ToolExecutor,
) -> Result<Stdout<'a>, String> {
    let mut lines = BufReader::new(stdout).lines();
    let mut read = None;
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(err) => return Err(format!("printed something unreadable ({err})")),
        };
        if read.is_none() && line.trim().is_empty() {
            // Blank lines before the first word decide nothing yet.
            continue;
        }
        let read = read.get_or_insert_with(|| {
            if is_event(&line) {
                Stdout::Events(AgentOutput::new(sink, tools))
            } else {
                Stdout::Plain(String::new())
            }
        });
        match read {
            Stdout::Events(output) => output.event(&line).await.map_err(|e| e.to_string())?,
            Stdout::Plain(text) => {
                text.push_str(&line);
                text.push('\n');
            }
        }
    }
    Ok(read.unwrap_or(Stdout::Plain(String::new())))
}

/// "exited with status 3" or "was killed by signal 9".
fn describe_status(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    format!("ended abnormally ({status})")
}

/// Keeps the last [`STDERR_KEPT`] bytes or so of `stderr` in `kept`, to its end.
async fn tail(mut stderr: impl AsyncRead + Unpin, kept: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let Ok(mut kept) = kept.lock() else { break };
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > 2 * STDERR_KEPT {
            let cut = kept.len() - STDERR_KEPT;
            kept.drain(..cut);
        }
    }
}

/// `; stderr: ...` with the last [`STDERR_TAIL_LINES`] non-blank lines, or nothing; each of
/// `secrets` shown as `[redacted]`.
fn stderr_tail(stderr: &[u8], secrets: &[String]) -> String {
    let mut text = String::from_utf8_lossy(stderr).into_owned();
    for secret in secrets {
        text = text.replace(secret.as_str(), "[redacted]");
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let tail = &lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..];
    format!("; stderr: {}", quote(&tail.join(" | ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_tail_keeps_the_last_lines() {
        let stderr = b"1\n2\n\n3\n4\n5\n6\n7\n";
        assert_eq!(stderr_tail(stderr, &[]), "; stderr: 3 | 4 | 5 | 6 | 7");
        assert_eq!(stderr_tail(b"  \n", &[]), "");
        assert_eq!(
            stderr_tail(b"key sk-12345 refused", &["sk-12345".into()]),
            "; stderr: key [redacted] refused"
        );
    }
}
