//! Reading a streamed completion (`"stream": true`): server-sent events carrying
//! `chat.completion.chunk`s, folded back into the one completion they stand for.
//!
//! Text deltas go to the turn's [`TextSink`] as they arrive, so a chat can show the reply while
//! it is written. Tool calls arrive in pieces too (an `index`, then the id and name, then the
//! arguments a few characters at a time); they are assembled here and only returned when the
//! stream is complete, so no tool ever runs on half its arguments. The last chunk carries
//! `usage` when the request asked for it (`stream_options.include_usage`).
//!
//! The SSE framing is a few lines (events end at a blank line; `data:` lines hold the JSON), so
//! it is read by hand rather than with a crate.

use serde_json::{Map, Value, json};

use super::wire::{Completion, parse_completion};
use crate::backend::TextSink;

/// The completion being assembled from a stream's chunks.
#[derive(Default)]
pub(super) struct Assembler {
    /// Bytes of an event not yet complete.
    pending: Vec<u8>,
    /// How far `pending` is known to hold no event end, so each byte is searched once.
    scanned: usize,
    content: String,
    /// Bytes of tool call names and arguments received so far.
    call_bytes: usize,
    /// Tool calls by their `index`: `id`, `name`, `arguments` as they grow.
    calls: Vec<Map<String, Value>>,
    model: Option<String>,
    usage: Option<Value>,
    /// A `finish_reason` or `[DONE]` was seen: the answer is whole.
    done: bool,
}

impl Assembler {
    /// Feed the next bytes of the body; text deltas found go to `sink`. An error names the
    /// event that could not be read. Bytes are kept as bytes until an event is whole, so a
    /// character split between two chunks is read whole, and each byte is looked at once.
    pub(super) fn feed(&mut self, bytes: &[u8], sink: &dyn TextSink) -> Result<(), String> {
        self.pending.reserve(bytes.len());
        for &byte in bytes {
            // CRLF framing is normalised as it comes, so event ends are always "\n\n".
            if byte == b'\n' && self.pending.last() == Some(&b'\r') {
                self.pending.pop();
                // The byte before the `\r` may be the first half of an event end.
                self.scanned = self.scanned.min(self.pending.len().saturating_sub(1));
            }
            self.pending.push(byte);
        }
        let mut taken = 0;
        while let Some(at) = self.pending[self.scanned..]
            .windows(2)
            .position(|pair| pair == b"\n\n")
        {
            let end = self.scanned + at;
            let event = String::from_utf8_lossy(&self.pending[taken..end]).into_owned();
            taken = end + 2;
            self.scanned = taken;
            let data: Vec<&str> = event
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if data.is_empty() {
                continue; // a comment or keep-alive
            }
            self.event(&data.join("\n"), sink)?;
        }
        self.pending.drain(..taken);
        // The last byte may be the first half of an event end.
        self.scanned = self.pending.len().saturating_sub(1);
        Ok(())
    }

    /// Bytes held so far: the text, the tool calls and the event not yet complete. The reader
    /// caps this, so a stream cannot make the gateway hold more than its cap.
    pub(super) fn held(&self) -> usize {
        self.content.len() + self.call_bytes + self.pending.len()
    }

    fn event(&mut self, data: &str, sink: &dyn TextSink) -> Result<(), String> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            format!(
                "a stream event is not JSON ({e}): {}",
                crate::backend::quote(data)
            )
        })?;
        if let Some(message) = chunk.pointer("/error/message").and_then(Value::as_str) {
            return Err(format!("the stream ended with an error: {message}"));
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            self.model = Some(model.to_owned());
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        if chunk
            .pointer("/choices/0/finish_reason")
            .is_some_and(Value::is_string)
        {
            self.done = true;
        }
        let Some(delta) = chunk.pointer("/choices/0/delta") else {
            return Ok(()); // the usage chunk has no choices
        };
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.content.push_str(text);
            sink.text(text);
        }
        for call in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.call_delta(call);
        }
        Ok(())
    }

    /// One piece of a tool call: fields that come once are set, `name` and `arguments` grow.
    fn call_delta(&mut self, piece: &Value) {
        let index = piece
            .get("index")
            .and_then(Value::as_u64)
            .map_or(self.calls.len().saturating_sub(1), |i| i as usize);
        // An index far past the calls seen so far is a broken server; cap what it can allocate.
        let index = index.min(self.calls.len());
        if index == self.calls.len() {
            self.calls.push(Map::new());
        }
        let call = &mut self.calls[index];
        if let Some(id) = piece.get("id").and_then(Value::as_str) {
            call.insert("id".into(), id.into());
        }
        for field in ["name", "arguments"] {
            let grown = match piece.pointer(&format!("/function/{field}")) {
                Some(Value::String(part)) => {
                    self.call_bytes += part.len();
                    // Grown in place: arguments come a few characters at a time.
                    if let Some(Value::String(before)) = call.get_mut(field) {
                        before.push_str(part);
                        continue;
                    }
                    Value::String(part.clone())
                }
                // Some servers send arguments as an object, whole.
                Some(other) if !other.is_null() => {
                    self.call_bytes += other.to_string().len();
                    other.clone()
                }
                _ => continue,
            };
            call.insert(field.into(), grown);
        }
    }

    /// The whole completion, once the stream has ended.
    pub(super) fn finish(self) -> Result<Completion, String> {
        if !self.done {
            return Err("the stream was cut off before the answer ended".into());
        }
        let tool_calls: Vec<Value> = self
            .calls
            .into_iter()
            .map(|call| {
                json!({
                    "id": call.get("id").cloned().unwrap_or(Value::Null),
                    "type": "function",
                    "function": {
                        "name": call.get("name").cloned().unwrap_or(Value::Null),
                        "arguments": call.get("arguments").cloned().unwrap_or(Value::Null),
                    },
                })
            })
            .collect();
        let mut message = json!({ "role": "assistant", "content": self.content });
        if !tool_calls.is_empty() {
            message["tool_calls"] = tool_calls.into();
        }
        let mut body = json!({ "choices": [{ "message": message }] });
        if let Some(model) = self.model {
            body["model"] = model.into();
        }
        if let Some(usage) = self.usage {
            body["usage"] = usage;
        }
        parse_completion(&body)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::backend::ToolCall;

    #[derive(Default)]
    struct Heard(Mutex<Vec<String>>);

    impl TextSink for Heard {
        fn text(&self, delta: &str) {
            self.0.lock().unwrap().push(delta.to_owned());
        }
        fn retract(&self) {}
    }

    fn sse(chunks: &[Value]) -> String {
        let mut out = String::new();
        for chunk in chunks {
            out.push_str(&format!("data: {chunk}\n\n"));
        }
        out + "data: [DONE]\n\n"
    }

    #[test]
    fn text_deltas_reach_the_sink_and_usage_is_kept() {
        let body = sse(&[
            json!({"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}),
            json!({"model":"m","choices":[{"index":0,"delta":{"content":"Hel"}}]}),
            json!({"model":"m","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}),
            json!({"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}),
            json!({"model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}),
        ]);
        let heard = Heard::default();
        let mut assembler = Assembler::default();
        // Byte by byte: events split anywhere must still be read whole.
        for byte in body.as_bytes() {
            assembler.feed(std::slice::from_ref(byte), &heard).unwrap();
        }
        assert_eq!(*heard.0.lock().unwrap(), ["Hel", "lo"]);
        let done = assembler.finish().unwrap();
        assert_eq!(done.content.as_deref(), Some("Hello"));
        assert_eq!(done.model.as_deref(), Some("m"));
        let usage = done.usage.unwrap();
        assert_eq!((usage.prompt_tokens, usage.completion_tokens), (7, 2));
    }

    #[test]
    fn tool_calls_are_assembled_from_their_pieces() {
        let body = sse(&[
            json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bots_list","arguments":""}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_2","function":{"name":"sessions_send","arguments":"{\"tar"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"get\":\"caid\"}"}}]}}]}),
            json!({"choices":[{"delta":{},"finish_reason":"tool_calls"}]}),
        ]);
        let heard = Heard::default();
        let mut assembler = Assembler::default();
        assembler.feed(body.as_bytes(), &heard).unwrap();
        let done = assembler.finish().unwrap();
        assert!(heard.0.lock().unwrap().is_empty());
        assert_eq!(
            done.tool_calls,
            [
                ToolCall {
                    id: "call_1".into(),
                    name: "bots_list".into(),
                    arguments: "{}".into()
                },
                ToolCall {
                    id: "call_2".into(),
                    name: "sessions_send".into(),
                    arguments: r#"{"target":"caid"}"#.into()
                },
            ]
        );
    }

    #[test]
    fn crlf_framing_split_anywhere_and_what_is_held() {
        let body = sse(&[
            json!({"choices":[{"delta":{"content":"héllo "}}]}),
            json!({"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}),
            json!({"choices":[{"delta":{"content":"wörld"},"finish_reason":"stop"}]}),
        ])
        .replace("\n", "\r\n");
        let heard = Heard::default();
        let mut assembler = Assembler::default();
        for byte in body.as_bytes() {
            assembler.feed(std::slice::from_ref(byte), &heard).unwrap();
        }
        assert_eq!(assembler.held(), "héllo wörld".len() + "f{}".len());
        assembler.feed(b"data: {\"unfinished", &heard).unwrap();
        assert_eq!(assembler.held(), "héllo wörld".len() + 3 + 18);
        let done = Assembler::default();
        assert_eq!(done.held(), 0);
        assert_eq!(*heard.0.lock().unwrap(), ["héllo ", "wörld"]);
    }

    #[test]
    fn an_error_event_or_a_cut_stream_is_an_error() {
        let heard = Heard::default();
        let mut assembler = Assembler::default();
        let err = assembler
            .feed(
                b"data: {\"error\":{\"message\":\"overloaded\"}}\n\n",
                &heard,
            )
            .unwrap_err();
        assert!(err.contains("overloaded"), "{err}");
        assert!(Assembler::default().finish().is_err());
        let mut comments = Assembler::default();
        comments.feed(b": keep-alive\r\n\r\n", &heard).unwrap();
        assert!(comments.finish().is_err());
    }
}
