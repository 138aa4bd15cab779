//! The `http` backend: POST the normalized turn as JSON to a URL and read `{"reply": "..."}` or
//! `{"silent": true}` back (with `attachments`, files to post), so any agent runtime can sit
//! behind baton.
//!
//! Unlike the `openai` backend it never retries: the agent behind the URL may already have acted
//! (sent mail, opened a ticket) before failing, and a second POST would act twice.

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::Value;

use super::agent_events::AgentOutput;
use super::{
    Backend, BackendError, BackendReply, DEFAULT_MAX_READ, NoSink, ReplyFile, TextSink,
    ToolExecutor, TurnRequest, agent_call, describe_transport_error, error_message, http_client,
    quote, redacted_url,
};

/// Posts each turn to an agent's URL. baton's tools reach the agent over MCP (the turn's
/// `tools`), not through the executor.
pub struct HttpBackend {
    url: String,
    client: reqwest::Client,
    /// Bytes of an answer read at most; past them the turn fails.
    max_read: usize,
}

impl HttpBackend {
    /// A backend posting to `url`. The agent may take as long as the turn's limit allows.
    /// Fails only if the TLS stack cannot be set up.
    pub fn new(url: impl Into<String>) -> Result<Self, BackendError> {
        Ok(Self {
            url: url.into(),
            client: http_client(None)?,
            max_read: DEFAULT_MAX_READ,
        })
    }

    /// The most of an answer read before the turn fails, builder style.
    pub fn with_max_read(mut self, bytes: usize) -> Self {
        self.max_read = bytes;
        self
    }
}

#[async_trait]
impl Backend for HttpBackend {
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
        agent_call(request, self.exchange(request, tools, sink)).await
    }
}

impl HttpBackend {
    /// One request to the agent and its answer, whole or streamed.
    async fn exchange(
        &self,
        request: &TurnRequest,
        tools: &dyn ToolExecutor,
        sink: &dyn TextSink,
    ) -> Result<BackendReply, BackendError> {
        let transport = |e: reqwest::Error| {
            BackendError::Unreachable(describe_transport_error(&e, &self.url, None))
        };
        let post = self
            .client
            .post(&self.url)
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream, application/x-ndjson",
            )
            .json(request);
        let mut response = crate::trace::traced(post).send().await.map_err(transport)?;
        let status = response.status();
        let default_model = if request.model.is_empty() {
            "http"
        } else {
            &request.model
        };
        let framing = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(Framing::of);
        if let Some(framing) = framing.filter(|_| status.is_success()) {
            let mut output = AgentOutput::new(sink, tools);
            let mut lines = Lines::default();
            let mut read = 0;
            while let Some(chunk) = response.chunk().await.map_err(transport)? {
                read += chunk.len();
                if read > self.max_read {
                    return Err(BackendError::TooLong(self.max_read));
                }
                for line in lines.push(&chunk) {
                    self.event(&mut output, framing, &line).await?;
                }
            }
            if let Some(line) = lines.rest() {
                self.event(&mut output, framing, &line).await?;
            }
            return Ok(output.finish(default_model));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            if body.len() + chunk.len() > self.max_read {
                return Err(BackendError::TooLong(self.max_read));
            }
            body.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&body);
        if !status.is_success() {
            return Err(BackendError::Status {
                status: status.as_u16(),
                attempts: 1,
                message: error_message(status, &text),
            });
        }
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            BackendError::BadResponse(format!(
                "{} answered non-JSON ({e}): {}",
                redacted_url(&self.url),
                quote(&text)
            ))
        })?;
        agent_reply(&value, default_model).unwrap_or_else(|| {
            Err(BackendError::BadResponse(format!(
                "{} answered neither {{\"reply\": \"...\"}} nor {{\"silent\": true}}: {}",
                redacted_url(&self.url),
                quote(&text)
            )))
        })
    }

    /// One line of an event stream: an NDJSON line, or an SSE `data:` line (other SSE fields,
    /// comments and blank lines carry no event).
    async fn event(
        &self,
        output: &mut AgentOutput<'_>,
        framing: Framing,
        line: &str,
    ) -> Result<(), BackendError> {
        let event = match framing {
            Framing::Ndjson => line,
            Framing::Sse => match line.strip_prefix("data:") {
                Some(data) => data,
                None => return Ok(()),
            },
        };
        output.event(event).await.map_err(|e| {
            BackendError::BadResponse(format!("{} answered: {e}", redacted_url(&self.url)))
        })
    }
}

/// How an agent's answer carries events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// `text/event-stream`: one event per `data:` line.
    Sse,
    /// `application/x-ndjson` (or `jsonl`): one event per line.
    Ndjson,
}

impl Framing {
    /// The framing a `Content-Type` names; `None` for a whole JSON (or other) body.
    fn of(content_type: &str) -> Option<Framing> {
        let media = content_type.split(';').next()?.trim();
        match media {
            "text/event-stream" => Some(Framing::Sse),
            "application/x-ndjson" | "application/jsonl" | "application/jsonlines" => {
                Some(Framing::Ndjson)
            }
            _ => None,
        }
    }
}

/// Splits a byte stream into lines as it arrives (a line may span chunks).
#[derive(Default)]
pub(super) struct Lines(Vec<u8>);

impl Lines {
    /// The lines completed by `chunk`, without their line ends.
    pub(super) fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.0.extend_from_slice(chunk);
        let mut lines = Vec::new();
        while let Some(end) = self.0.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.0.drain(..=end).collect();
            lines.push(String::from_utf8_lossy(&line).trim_end().to_owned());
        }
        lines
    }

    /// What is left after the last line end.
    pub(super) fn rest(self) -> Option<String> {
        let rest = String::from_utf8_lossy(&self.0).trim().to_owned();
        (!rest.is_empty()).then_some(rest)
    }
}

/// Reads the agent reply protocol shared by the `http` and `command` backends:
/// `{"silent": true}` is an explicit silence, `{"reply": "..."}` a reply, and an optional
/// `"model"` names who answered (else `default_model`). `"attachments"` lists files to post
/// with the reply ([`attachments`]); with them, `"reply"` may be left out (the files alone).
/// `None` when `value` speaks neither form.
pub(super) fn agent_reply(
    value: &Value,
    default_model: &str,
) -> Option<Result<BackendReply, BackendError>> {
    let object = value.as_object()?;
    let model = object
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(default_model)
        .to_owned();
    let files = object.get("attachments");
    if object.get("silent").and_then(Value::as_bool) == Some(true) {
        if files.is_some() {
            return Some(Err(BackendError::BadResponse(
                "a silent reply posts nothing, so it cannot have \"attachments\"; give a \
                 \"reply\" (it may be empty) to post files"
                    .to_owned(),
            )));
        }
        return Some(Ok(BackendReply {
            text: None,
            model,
            usage: None,
            attachments: Vec::new(),
        }));
    }
    let attachments = match files.map(attachments).transpose() {
        Ok(found) => found.unwrap_or_default(),
        Err(err) => return Some(Err(err)),
    };
    let text = match (object.get("reply"), attachments.is_empty()) {
        (Some(Value::String(text)), _) => text.clone(),
        (None, false) => String::new(),
        (None, true) => return None,
        (Some(other), _) => {
            return Some(Err(BackendError::BadResponse(format!(
                "\"reply\" must be a string, got {}",
                quote(&other.to_string())
            ))));
        }
    };
    Some(Ok(BackendReply {
        text: Some(text),
        model,
        usage: None,
        attachments,
    }))
}

/// An agent's `"attachments"`: each an artifact id (`"art-…"`), or a file given inline as
/// `{"name": "...", "media_type"?: "...", "text": "..."}` or with `"base64"` instead of `"text"`
/// (kept as an artifact of the run, then attached).
fn attachments(value: &Value) -> Result<Vec<ReplyFile>, BackendError> {
    let bad = |what: String| {
        BackendError::BadResponse(format!(
            "\"attachments\" {what}; give a list of artifact ids (\"art-…\") or of \
             {{\"name\", \"text\" | \"base64\", \"media_type\"?}} objects"
        ))
    };
    let Some(items) = value.as_array() else {
        return Err(bad("is not a list".to_owned()));
    };
    let mut files = Vec::with_capacity(items.len());
    for (n, item) in items.iter().enumerate() {
        let file = match item {
            Value::String(id) => ReplyFile::Artifact(id.trim().to_owned()),
            Value::Object(file) => {
                let text = file.get("text").and_then(Value::as_str);
                let encoded = file.get("base64").and_then(Value::as_str);
                let content = match (text, encoded) {
                    (Some(text), None) => text.as_bytes().to_vec(),
                    (None, Some(encoded)) => BASE64.decode(encoded.trim()).map_err(|err| {
                        bad(format!("item {n}: `base64` is not valid base64 ({err})"))
                    })?,
                    _ => {
                        return Err(bad(format!(
                            "item {n} needs `text` or `base64`, one of them"
                        )));
                    }
                };
                let name = file.get("name").and_then(Value::as_str).map(str::trim);
                let Some(name) = name.filter(|n| !n.is_empty()) else {
                    return Err(bad(format!("item {n} has no `name`")));
                };
                ReplyFile::Inline {
                    name: name.to_owned(),
                    media_type: file
                        .get("media_type")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    content,
                }
            }
            other => {
                return Err(bad(format!(
                    "item {n} is neither an id nor a file: {}",
                    quote(&other.to_string())
                )));
            }
        };
        files.push(file);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_reply_silent_and_model() {
        let reply = agent_reply(&json!({"reply": "hi"}), "m").unwrap().unwrap();
        assert_eq!(reply.text.as_deref(), Some("hi"));
        assert_eq!(reply.model, "m");
        let reply = agent_reply(&json!({"reply": "hi", "model": "claude"}), "m")
            .unwrap()
            .unwrap();
        assert_eq!(reply.model, "claude");
        let silent = agent_reply(&json!({"silent": true}), "m").unwrap().unwrap();
        assert_eq!(silent.text, None);
    }

    #[test]
    fn reads_attachments_by_id_and_inline() {
        let reply = agent_reply(
            &json!({"attachments": ["art-1", {"name": "a.txt", "text": "hi"},
                {"name": "b.png", "media_type": "image/png", "base64": "AAE="}]}),
            "m",
        )
        .unwrap()
        .unwrap();
        assert_eq!(reply.text.as_deref(), Some(""), "files alone");
        assert_eq!(
            reply.attachments,
            [
                ReplyFile::Artifact("art-1".into()),
                ReplyFile::Inline {
                    name: "a.txt".into(),
                    media_type: None,
                    content: b"hi".to_vec()
                },
                ReplyFile::Inline {
                    name: "b.png".into(),
                    media_type: Some("image/png".into()),
                    content: vec![0, 1]
                },
            ]
        );
        for bad in [
            json!({"reply": "x", "attachments": "art-1"}),
            json!({"reply": "x", "attachments": [{"text": "no name"}]}),
            json!({"reply": "x", "attachments": [{"name": "a", "base64": "!!"}]}),
            json!({"silent": true, "attachments": ["art-1"]}),
        ] {
            assert!(
                matches!(
                    agent_reply(&bad, "m"),
                    Some(Err(BackendError::BadResponse(_)))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn lines_span_chunks_and_framing_follows_the_content_type() {
        let mut lines = Lines::default();
        assert!(lines.push(b"data: {\"type\":").is_empty());
        assert_eq!(
            lines.push(b"\"silent\"}\r\n\nda"),
            ["data: {\"type\":\"silent\"}", ""]
        );
        assert_eq!(lines.rest().as_deref(), Some("da"));
        assert_eq!(
            Framing::of("text/event-stream; charset=utf-8"),
            Some(Framing::Sse)
        );
        assert_eq!(Framing::of("application/x-ndjson"), Some(Framing::Ndjson));
        assert_eq!(Framing::of("application/json"), None);
    }

    #[test]
    fn rejects_other_shapes() {
        assert!(agent_reply(&json!({"answer": "hi"}), "m").is_none());
        assert!(agent_reply(&json!("hi"), "m").is_none());
        assert!(agent_reply(&json!({"silent": false}), "m").is_none());
        assert!(matches!(
            agent_reply(&json!({"reply": 3}), "m"),
            Some(Err(BackendError::BadResponse(_)))
        ));
    }
}
