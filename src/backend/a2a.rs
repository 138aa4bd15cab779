//! The `a2a` backend: a bot whose brain is a remote A2A agent (SPEC 14). Each turn is one
//! streamed `SendStreamingMessage` carrying the message that woke the bot, in an A2A context
//! per session (the turn's `session_id`), so the agent keeps the conversation. The artifact
//! text streams into the chat as it arrives (4.2); file parts become reply attachments.
//!
//! Every request baton makes to an A2A agent, here and for `sessions_send` to an
//! `[[a2a.peers]]` entry, is built by [`a2a_request`].

use std::time::Duration;

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use baton_contract::Secret;
use serde_json::{Value, json};

use super::http::Lines;
use super::{
    Backend, BackendError, BackendReply, DEFAULT_MAX_READ, NoSink, ReplyFile, TextSink,
    ToolExecutor, TurnRequest, agent_call, describe_transport_error, error_message, http_client,
    quote, redacted_url,
};

/// A request to the A2A agent at `url` carrying JSON-RPC `body`: the protocol version, the
/// bearer `token` when it wants one, the `timeout` of the whole call when one applies, and the
/// `traceparent` of the span it is made in, so the agent's work joins the trace. The one place
/// an outbound A2A request is made.
pub fn a2a_request(
    client: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    timeout: Option<Duration>,
    body: &Value,
) -> reqwest::RequestBuilder {
    let mut request = client
        .post(url)
        .header("A2A-Version", "1.0")
        .header(
            reqwest::header::ACCEPT,
            "application/json, text/event-stream",
        )
        .json(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(timeout) = timeout {
        request = request.timeout(timeout);
    }
    crate::trace::traced(request)
}

/// Runs each turn on a remote A2A agent.
pub struct A2aBackend {
    url: String,
    token: Option<Secret>,
    client: reqwest::Client,
    /// Bytes of an answer read at most; past them the turn fails.
    max_read: usize,
}

impl A2aBackend {
    /// A backend calling the agent at `url` with `token`. The agent may take as long as the
    /// turn's limit allows. Fails only if the TLS stack cannot be set up.
    pub fn new(url: impl Into<String>, token: Option<Secret>) -> Result<Self, BackendError> {
        Ok(Self {
            url: url.into(),
            token,
            client: http_client(None)?,
            max_read: DEFAULT_MAX_READ,
        })
    }

    /// The most of an answer read before the turn fails, builder style.
    pub fn with_max_read(mut self, bytes: usize) -> Self {
        self.max_read = bytes;
        self
    }

    fn unreadable(&self, what: String) -> BackendError {
        BackendError::BadResponse(format!("A2A agent {} {what}", redacted_url(&self.url)))
    }
}

#[async_trait]
impl Backend for A2aBackend {
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
        _tools: &dyn ToolExecutor,
        sink: &dyn TextSink,
    ) -> Result<BackendReply, BackendError> {
        agent_call(request, self.exchange(request, sink)).await
    }
}

impl A2aBackend {
    /// One streamed send to the agent and its answer.
    async fn exchange(
        &self,
        request: &TurnRequest,
        sink: &dyn TextSink,
    ) -> Result<BackendReply, BackendError> {
        let transport = |e: reqwest::Error| {
            BackendError::Unreachable(describe_transport_error(&e, &self.url, None))
        };
        let body = json!({
            "jsonrpc": "2.0",
            "id": uuid::Uuid::new_v4().to_string(),
            "method": "SendStreamingMessage",
            "params": {"message": {
                "messageId": uuid::Uuid::new_v4().to_string(),
                "contextId": request.session_id,
                "role": "ROLE_USER",
                "parts": [{"text": request.last_user_text()}],
                "metadata": {"caller": request.bot},
            }},
        });
        let token = self.token.as_ref().map(Secret::expose);
        let mut response = a2a_request(&self.client, &self.url, token, None, &body)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status();
        let streamed = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut reply = Reply::new(sink);
        let mut lines = Lines::default();
        let mut whole = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if whole.len() + chunk.len() > self.max_read {
                return Err(BackendError::TooLong(self.max_read));
            }
            if !(streamed && status.is_success()) {
                whole.extend_from_slice(&chunk);
                continue;
            }
            for line in lines.push(&chunk) {
                self.event(&mut reply, &line)?;
            }
        }
        if let Some(line) = lines.rest() {
            self.event(&mut reply, &line)?;
        }
        let text = String::from_utf8_lossy(&whole);
        if !status.is_success() {
            return Err(BackendError::Status {
                status: status.as_u16(),
                attempts: 1,
                message: error_message(status, &text),
            });
        }
        if !streamed {
            // One JSON-RPC answer: an agent that does not stream.
            let answer: Value = serde_json::from_str(&text)
                .map_err(|_| self.unreadable(format!("answered non-JSON-RPC: {}", quote(&text))))?;
            self.answer(&mut reply, &answer)?;
        }
        let files = self.fetch(reply.files).await?;
        let model = if request.model.is_empty() {
            "a2a".to_owned()
        } else {
            request.model.clone()
        };
        Ok(BackendReply {
            text: Some(reply.text),
            model,
            usage: None,
            attachments: files,
        })
    }
    /// One line of an event stream: a `data:` line is an event; other SSE fields, comments and
    /// blank lines carry none.
    fn event(&self, reply: &mut Reply<'_>, line: &str) -> Result<(), BackendError> {
        let Some(data) = line.strip_prefix("data:") else {
            return Ok(());
        };
        let event: Value = serde_json::from_str(data.trim()).map_err(|_| {
            self.unreadable(format!(
                "streamed an event that is not JSON: {}",
                quote(data)
            ))
        })?;
        self.answer(reply, &event)
    }

    /// One JSON-RPC answer or streamed event: an error, a task, a status or artifact update,
    /// or a message.
    fn answer(&self, reply: &mut Reply<'_>, answer: &Value) -> Result<(), BackendError> {
        if let Some(error) = answer.get("error") {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("");
            let code = error
                .get("code")
                .and_then(Value::as_i64)
                .unwrap_or_default();
            return Err(self.unreadable(format!("refused the message: {message} (error {code})")));
        }
        let Some(result) = answer.get("result") else {
            return Err(self.unreadable(format!(
                "answered neither a result nor an error: {}",
                quote(&answer.to_string())
            )));
        };
        if let Some(update) = result.get("artifactUpdate") {
            let append = update.get("append").and_then(Value::as_bool) == Some(true);
            reply.artifact(update.get("artifact"), append);
        } else if let Some(update) = result.get("statusUpdate") {
            self.status(reply, update.get("status"))?;
        } else if let Some(task) = result.get("task") {
            for artifact in task
                .get("artifacts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                reply.artifact(Some(artifact), false);
            }
            self.status(reply, task.get("status"))?;
        } else if let Some(message) = result.get("message") {
            reply.parts(message.get("parts"));
        } else {
            return Err(self.unreadable(format!(
                "answered neither a task nor a message: {}",
                quote(&result.to_string())
            )));
        }
        Ok(())
    }

    /// A task status: an unhappy end fails the turn with the agent's reason.
    fn status(&self, reply: &mut Reply<'_>, status: Option<&Value>) -> Result<(), BackendError> {
        let state = status
            .and_then(|s| s.get("state"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let said = texts(status.and_then(|s| s.pointer("/message/parts")));
        match state {
            "TASK_STATE_FAILED" | "TASK_STATE_REJECTED" | "TASK_STATE_CANCELED" => {
                let state = state.trim_start_matches("TASK_STATE_").to_lowercase();
                Err(self.unreadable(format!("ended the task {state}: {said}")))
            }
            // What the agent asks back is its reply.
            "TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_AUTH_REQUIRED" if reply.text.is_empty() => {
                reply.push(&said);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The files the agent sent by URL, fetched; those sent inline, decoded.
    async fn fetch(&self, files: Vec<FilePart>) -> Result<Vec<ReplyFile>, BackendError> {
        let mut out = Vec::with_capacity(files.len());
        for file in files {
            let content = match file.body {
                FileBody::Raw(content) => content,
                FileBody::Url(url) => {
                    let transport = |e: reqwest::Error| {
                        BackendError::Unreachable(describe_transport_error(&e, &url, None))
                    };
                    let mut request = self.client.get(&url);
                    if let Some(token) = &self.token {
                        request = request.bearer_auth(token.expose());
                    }
                    let mut response = request.send().await.map_err(transport)?;
                    let mut bytes = Vec::new();
                    while let Some(chunk) = response.chunk().await.map_err(transport)? {
                        if bytes.len() + chunk.len() > self.max_read {
                            return Err(BackendError::TooLong(self.max_read));
                        }
                        bytes.extend_from_slice(&chunk);
                    }
                    bytes
                }
            };
            out.push(ReplyFile::Inline {
                name: file.name,
                media_type: file.media_type,
                content,
            });
        }
        Ok(out)
    }
}

/// The reply as it is read: its text, streamed to the sink as it grows, and its files.
struct Reply<'s> {
    sink: &'s dyn TextSink,
    text: String,
    files: Vec<FilePart>,
}

/// A file part of the agent's answer.
struct FilePart {
    name: String,
    media_type: Option<String>,
    body: FileBody,
}

enum FileBody {
    Raw(Vec<u8>),
    Url(String),
}

impl<'s> Reply<'s> {
    fn new(sink: &'s dyn TextSink) -> Self {
        Reply {
            sink,
            text: String::new(),
            files: Vec::new(),
        }
    }

    fn push(&mut self, delta: &str) {
        if !delta.is_empty() {
            self.sink.text(delta);
            self.text.push_str(delta);
        }
    }

    /// An artifact or a chunk of one: a new artifact after text starts on a new line.
    fn artifact(&mut self, artifact: Option<&Value>, append: bool) {
        if !append && !self.text.is_empty() {
            self.push("\n");
        }
        self.parts(artifact.and_then(|a| a.get("parts")));
    }

    fn parts(&mut self, parts: Option<&Value>) {
        for part in parts.and_then(Value::as_array).into_iter().flatten() {
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                self.push(text);
            } else if let Some(data) = part.get("data") {
                self.push(&data.to_string());
            } else if let Some(file) = file_part(part) {
                self.files.push(file);
            }
        }
    }
}

/// A part carrying a file, inline (`raw`, base64) or by `url`.
fn file_part(part: &Value) -> Option<FilePart> {
    let body = if let Some(raw) = part.get("raw").and_then(Value::as_str) {
        FileBody::Raw(BASE64.decode(raw).ok()?)
    } else {
        FileBody::Url(part.get("url").and_then(Value::as_str)?.to_owned())
    };
    Some(FilePart {
        name: part
            .get("filename")
            .and_then(Value::as_str)
            .unwrap_or("file")
            .to_owned(),
        media_type: part
            .get("mediaType")
            .and_then(Value::as_str)
            .map(str::to_owned),
        body,
    })
}

/// The text parts of `parts`, one per line.
pub(crate) fn texts(parts: Option<&Value>) -> String {
    let parts = parts.and_then(Value::as_array).into_iter().flatten();
    let lines: Vec<&str> = parts
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    lines.join("\n")
}
