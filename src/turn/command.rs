//! The `command` backend: run a program per turn (a CLI agent), turn JSON on stdin, reply on
//! stdout.
//!
//! The program is started from an argv vector, never through a shell, so nothing in the config
//! or the turn is ever interpreted as shell syntax. It is killed when the turn times out or is
//! abandoned (`kill_on_drop`), so a hung agent cannot pile up processes.

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::http::agent_reply;
use super::{
    Backend, BackendError, BackendReply, DEFAULT_MAX_READ, REQUEST_TIMEOUT, ToolExecutor,
    TurnRequest,
};

/// How many trailing stderr lines a failure quotes: enough for a traceback's last frame and
/// message, short enough for a log line.
const STDERR_TAIL_LINES: usize = 5;
/// Bytes of stderr kept (the last ones) for that tail; the rest is read and dropped, so a chatty
/// program never blocks on a full pipe nor fills memory.
const STDERR_KEPT: usize = 16 * 1024;

/// Runs a program per turn. Tools are the program's own business: the executor is unused.
pub struct CommandBackend {
    argv: Vec<String>,
    timeout: Duration,
    /// Bytes of stdout read at most; past them the program is killed and the turn fails.
    max_read: usize,
}

impl CommandBackend {
    /// A backend running `argv[0]` with `argv[1..]` as arguments, with the default
    /// [`REQUEST_TIMEOUT`]. An empty `argv` fails each turn with a message saying so.
    pub fn new(argv: Vec<String>) -> Self {
        Self {
            argv,
            timeout: REQUEST_TIMEOUT,
            max_read: DEFAULT_MAX_READ,
        }
    }

    /// The most of stdout read before the program is killed and the turn fails, builder style.
    pub fn with_max_read(mut self, bytes: usize) -> Self {
        self.max_read = bytes;
        self
    }

    /// How long one run may take before it is killed, builder style.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

#[async_trait]
impl Backend for CommandBackend {
    async fn run(
        &self,
        request: &TurnRequest,
        _tools: &dyn ToolExecutor,
    ) -> Result<BackendReply, BackendError> {
        let Some((program, args)) = self.argv.split_first() else {
            return Err(BackendError::Command(
                "no program configured; set `command = [\"program\", \"arg\"...]` for this bot"
                    .to_owned(),
            ));
        };
        let input = serde_json::to_vec(request)
            .map_err(|e| BackendError::Command(format!("could not encode the turn: {e}")))?;
        let mut child = Command::new(program)
            .args(args)
            .env("BATON_BOT", request.bot.as_str())
            .env("BATON_SESSION", &request.session)
            .env("BATON_MODEL", &request.model)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| BackendError::Command(format!("could not start `{program}`: {e}")))?;

        // Written from its own task so a program that prints before it reads cannot deadlock us.
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let writer = tokio::spawn(async move {
            // A program may exit without reading its input; that is its choice, not an error.
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        });
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let max_read = self.max_read;
        let failed =
            |e: std::io::Error| BackendError::Command(format!("`{program}` failed to run: {e}"));
        let run = async {
            let (stdout, stderr) = tokio::join!(read_at_most(stdout, max_read), read_tail(stderr));
            // Over the bound: dropping the child kills it (`kill_on_drop`).
            let stdout = stdout
                .map_err(failed)?
                .ok_or(BackendError::TooLong(max_read))?;
            let status = child.wait().await.map_err(failed)?;
            Ok::<_, BackendError>(Output {
                status,
                stdout,
                stderr: stderr.map_err(failed)?,
            })
        };
        let output = tokio::time::timeout(self.timeout, run).await;
        writer.abort();
        let output = match output {
            Ok(result) => result?,
            Err(_) => {
                return Err(BackendError::Command(format!(
                    "`{program}` gave no answer within {}s and was killed",
                    self.timeout.as_secs_f32()
                )));
            }
        };
        if !output.status.success() {
            return Err(BackendError::Command(format!(
                "`{program}` {}{}",
                describe_status(output.status),
                stderr_tail(&output.stderr)
            )));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let text = stdout.trim();
        let default_model = if request.model.is_empty() {
            "command"
        } else {
            &request.model
        };
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

/// What a finished program left.
struct Output {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

/// All of `pipe`, or `None` once it runs past `max` bytes (the rest is left unread).
async fn read_at_most(
    pipe: impl AsyncRead + Unpin,
    max: usize,
) -> Result<Option<Vec<u8>>, std::io::Error> {
    let mut out = Vec::new();
    pipe.take(max as u64 + 1).read_to_end(&mut out).await?;
    Ok((out.len() <= max).then_some(out))
}

/// The last [`STDERR_KEPT`] bytes of `pipe`, read to its end.
async fn read_tail(mut pipe: impl AsyncRead + Unpin) -> Result<Vec<u8>, std::io::Error> {
    let mut kept = Vec::new();
    let mut buf = vec![0; 8 * 1024];
    loop {
        let n = pipe.read(&mut buf).await?;
        if n == 0 {
            return Ok(kept);
        }
        kept.extend_from_slice(&buf[..n]);
        if kept.len() > STDERR_KEPT {
            kept.drain(..kept.len() - STDERR_KEPT);
        }
    }
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

/// `; stderr: ...` with the last [`STDERR_TAIL_LINES`] non-blank lines, or nothing.
fn stderr_tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let tail = &lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..];
    format!("; stderr: {}", super::quote(&tail.join(" | ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_tail_keeps_the_last_lines() {
        let stderr = b"1\n2\n\n3\n4\n5\n6\n7\n";
        assert_eq!(stderr_tail(stderr), "; stderr: 3 | 4 | 5 | 6 | 7");
        assert_eq!(stderr_tail(b"  \n"), "");
    }
}
