//! The OpenAI chat-completions wire format: the request body baton sends and the lenient
//! reading of the answer, kept apart from the HTTP and retry logic that carries them.

use serde_json::{Value, json};

use crate::backend::{ChatLine, Role, ToolCall, ToolSpec, Usage, quote};

/// Whether the answer is asked for whole or as a stream of chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Delivery {
    /// One JSON body.
    Whole,
    /// Server-sent chunks, the last one with `usage`.
    Streamed,
}

/// A bot's model settings, sent with each of its requests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelOptions {
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// The most tokens an answer may have.
    pub max_tokens: Option<u32>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// How hard a reasoning model thinks (`low`, `medium`, `high`...).
    pub reasoning_effort: Option<String>,
    /// More keys for the request body, passed through as they are (a server's own options).
    /// baton's own keys (`model`, `messages`, `tools`, `stream`...) are never overridden.
    pub extra_body: serde_json::Map<String, Value>,
}

/// The JSON body of one `/chat/completions` request.
pub(super) fn request_body(
    model: &str,
    lines: &[ChatLine],
    tools: &[ToolSpec],
    delivery: Delivery,
    options: &ModelOptions,
) -> Value {
    let mut body = json!({
        "model": model,
        "messages": lines.iter().map(wire_message).collect::<Vec<_>>(),
    });
    for (key, value) in [
        ("temperature", options.temperature.map(Value::from)),
        ("max_tokens", options.max_tokens.map(Value::from)),
        ("top_p", options.top_p.map(Value::from)),
        (
            "reasoning_effort",
            options.reasoning_effort.clone().map(Value::from),
        ),
    ] {
        if let Some(value) = value {
            body[key] = value;
        }
    }
    if delivery == Delivery::Streamed {
        body["stream"] = true.into();
        body["stream_options"] = json!({ "include_usage": true });
    }
    if !tools.is_empty() {
        body["tools"] = tools.iter().map(wire_tool).collect();
    }
    if let Value::Object(fields) = &mut body {
        for (key, value) in &options.extra_body {
            fields.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    body
}

/// One conversation line in OpenAI's shape.
fn wire_message(line: &ChatLine) -> Value {
    let role = match line.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut message = json!({ "role": role, "content": line.content });
    match line.role {
        Role::User => {
            if let Some(name) = line.name.as_deref().and_then(wire_name) {
                message["name"] = name.into();
            }
            if !line.images.is_empty() {
                message["content"] = content_parts(line);
            }
        }
        Role::Assistant if !line.tool_calls.is_empty() => {
            if line.content.is_empty() {
                message["content"] = Value::Null;
            }
            message["tool_calls"] = line
                .tool_calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": { "name": call.name, "arguments": call.arguments },
                    })
                })
                .collect();
        }
        Role::Tool => {
            message["tool_call_id"] = line.tool_call_id.clone().unwrap_or_default().into();
        }
        _ => {}
    }
    message
}

/// A user line with images as OpenAI's content parts: the text, then each image as a base64
/// `data:` URL (the one way to send image bytes inline; a model server cannot fetch baton's).
fn content_parts(line: &ChatLine) -> Value {
    use base64::Engine as _;
    let mut parts = vec![json!({ "type": "text", "text": line.content })];
    for image in &line.images {
        let data = base64::engine::general_purpose::STANDARD.encode(&image.data);
        parts.push(json!({
            "type": "image_url",
            "image_url": { "url": format!("data:{};base64,{data}", image.media_type) },
        }));
    }
    Value::Array(parts)
}

/// A speaker name OpenAI accepts (`^[a-zA-Z0-9_-]{1,64}$`): other characters become `_`, runs
/// of `_` collapse, and a name with nothing left (e.g. all CJK) is dropped rather than sent as
/// `___`, since the speaker is also named in the text.
fn wire_name(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    let out = out.trim_matches('_');
    let out: String = out.chars().take(64).collect();
    (!out.is_empty()).then_some(out)
}

/// A tool in OpenAI's `{"type":"function","function":{...}}` shape.
fn wire_tool(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    })
}

/// What one completion said.
#[derive(Debug, PartialEq)]
pub(super) struct Completion {
    pub(super) content: Option<String>,
    pub(super) tool_calls: Vec<ToolCall>,
    pub(super) model: Option<String>,
    pub(super) usage: Option<Usage>,
}

/// Reads `choices[0].message` of a completion. Lenient where servers differ: arguments may be an
/// object instead of JSON text, a call may lack an id (one is made up so results still pair up).
pub(super) fn parse_completion(body: &Value) -> Result<Completion, String> {
    let Some(message) = body.pointer("/choices/0/message") else {
        if let Some(error) = body.pointer("/error/message").and_then(Value::as_str) {
            return Err(format!("an error instead of a completion: {error}"));
        }
        return Err(format!(
            "no choices[0].message in {}",
            quote(&body.to_string())
        ));
    };
    let content = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        // Content parts: keep the text ones.
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        Some(other) => {
            return Err(format!(
                "message content is not text: {}",
                quote(&other.to_string())
            ));
        }
    };
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").filter(|c| !c.is_null()) {
        let calls = calls
            .as_array()
            .ok_or_else(|| "tool_calls is not a list".to_owned())?;
        for (index, call) in calls.iter().enumerate() {
            let name = call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("tool call {index} has no function name"))?;
            let arguments = match call.pointer("/function/arguments") {
                None | Some(Value::Null) => "{}".to_owned(),
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
            };
            let id = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|id| !id.is_empty())
                .map_or_else(|| format!("call_{index}"), str::to_owned);
            tool_calls.push(ToolCall {
                id,
                name: name.to_owned(),
                arguments,
            });
        }
    }
    Ok(Completion {
        content,
        tool_calls,
        model: body.get("model").and_then(Value::as_str).map(str::to_owned),
        usage: body
            .get("usage")
            .and_then(|u| serde_json::from_value(u.clone()).ok()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OpenAI's vision request shape: `content` is an array of a text part and `image_url`
    /// parts whose `url` is a base64 `data:` URL.
    #[test]
    fn a_user_line_with_images_is_sent_as_content_parts() {
        let mut line = ChatLine::new(Role::User, "what is this?");
        line.images.push(crate::backend::Image {
            media_type: "image/png".into(),
            data: b"\x89PNG".to_vec(),
        });
        let body = request_body("m", &[line], &[], Delivery::Whole, &ModelOptions::default());
        let content = &body["messages"][0]["content"];
        assert_eq!(content[0], json!({"type": "text", "text": "what is this?"}));
        assert_eq!(content[1]["type"], "image_url");
        assert_eq!(
            content[1]["image_url"]["url"],
            "data:image/png;base64,iVBORw=="
        );
        let plain = request_body(
            "m",
            &[ChatLine::new(Role::User, "hi")],
            &[],
            Delivery::Whole,
            &ModelOptions::default(),
        );
        assert_eq!(plain["messages"][0]["content"], "hi");
    }

    #[test]
    fn model_options_are_sent_and_extra_body_never_overrides_batons_keys() {
        let mut extra = serde_json::Map::new();
        extra.insert("model".into(), json!("other"));
        extra.insert("seed".into(), json!(7));
        let options = ModelOptions {
            temperature: Some(0.2),
            max_tokens: Some(500),
            top_p: None,
            reasoning_effort: Some("high".into()),
            extra_body: extra,
        };
        let line = ChatLine::new(Role::User, "hi");
        let body = request_body("m", &[line], &[], Delivery::Whole, &options);
        assert_eq!(body["temperature"], 0.2);
        assert_eq!(body["max_tokens"], 500);
        assert_eq!(body["reasoning_effort"], "high");
        assert_eq!(body["seed"], 7);
        assert_eq!(body["model"], "m");
        assert!(body.get("top_p").is_none());
    }

    /// `chat_response_basic.json` from the shared fixtures (openai/openai-openapi, verbatim).
    const RESPONSE_BASIC: &str = r#"
    {
      "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
      "object": "chat.completion",
      "created": 1741569952,
      "model": "gpt-5.4",
      "choices": [
        {
          "index": 0,
          "message": {
            "role": "assistant",
            "content": "Hello! How can I assist you today?",
            "refusal": null,
            "annotations": []
          },
          "logprobs": null,
          "finish_reason": "stop"
        }
      ],
      "usage": {
        "prompt_tokens": 19,
        "completion_tokens": 10,
        "total_tokens": 29,
        "prompt_tokens_details": {
          "cached_tokens": 0,
          "audio_tokens": 0
        },
        "completion_tokens_details": {
          "reasoning_tokens": 0,
          "audio_tokens": 0,
          "accepted_prediction_tokens": 0,
          "rejected_prediction_tokens": 0
        }
      },
      "service_tier": "default"
    }
"#;

    /// `chat_response_tool_calls.json` from the shared fixtures (verbatim).
    const RESPONSE_TOOL_CALLS: &str = r#"
    {
      "id": "chatcmpl-abc123",
      "object": "chat.completion",
      "created": 1699896916,
      "model": "gpt-4o-mini",
      "choices": [
        {
          "index": 0,
          "message": {
            "role": "assistant",
            "content": null,
            "tool_calls": [
              {
                "id": "call_abc123",
                "type": "function",
                "function": {
                  "name": "get_current_weather",
                  "arguments": "{\n\"location\": \"Boston, MA\"\n}"
                }
              }
            ]
          },
          "logprobs": null,
          "finish_reason": "tool_calls"
        }
      ],
      "usage": {
        "prompt_tokens": 82,
        "completion_tokens": 17,
        "total_tokens": 99,
        "completion_tokens_details": {
          "reasoning_tokens": 0,
          "accepted_prediction_tokens": 0,
          "rejected_prediction_tokens": 0
        }
      }
    }
"#;

    fn fixture(text: &str) -> Value {
        serde_json::from_str(text).expect("fixture is JSON")
    }

    #[test]
    fn parses_the_official_plain_response() {
        let parsed = parse_completion(&fixture(RESPONSE_BASIC)).unwrap();
        assert_eq!(
            parsed.content.as_deref(),
            Some("Hello! How can I assist you today?")
        );
        assert!(parsed.tool_calls.is_empty());
        assert_eq!(parsed.model.as_deref(), Some("gpt-5.4"));
    }

    #[test]
    fn parses_the_official_tool_call_response() {
        let parsed = parse_completion(&fixture(RESPONSE_TOOL_CALLS)).unwrap();
        assert_eq!(parsed.content, None);
        assert_eq!(
            parsed.tool_calls,
            vec![ToolCall {
                id: "call_abc123".into(),
                name: "get_current_weather".into(),
                arguments: "{\n\"location\": \"Boston, MA\"\n}".into(),
            }]
        );
    }

    #[test]
    fn tolerates_object_arguments_and_missing_ids() {
        let body = json!({"choices":[{"message":{"content":null,"tool_calls":[
            {"function":{"name":"t","arguments":{"a":1}}}
        ]}}]});
        let parsed = parse_completion(&body).unwrap();
        assert_eq!(parsed.tool_calls[0].id, "call_0");
        assert_eq!(parsed.tool_calls[0].arguments, r#"{"a":1}"#);
    }

    #[test]
    fn rejects_a_body_without_choices() {
        let err = parse_completion(&json!({"error":{"message":"model overloaded"}})).unwrap_err();
        assert!(err.contains("model overloaded"), "{err}");
        assert!(parse_completion(&json!({"id":"x"})).is_err());
    }

    #[test]
    fn wire_messages_match_the_spec_shapes() {
        let mut user = ChatLine::new(Role::User, "hi");
        user.name = Some("bot:caid".into());
        let mut assistant = ChatLine::new(Role::Assistant, "");
        assistant.tool_calls = vec![ToolCall {
            id: "call_1".into(),
            name: "bots_list".into(),
            arguments: "{}".into(),
        }];
        let mut tool = ChatLine::new(Role::Tool, r#"{"ok":true}"#);
        tool.tool_call_id = Some("call_1".into());
        assert_eq!(
            wire_message(&user),
            json!({"role":"user","content":"hi","name":"bot_caid"})
        );
        assert_eq!(
            wire_message(&assistant),
            json!({"role":"assistant","content":null,"tool_calls":[
                {"id":"call_1","type":"function","function":{"name":"bots_list","arguments":"{}"}}
            ]})
        );
        assert_eq!(
            wire_message(&tool),
            json!({"role":"tool","content":"{\"ok\":true}","tool_call_id":"call_1"})
        );
        assert_eq!(
            wire_message(&ChatLine::new(Role::System, "rules")),
            json!({"role":"system","content":"rules"})
        );
    }

    #[test]
    fn tools_are_sent_only_when_there_are_some() {
        let lines = [ChatLine::new(Role::User, "x")];
        assert!(
            request_body("m", &lines, &[], Delivery::Whole, &ModelOptions::default())
                .get("tools")
                .is_none()
        );
        let tool = ToolSpec {
            name: "bots_list".into(),
            description: "roster".into(),
            parameters: json!({"type":"object","properties":{}}),
        };
        assert_eq!(
            request_body(
                "m",
                &lines,
                &[tool],
                Delivery::Whole,
                &ModelOptions::default()
            )["tools"],
            json!([{"type":"function","function":{
                "name":"bots_list","description":"roster","parameters":{"type":"object","properties":{}}
            }}])
        );
    }

    #[test]
    fn names_are_sanitized_for_openai() {
        assert_eq!(wire_name("Ada Lovelace").as_deref(), Some("Ada_Lovelace"));
        assert_eq!(wire_name("bot:caid").as_deref(), Some("bot_caid"));
        assert_eq!(wire_name("a--b__c").as_deref(), Some("a--b_c"));
        assert_eq!(wire_name("张三"), None);
        assert_eq!(wire_name("x".repeat(100).as_str()).unwrap().len(), 64);
    }
}
