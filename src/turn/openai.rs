//! The `openai` backend: any OpenAI-compatible `POST {base_url}/chat/completions` server
//! (OpenAI, Ollama, vLLM, llama.cpp), with the bounded tool loop and retries.
//!
//! Written by hand over reqwest rather than with an SDK: baton needs one endpoint, must read
//! servers that bend the schema (tool arguments sent as objects, missing call ids), and must
//! decide itself what is retried and what ends up in error text — never the API key.

use std::time::Duration;

use async_trait::async_trait;
use baton_contract::Secret;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

use super::{
    Backend, BackendError, BackendReply, ChatLine, MAX_TOOL_ROUNDS, REQUEST_TIMEOUT, Role,
    ToolCall, ToolExecutor, ToolSpec, TurnRequest, describe_transport_error, error_message,
    http_client, quote,
};

/// How to reach one OpenAI-compatible server. Built once per bot at startup from the config
/// (bot keys over `[backends.openai]` over `$OPENAI_BASE_URL`), so a turn does no lookups.
#[derive(Debug, Clone)]
pub struct OpenAiSettings {
    /// Base URL up to and including the API version, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer`; local servers often need none. Never printed.
    pub api_key: Option<Secret>,
    /// Model used when the turn does not name one.
    pub model: String,
    /// How long one HTTP attempt may take, body included.
    pub timeout: Duration,
    /// Attempts per model call, the first one included (429, 5xx and transport failures only).
    pub max_attempts: u32,
    /// First backoff delay; doubled per attempt, unless the server says `Retry-After`.
    pub retry_base_delay: Duration,
}

impl OpenAiSettings {
    /// Where requests go when neither the config nor `$OPENAI_BASE_URL` says otherwise.
    pub const DEFAULT_BASE_URL: &'static str = "https://api.openai.com/v1";
    /// Attempts per model call by default: enough to ride out a short rate-limit window.
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 4;
    /// First backoff delay by default (then 1 s, 2 s...), as the official SDKs do.
    pub const DEFAULT_RETRY_BASE_DELAY: Duration = Duration::from_millis(500);
    /// Longest `Retry-After` baton honours, so a misbehaving server cannot park a lane for hours.
    pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
    /// Longest computed backoff between two attempts.
    const MAX_BACKOFF: Duration = Duration::from_secs(20);

    /// Settings with the defaults for everything but where to go and which model to ask.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            timeout: REQUEST_TIMEOUT,
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            retry_base_delay: Self::DEFAULT_RETRY_BASE_DELAY,
        }
    }

    /// Settings whose base URL is `configured` if set, else `$OPENAI_BASE_URL`, else the default
    /// (SPEC section 3). The environment is read here, once; the rule is [`Self::resolve_base_url`].
    pub fn from_config(configured: Option<&str>, model: impl Into<String>) -> Self {
        let env = std::env::var("OPENAI_BASE_URL").ok();
        Self::new(Self::resolve_base_url(configured, env.as_deref()), model)
    }

    /// The base URL rule as a pure function: the first non-blank of `configured`, `env` and
    /// [`Self::DEFAULT_BASE_URL`], without trailing slashes (so `…/v1/` and `…/v1` both work).
    pub fn resolve_base_url(configured: Option<&str>, env: Option<&str>) -> String {
        [configured, env]
            .into_iter()
            .flatten()
            .map(str::trim)
            .find(|url| !url.is_empty())
            .unwrap_or(Self::DEFAULT_BASE_URL)
            .trim_end_matches('/')
            .to_owned()
    }

    /// The API key to send, builder style.
    pub fn with_api_key(mut self, api_key: Option<Secret>) -> Self {
        self.api_key = api_key;
        self
    }

    /// `POST` target for chat completions.
    fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }

    /// Delay before attempt `attempt + 1`: base × 2^(attempt-1) plus up to 25% jitter, so bots
    /// that were limited together do not come back together.
    fn backoff(&self, attempt: u32) -> Duration {
        let doubled = self
            .retry_base_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
            .min(Self::MAX_BACKOFF);
        doubled.mul_f64(1.0 + rand::random::<f64>() * 0.25)
    }
}

/// The `openai` backend: sends the turn, runs the tools the model asks for, loops until the
/// model answers or [`MAX_TOOL_ROUNDS`] is reached.
pub struct OpenAiBackend {
    settings: OpenAiSettings,
    client: reqwest::Client,
}

impl OpenAiBackend {
    /// A backend for these settings. Fails only if the TLS stack cannot be set up.
    pub fn new(settings: OpenAiSettings) -> Result<Self, BackendError> {
        Ok(Self {
            settings,
            client: http_client()?,
        })
    }

    /// The settings this backend runs with.
    pub fn settings(&self) -> &OpenAiSettings {
        &self.settings
    }

    /// One model call with retries: the parsed JSON body of the first 2xx answer.
    async fn complete(&self, body: &Value) -> Result<Value, BackendError> {
        let url = self.settings.endpoint();
        let max_attempts = self.settings.max_attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let failure = match self.attempt(&url, body).await {
                Ok(value) => return Ok(value),
                Err(Attempt::Final(error)) => return Err(error.with_attempts(attempt)),
                Err(Attempt::Retryable(failure)) => failure,
            };
            if attempt >= max_attempts {
                return Err(failure.into_error(attempt));
            }
            let delay = failure
                .retry_after()
                .unwrap_or_else(|| self.settings.backoff(attempt));
            tracing::warn!(
                attempt,
                max_attempts,
                delay_ms = delay.as_millis() as u64,
                reason = %failure.describe(),
                "model call failed; retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// One HTTP attempt, classified as success, retryable or final.
    async fn attempt(&self, url: &str, body: &Value) -> Result<Value, Attempt> {
        let mut request = self
            .client
            .post(url)
            .timeout(self.settings.timeout)
            .json(body);
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key.expose());
        }
        let transport =
            |e: reqwest::Error| describe_transport_error(&e, url, self.settings.timeout);
        let response = request
            .send()
            .await
            .map_err(|e| Attempt::Retryable(Failure::Unreachable(self.redact(transport(e)))))?;
        let status = response.status();
        let retry_after = retry_after(response.headers());
        let text = response
            .text()
            .await
            .map_err(|e| Attempt::Retryable(Failure::Unreachable(self.redact(transport(e)))))?;
        if status.is_success() {
            return serde_json::from_str(&text).map_err(|e| {
                Attempt::Final(FinalError::Bad(
                    self.redact(format!("not JSON ({e}): {}", quote(&text))),
                ))
            });
        }
        let message = self.redact(error_message(status, &text));
        let failure = Failure::Status {
            status: status.as_u16(),
            message,
            retry_after,
        };
        if is_retryable(status) {
            Err(Attempt::Retryable(failure))
        } else {
            Err(Attempt::Final(FinalError::Failure(failure)))
        }
    }

    /// `text` with the API key blanked out: some servers echo the key they were given.
    fn redact(&self, text: String) -> String {
        match &self.settings.api_key {
            Some(key) if !key.expose().is_empty() && text.contains(key.expose()) => {
                text.replace(key.expose(), "[redacted]")
            }
            _ => text,
        }
    }
}

#[async_trait]
impl Backend for OpenAiBackend {
    async fn run(
        &self,
        request: &TurnRequest,
        tools: &dyn ToolExecutor,
    ) -> Result<BackendReply, BackendError> {
        let model = if request.model.is_empty() {
            self.settings.model.as_str()
        } else {
            request.model.as_str()
        };
        let mut lines = request.messages.clone();
        for round in 1..=MAX_TOOL_ROUNDS {
            let body = request_body(model, &lines, &request.tools);
            let answer = parse_completion(&self.complete(&body).await?)
                .map_err(|e| BackendError::BadResponse(self.redact(e)))?;
            if answer.tool_calls.is_empty() {
                return Ok(BackendReply {
                    text: Some(answer.content.unwrap_or_default()),
                    model: answer.model.unwrap_or_else(|| model.to_owned()),
                });
            }
            if round == MAX_TOOL_ROUNDS {
                // Calls whose results no model would read are not run: they may have effects.
                break;
            }
            tracing::debug!(round, calls = answer.tool_calls.len(), "model called tools");
            let mut assistant = ChatLine::new(Role::Assistant, answer.content.unwrap_or_default());
            assistant.tool_calls = answer.tool_calls;
            let calls = assistant.tool_calls.clone();
            lines.push(assistant);
            for call in &calls {
                let result = tools.call(call).await;
                let mut line = ChatLine::new(Role::Tool, result.to_string());
                line.tool_call_id = Some(call.id.clone());
                lines.push(line);
            }
        }
        Err(BackendError::ToolLoop(MAX_TOOL_ROUNDS))
    }
}

/// Why one attempt did not produce a usable answer.
enum Attempt {
    /// Worth another try (429, 5xx, transport).
    Retryable(Failure),
    /// Not worth another try (4xx, unreadable 2xx body).
    Final(FinalError),
}

/// A failure that ends the call at once.
enum FinalError {
    /// An error status that retrying will not fix.
    Failure(Failure),
    /// A 2xx answer that is not JSON.
    Bad(String),
}

impl FinalError {
    fn with_attempts(self, attempts: u32) -> BackendError {
        match self {
            Self::Failure(failure) => failure.into_error(attempts),
            Self::Bad(text) => BackendError::BadResponse(text),
        }
    }
}

/// A failed attempt, kept until we know whether it was the last one.
enum Failure {
    /// The server answered with an error status.
    Status {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// No answer: connect failure, timeout, broken body.
    Unreachable(String),
}

impl Failure {
    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            Self::Unreachable(_) => None,
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Status {
                status, message, ..
            } => format!("HTTP {status}: {message}"),
            Self::Unreachable(text) => text.clone(),
        }
    }

    fn into_error(self, attempts: u32) -> BackendError {
        match self {
            Self::Status {
                status, message, ..
            } => BackendError::Status {
                status,
                attempts,
                message,
            },
            Self::Unreachable(text) => {
                BackendError::Unreachable(format!("{text} (after {attempts} attempt(s))"))
            }
        }
    }
}

/// Rate limits and server errors pass; 408 too, as the official SDKs retry it.
fn is_retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
        || status.is_server_error()
}

/// The server's requested wait: `retry-after-ms` (OpenAI) or `Retry-After` in seconds, capped at
/// [`OpenAiSettings::MAX_RETRY_AFTER`]. An HTTP-date form is ignored (backoff applies instead).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    let wait = number("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| number("retry-after").map(Duration::from_secs_f64))?;
    Some(wait.min(OpenAiSettings::MAX_RETRY_AFTER))
}

/// The JSON body of one `/chat/completions` request.
fn request_body(model: &str, lines: &[ChatLine], tools: &[ToolSpec]) -> Value {
    let mut body = json!({
        "model": model,
        "messages": lines.iter().map(wire_message).collect::<Vec<_>>(),
    });
    if !tools.is_empty() {
        body["tools"] = tools.iter().map(wire_tool).collect();
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
struct Completion {
    content: Option<String>,
    tool_calls: Vec<ToolCall>,
    model: Option<String>,
}

/// Reads `choices[0].message` of a completion. Lenient where servers differ: arguments may be an
/// object instead of JSON text, a call may lack an id (one is made up so results still pair up).
fn parse_completion(body: &Value) -> Result<Completion, String> {
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn base_url_resolution_order() {
        let resolve = OpenAiSettings::resolve_base_url;
        assert_eq!(resolve(None, None), "https://api.openai.com/v1");
        assert_eq!(
            resolve(None, Some("http://localhost:11434/v1/")),
            "http://localhost:11434/v1"
        );
        assert_eq!(
            resolve(
                Some("http://vllm:8000/v1//"),
                Some("http://localhost:11434/v1")
            ),
            "http://vllm:8000/v1"
        );
        assert_eq!(resolve(Some("  "), Some("")), "https://api.openai.com/v1");
        let settings = OpenAiSettings::new("http://x/v1/", "m");
        assert_eq!(settings.endpoint(), "http://x/v1/chat/completions");
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
        assert!(request_body("m", &lines, &[]).get("tools").is_none());
        let tool = ToolSpec {
            name: "bots_list".into(),
            description: "roster".into(),
            parameters: json!({"type":"object","properties":{}}),
        };
        assert_eq!(
            request_body("m", &lines, &[tool])["tools"],
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

    #[test]
    fn retry_after_is_read_and_capped() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after", "3600".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(OpenAiSettings::MAX_RETRY_AFTER));
        headers.insert("retry-after-ms", "120".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(120)));
        let mut date = HeaderMap::new();
        date.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&date), None);
    }

    #[test]
    fn backoff_doubles_within_bounds() {
        let mut settings = OpenAiSettings::new("http://x", "m");
        settings.retry_base_delay = Duration::from_millis(100);
        for (attempt, base) in [(1, 100), (2, 200), (3, 400)] {
            let delay = settings.backoff(attempt).as_millis();
            assert!(
                (base..=base * 5 / 4).contains(&delay),
                "attempt {attempt}: {delay}"
            );
        }
        assert!(settings.backoff(40) <= OpenAiSettings::MAX_BACKOFF.mul_f64(1.25));
    }

    #[test]
    fn retryable_statuses() {
        assert!(is_retryable(StatusCode::TOO_MANY_REQUESTS));
        assert!(is_retryable(StatusCode::BAD_GATEWAY));
        assert!(!is_retryable(StatusCode::UNAUTHORIZED));
        assert!(!is_retryable(StatusCode::NOT_FOUND));
    }
}
