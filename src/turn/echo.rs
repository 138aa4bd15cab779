//! The `echo` backend: deterministic replies for demos and tests, no model needed.
//!
//! It says back what it was sent, minus the mentions that woke it and the
//! `Message from bot '<x>': ` prefix a `sessions_send` adds, so two echo bots can be chained in a
//! demo and a test can predict every word. One directive exercises the tool path:
//! `ask @<bot>: <text>` calls `sessions_send` and answers with the target's reply.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Backend, BackendError, BackendReply, ToolCall, ToolExecutor, TurnRequest};

/// The model name echo replies carry, so transcripts show no real model answered.
const MODEL: &str = "echo";

/// Replies with the text it was sent; understands `ask @<bot>: <text>`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EchoBackend;

impl EchoBackend {
    /// The echo backend (it has no settings).
    pub fn new() -> Self {
        Self
    }
}

#[async_trait]
impl Backend for EchoBackend {
    async fn run(
        &self,
        request: &TurnRequest,
        tools: &dyn ToolExecutor,
    ) -> Result<BackendReply, BackendError> {
        let text = strip_addressing(request.last_user_text());
        let reply = match parse_ask(text) {
            Some((target, message)) => {
                let call = ToolCall {
                    id: "echo_call_1".to_owned(),
                    name: "sessions_send".to_owned(),
                    arguments: json!({ "target": target, "message": message }).to_string(),
                };
                describe_send(target, &tools.call(&call).await)
            }
            None => text.to_owned(),
        };
        Ok(BackendReply {
            text: Some(reply),
            model: MODEL.to_owned(),
        })
    }
}

/// `text` without a leading `Message from bot '<x>': ` prefix and leading `@mentions` (in any
/// order and number, e.g. a bot message that itself mentions the next bot), trimmed.
fn strip_addressing(mut text: &str) -> &str {
    loop {
        let before = text;
        text = text.trim_start();
        if let Some(rest) = text.strip_prefix("Message from bot '") {
            if let Some((_sender, message)) = rest.split_once("':") {
                text = message;
            }
        }
        text = text.trim_start();
        if let Some(rest) = text.strip_prefix('@') {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            if end > 0 {
                text = &rest[end..];
            }
        } else if let Some(rest) = text.strip_prefix("<@") {
            // A platform mention left unresolved (`<@U123>`).
            if let Some(end) = rest.find('>') {
                text = &rest[end + 1..];
            }
        }
        if text == before {
            return text.trim();
        }
    }
}

/// `ask @<bot>: <text>` (the keyword in any case) as `(bot, text)`.
fn parse_ask(text: &str) -> Option<(&str, &str)> {
    let head = text.get(..4)?;
    if !head.eq_ignore_ascii_case("ask ") {
        return None;
    }
    let rest = text[4..].trim_start().strip_prefix('@')?;
    let (target, message) = rest.split_once(':')?;
    let target = target.trim();
    let message = message.trim();
    let valid = !target.is_empty() && !target.contains(char::is_whitespace);
    (valid && !message.is_empty()).then_some((target, message))
}

/// The reply to an `ask`: the target's reply, or one line saying what happened instead.
fn describe_send(target: &str, result: &Value) -> String {
    if let Some(reply) = result.get("reply").and_then(Value::as_str) {
        return reply.to_owned();
    }
    let field = |name: &str| result.get(name).and_then(Value::as_str);
    let status = field("status").unwrap_or("no status");
    match field("reason").or_else(|| field("error")) {
        Some(reason) => format!("sessions_send to {target}: {status} ({reason})"),
        None => format!("sessions_send to {target}: {status}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_mentions_and_bot_prefix() {
        assert_eq!(strip_addressing("  hello  "), "hello");
        assert_eq!(strip_addressing("@snark @caid  hi there"), "hi there");
        assert_eq!(strip_addressing("Message from bot 'snark': hi"), "hi");
        assert_eq!(
            strip_addressing("Message from bot 'snark': @echo2 relay this"),
            "relay this"
        );
        assert_eq!(strip_addressing("<@U123> hi"), "hi");
        assert_eq!(strip_addressing("mail me @ noon"), "mail me @ noon");
        assert_eq!(strip_addressing("@echo ask @caid: q"), "ask @caid: q");
        assert_eq!(strip_addressing("@snark: hello"), "hello");
    }

    #[test]
    fn parses_the_ask_directive() {
        assert_eq!(
            parse_ask("ask @caid: write a haiku"),
            Some(("caid", "write a haiku"))
        );
        assert_eq!(parse_ask("Ask @caid:go"), Some(("caid", "go")));
        assert_eq!(
            parse_ask("ask @caid: time: 5pm"),
            Some(("caid", "time: 5pm"))
        );
        assert_eq!(parse_ask("ask caid: x"), None);
        assert_eq!(parse_ask("ask @caid x"), None);
        assert_eq!(parse_ask("ask @caid: "), None);
        assert_eq!(parse_ask("basket"), None);
    }

    #[test]
    fn describes_results_without_reply() {
        assert_eq!(describe_send("c", &json!({"status":"ok","reply":"r"})), "r");
        assert_eq!(
            describe_send("c", &json!({"status":"refused","reason":"self-send"})),
            "sessions_send to c: refused (self-send)"
        );
        assert_eq!(
            describe_send("c", &json!({"status":"accepted","run_id":"1"})),
            "sessions_send to c: accepted"
        );
    }
}
