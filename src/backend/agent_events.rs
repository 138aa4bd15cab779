//! The output events of an agent (SPEC 6.1), one JSON object each: a `command` agent prints
//! them as JSON Lines, an `http` agent answers with them as server-sent events or NDJSON.
//!
//! ```text
//! {"type":"text","delta":"Looking at the "}              streamed into the chat (4.2)
//! {"type":"progress","message":"reading","step":2,"of":5} on the delivery and the dashboard
//! {"type":"usage","prompt_tokens":900,"completion_tokens":40}
//! {"type":"attachment","artifact":"art-…"}              posted with the reply
//! {"type":"reply","text":"…"}  or  {"type":"silent"}     the end of the turn
//! ```
//!
//! Without a `reply` event the streamed text is the reply. Anything else (a line that is not
//! an event, an unknown type, an event after the end) fails the turn with the reason: an
//! agent speaking a half-understood protocol must not have half of its answer posted.

use serde::Deserialize;
use serde_json::Value;

use super::{BackendReply, ReplyFile, TextSink, ToolCall, ToolExecutor, Usage, quote};

/// Whether `line` is an event rather than plain text: a JSON object with a `type`.
pub(super) fn is_event(line: &str) -> bool {
    let line = line.trim();
    line.starts_with('{')
        && serde_json::from_str::<Value>(line).is_ok_and(|v| v.get("type").is_some())
}

/// A line that is not an event this version of baton reads.
#[derive(Debug, thiserror::Error)]
#[error(
    "event {number} is not a baton agent event ({reason}): {line}; see `baton schema turn` \
     and docs/agents.md for the events"
)]
pub(super) struct BadEvent {
    number: usize,
    reason: String,
    line: String,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Event {
    Text {
        delta: String,
    },
    Progress {
        message: String,
        #[serde(default)]
        step: Option<u32>,
        #[serde(default)]
        of: Option<u32>,
    },
    Usage {
        #[serde(default, alias = "input_tokens")]
        prompt_tokens: u64,
        #[serde(default, alias = "output_tokens")]
        completion_tokens: u64,
        #[serde(default)]
        model: Option<String>,
    },
    Attachment {
        artifact: String,
    },
    Reply {
        text: String,
        #[serde(default)]
        model: Option<String>,
    },
    Silent {},
}

/// How the turn ended, once a final event came.
enum End {
    Reply(String),
    Silent,
}

/// Reads one turn's events as they arrive: text goes to the sink at once, progress to the
/// `progress` tool, the rest into the reply.
pub(super) struct AgentOutput<'a> {
    sink: &'a dyn TextSink,
    tools: &'a dyn ToolExecutor,
    streamed: String,
    end: Option<End>,
    model: Option<String>,
    usage: Option<Usage>,
    attachments: Vec<ReplyFile>,
    count: usize,
}

impl<'a> AgentOutput<'a> {
    pub(super) fn new(sink: &'a dyn TextSink, tools: &'a dyn ToolExecutor) -> Self {
        Self {
            sink,
            tools,
            streamed: String::new(),
            end: None,
            model: None,
            usage: None,
            attachments: Vec::new(),
            count: 0,
        }
    }

    /// One event (a JSON Lines line, an SSE `data`, an NDJSON line). Blank lines are skipped.
    pub(super) async fn event(&mut self, line: &str) -> Result<(), BadEvent> {
        let line = line.trim();
        if line.is_empty() {
            return Ok(());
        }
        self.count += 1;
        let bad = |reason: String| BadEvent {
            number: self.count,
            reason,
            line: quote(line),
        };
        if self.end.is_some() {
            return Err(bad("it came after the final reply/silent event".into()));
        }
        let event: Event = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
        match event {
            Event::Text { delta } => {
                self.sink.text(&delta);
                self.streamed.push_str(&delta);
            }
            Event::Progress { message, step, of } => {
                let call = ToolCall {
                    id: format!("agent-progress-{}", self.count),
                    name: "progress".into(),
                    arguments: serde_json::json!({"message": message, "step": step, "of": of})
                        .to_string(),
                };
                let result = self.tools.call(&call).await;
                if result["status"] != "ok" {
                    tracing::debug!(%result, "an agent's progress event was not kept");
                }
            }
            Event::Usage {
                prompt_tokens,
                completion_tokens,
                model,
            } => {
                let used = Usage {
                    prompt_tokens,
                    completion_tokens,
                };
                self.usage = Some(self.usage.unwrap_or_default().plus(used));
                self.model = model.or(self.model.take());
            }
            Event::Attachment { artifact } => {
                self.attachments
                    .push(ReplyFile::Artifact(artifact.trim().to_owned()));
            }
            Event::Reply { text, model } => {
                self.model = model.or(self.model.take());
                self.end = Some(End::Reply(text));
            }
            Event::Silent {} => self.end = Some(End::Silent),
        }
        Ok(())
    }

    /// The reply: the final event's, else the streamed text.
    pub(super) fn finish(self, default_model: &str) -> BackendReply {
        let text = match self.end {
            Some(End::Reply(text)) => Some(text),
            Some(End::Silent) => None,
            None => Some(self.streamed),
        };
        BackendReply {
            text,
            model: self.model.unwrap_or_else(|| default_model.to_owned()),
            usage: self.usage,
            attachments: self.attachments,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::backend::NoTools;

    #[derive(Default)]
    struct Heard(Mutex<String>);

    impl TextSink for Heard {
        fn text(&self, delta: &str) {
            self.0.lock().unwrap().push_str(delta);
        }
        fn retract(&self) {}
    }

    #[tokio::test]
    async fn streamed_text_is_the_reply_unless_a_final_event_says_otherwise() {
        let heard = Heard::default();
        let mut out = AgentOutput::new(&heard, &NoTools);
        for line in [
            r#"{"type":"text","delta":"Hel"}"#,
            "",
            r#"{"type":"usage","input_tokens":10,"output_tokens":2,"model":"opus"}"#,
            r#"{"type":"text","delta":"lo"}"#,
            r#"{"type":"attachment","artifact":"art-1"}"#,
        ] {
            out.event(line).await.unwrap();
        }
        assert_eq!(*heard.0.lock().unwrap(), "Hello");
        let reply = out.finish("command");
        assert_eq!(reply.text.as_deref(), Some("Hello"));
        assert_eq!(reply.model, "opus");
        assert_eq!(reply.usage.unwrap().prompt_tokens, 10);
        assert_eq!(reply.attachments, [ReplyFile::Artifact("art-1".into())]);

        let mut out = AgentOutput::new(&heard, &NoTools);
        out.event(r#"{"type":"silent"}"#).await.unwrap();
        assert_eq!(out.finish("command").text, None);
    }

    #[tokio::test]
    async fn a_malformed_or_late_event_is_refused_with_its_number() {
        let mut out = AgentOutput::new(&super::super::NoSink, &NoTools);
        let err = out.event(r#"{"type":"shout"}"#).await.unwrap_err();
        assert!(err.to_string().starts_with("event 1 "), "{err}");
        let mut out = AgentOutput::new(&super::super::NoSink, &NoTools);
        out.event(r#"{"type":"reply","text":"done"}"#)
            .await
            .unwrap();
        let err = out
            .event(r#"{"type":"text","delta":"x"}"#)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("after the final"), "{err}");
        assert!(is_event(r#" {"type":"text","delta":"x"}"#));
        assert!(!is_event(r#"{"reply":"x"}"#));
        assert!(!is_event("plain words"));
    }
}
