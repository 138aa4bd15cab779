//! The `echo` backend: deterministic replies for demos and tests, no model needed.
//!
//! It says back what it was sent, minus the mentions that woke it and the
//! `Message from bot '<x>': ` prefix a `sessions_send` adds, so two echo bots can be chained in a
//! demo and a test can predict every word. A turn in a chain is answered with the chain's topic,
//! not the instructions baton wraps around it. Two directives exercise the tool path:
//! - `ask @<bot>: <text>` calls `sessions_send` and answers with the target's reply (the
//!   target may be an A2A peer, `ask @a2a:<peer>: <text>`);
//! - `tell @<bot>: <text>` calls it fire-and-forget (`timeout_seconds = 0`) and answers that the
//!   message was accepted; the target's reply arrives in the session later.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Backend, BackendError, BackendReply, ToolCall, ToolExecutor, TurnRequest};

/// The model name echo replies carry, so transcripts show no real model answered.
const MODEL: &str = "echo";

/// Replies with the text it was sent; understands `ask @<bot>: <text>` and `tell @<bot>: <text>`.
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
        let given = request.last_user_text();
        let text = super::chain_topic(given).unwrap_or_else(|| strip_addressing(given));
        let reply = match parse_directive(text) {
            Some(Directive {
                wait,
                target,
                message,
            }) => {
                let mut arguments = json!({ "target": target, "message": message });
                if !wait {
                    arguments["timeout_seconds"] = json!(0);
                }
                let call = ToolCall {
                    id: "echo_call_1".to_owned(),
                    name: "sessions_send".to_owned(),
                    arguments: arguments.to_string(),
                };
                describe_send(target, &tools.call(&call).await)
            }
            None => text.to_owned(),
        };
        Ok(BackendReply {
            text: Some(reply),
            model: MODEL.to_owned(),
            usage: None,
            attachments: Vec::new(),
        })
    }
}

/// `text` without a leading `Message from bot '<x>': ` prefix and leading `@mentions` (in any
/// order and number, e.g. a bot message that itself mentions the next bot), trimmed.
fn strip_addressing(mut text: &str) -> &str {
    loop {
        let before = text;
        text = text.trim_start();
        if let Some(rest) = text.strip_prefix("Message from bot '")
            && let Some((_sender, message)) = rest.split_once("':")
        {
            text = message;
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

/// How a `sessions_send` target names an A2A peer (`a2a:<peer>`).
const A2A_TARGET: &str = "a2a:";

/// A `sessions_send` the text asks for.
#[derive(Debug, PartialEq, Eq)]
struct Directive<'a> {
    /// `ask` waits for the reply; `tell` does not.
    wait: bool,
    target: &'a str,
    message: &'a str,
}

/// `ask @<bot>: <text>` or `tell @<bot>: <text>` (the keyword in any case, the `@` optional);
/// `<bot>` may be `a2a:<peer>`, the target `sessions_send` takes for an A2A peer. In a chat, `@snark ask @caid: ...` does not wake caid: the message is addressed to snark
/// (see `dispatcher::activation`).
fn parse_directive(text: &str) -> Option<Directive<'_>> {
    let (keyword, rest) = text.split_once(' ')?;
    let wait = if keyword.eq_ignore_ascii_case("ask") {
        true
    } else if keyword.eq_ignore_ascii_case("tell") {
        false
    } else {
        return None;
    };
    let rest = rest.trim_start();
    let rest = rest.strip_prefix('@').unwrap_or(rest);
    // The colon of an `a2a:` target is part of the target, not the end of it.
    let scheme = if rest.starts_with(A2A_TARGET) {
        A2A_TARGET.len()
    } else {
        0
    };
    let end = scheme + rest[scheme..].find(':')?;
    let (target, message) = (rest[..end].trim(), &rest[end + 1..]);
    let message = message.trim();
    let valid = !target.is_empty() && !target.contains(char::is_whitespace);
    (valid && !message.is_empty()).then_some(Directive {
        wait,
        target,
        message,
    })
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
    fn parses_the_directives() {
        let ask = |target, message| {
            Some(Directive {
                wait: true,
                target,
                message,
            })
        };
        assert_eq!(
            parse_directive("ask @caid: write a haiku"),
            ask("caid", "write a haiku")
        );
        assert_eq!(parse_directive("Ask @caid:go"), ask("caid", "go"));
        assert_eq!(
            parse_directive("ask @caid: time: 5pm"),
            ask("caid", "time: 5pm")
        );
        assert_eq!(
            parse_directive("TELL @sec: audit this"),
            Some(Directive {
                wait: false,
                target: "sec",
                message: "audit this"
            })
        );
        assert_eq!(
            parse_directive("ask caid: x"),
            ask("caid", "x"),
            "the @ is optional"
        );
        assert_eq!(
            parse_directive("ask @a2a:remote: ping: 1"),
            ask("a2a:remote", "ping: 1"),
            "an A2A peer's target keeps its colon"
        );
        assert_eq!(parse_directive("ask @a2a:remote"), None);
        assert_eq!(parse_directive("ask @caid x"), None);
        assert_eq!(parse_directive("ask @caid: "), None);
        assert_eq!(parse_directive("basket"), None);
        assert_eq!(parse_directive("asking @caid: x"), None);
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
