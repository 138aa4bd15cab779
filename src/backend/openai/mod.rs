//! The `openai` backend: any OpenAI-compatible `POST {base_url}/chat/completions` server
//! (OpenAI, Ollama, vLLM, llama.cpp), with the bounded tool loop and retries.
//!
//! Written by hand over reqwest rather than with an SDK: baton needs one endpoint, must read
//! servers that bend the schema (tool arguments sent as objects, missing call ids), and must
//! decide itself what is retried and what ends up in error text — never the API key.

use std::time::Duration;

use async_trait::async_trait;
use baton_contract::Secret;
use serde_json::Value;

use super::{
    Backend, BackendError, BackendReply, ChatLine, DEFAULT_MAX_READ, IDLE_TIMEOUT, MAX_TOOL_ROUNDS,
    NoSink, Role, TextSink, ToolExecutor, TurnRequest, Usage, describe_transport_error,
    error_message, http_client, quote,
};
use crate::trace::{Span, SpanKind, attr};

mod retry;
mod stream;
mod wire;

use retry::{Attempt, Failure, FinalError, is_retryable, retry_after};
use stream::Assembler;
pub use wire::ModelOptions;
use wire::{Completion, Delivery, parse_completion, request_body};

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
    /// How long the server may stay silent during an attempt (before the first byte, or
    /// between chunks) before the attempt fails; not a cap on the whole answer.
    pub idle_timeout: Duration,
    /// Attempts per model call, the first one included (429, 5xx and transport failures only).
    pub max_attempts: u32,
    /// First backoff delay; doubled per attempt, unless the server says `Retry-After`.
    pub retry_base_delay: Duration,
    /// The bot's model settings (temperature and the like), sent with every request.
    pub options: ModelOptions,
    /// The most bytes read of one answer (a body, or a stream's text, tool calls and pending
    /// event); past it the turn fails with [`BackendError::TooLong`] and the rest is not read.
    pub max_read: usize,
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
            idle_timeout: IDLE_TIMEOUT,
            max_attempts: Self::DEFAULT_MAX_ATTEMPTS,
            retry_base_delay: Self::DEFAULT_RETRY_BASE_DELAY,
            options: ModelOptions::default(),
            max_read: DEFAULT_MAX_READ,
        }
    }

    /// Settings whose base URL is `configured` if set, else `$OPENAI_BASE_URL`, else the default
    ///. The environment is read here, once; the rule is [`Self::resolve_base_url`].
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

/// Why a whole body could not be read.
enum BodyError {
    /// The connection failed while reading.
    Transport(reqwest::Error),
    /// The body ran past this many bytes.
    TooLong(usize),
}

impl BodyError {
    /// As an attempt's failure: too long is final, a transport error is retried as `failure`.
    fn or_else(self, failure: impl FnOnce(reqwest::Error) -> Failure) -> Attempt {
        match self {
            Self::TooLong(max) => Attempt::Final(FinalError::TooLong(max)),
            Self::Transport(e) => Attempt::Retryable(failure(e)),
        }
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
            client: http_client(Some(settings.idle_timeout))?,
            settings,
        })
    }

    /// The settings this backend runs with.
    pub fn settings(&self) -> &OpenAiSettings {
        &self.settings
    }

    /// One model call with retries: the completion of the first 2xx answer. With `Streamed`,
    /// text deltas go to `sink` as they arrive. Only a call that has not begun to answer is
    /// retried: once a stream has started, its text may already be shown.
    async fn complete(
        &self,
        body: &Value,
        delivery: Delivery,
        sink: &dyn TextSink,
    ) -> Result<Completion, BackendError> {
        let url = self.settings.endpoint();
        let max_attempts = self.settings.max_attempts.max(1);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let failure = match self.attempt(&url, body, delivery, sink).await {
                Ok(completion) => return Ok(completion),
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

    /// One HTTP attempt: the completion, or a failure classified as retryable or final.
    async fn attempt(
        &self,
        url: &str,
        body: &Value,
        delivery: Delivery,
        sink: &dyn TextSink,
    ) -> Result<Completion, Attempt> {
        let mut request = crate::trace::traced(self.client.post(url).json(body));
        if let Some(key) = &self.settings.api_key {
            request = request.bearer_auth(key.expose());
        }
        let transport =
            |e: reqwest::Error| describe_transport_error(&e, url, Some(self.settings.idle_timeout));
        let response = request
            .send()
            .await
            .map_err(|e| Attempt::Retryable(Failure::Unreachable(self.redact(transport(e)))))?;
        let status = response.status();
        if status.is_success() {
            return self.read(response, url, delivery, sink).await;
        }
        let retry_after = retry_after(response.headers());
        let text = self
            .body(response)
            .await
            .map_err(|e| e.or_else(|e| Failure::Unreachable(self.redact(transport(e)))))?;
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

    /// The body of a 2xx answer: one JSON completion, or a stream of chunks. A whole body cut
    /// off is worth another try; a stream cut off is not, as its text may already be shown.
    async fn read(
        &self,
        mut response: reqwest::Response,
        url: &str,
        delivery: Delivery,
        sink: &dyn TextSink,
    ) -> Result<Completion, Attempt> {
        let transport = |e: reqwest::Error| {
            self.redact(describe_transport_error(
                &e,
                url,
                Some(self.settings.idle_timeout),
            ))
        };
        let bad = |e: String| Attempt::Final(FinalError::Bad(self.redact(e)));
        // A server may answer a streamed request whole (some proxies do): read what it sent.
        let is_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if delivery == Delivery::Streamed && is_stream {
            let mut assembler = Assembler::default();
            loop {
                match response.chunk().await {
                    Ok(Some(bytes)) => assembler.feed(&bytes, sink).map_err(bad)?,
                    Ok(None) => break,
                    Err(e) => {
                        return Err(bad(format!("the stream was cut off: {}", transport(e))));
                    }
                }
                // Counted in what is kept, not in bytes read: a stream's envelope per token
                // can outweigh the token many times over.
                if assembler.held() > self.settings.max_read {
                    return Err(Attempt::Final(FinalError::TooLong(self.settings.max_read)));
                }
            }
            return assembler.finish().map_err(bad);
        }
        let text = self
            .body(response)
            .await
            .map_err(|e| e.or_else(|e| Failure::Unreachable(transport(e))))?;
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| bad(format!("not JSON ({e}): {}", quote(&text))))?;
        let completion = parse_completion(&value).map_err(bad)?;
        if let Some(content) = completion.content.as_deref().filter(|c| !c.is_empty()) {
            sink.text(content);
        }
        Ok(completion)
    }

    /// A whole body, read up to [`OpenAiSettings::max_read`] bytes: past that the call fails
    /// ([`FinalError::TooLong`]) and the rest is not read; a transport error is left to the
    /// caller to describe.
    async fn body(&self, mut response: reqwest::Response) -> Result<String, BodyError> {
        let max = self.settings.max_read;
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(BodyError::Transport)? {
            if body.len() + chunk.len() > max {
                return Err(BodyError::TooLong(max));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// The tool loop, shared by the whole and the streamed turn.
    async fn rounds(
        &self,
        request: &TurnRequest,
        tools: &dyn ToolExecutor,
        delivery: Delivery,
        sink: &dyn TextSink,
    ) -> Result<BackendReply, BackendError> {
        let model = if request.model.is_empty() {
            self.settings.model.as_str()
        } else {
            request.model.as_str()
        };
        let mut lines = request.messages.clone();
        let mut usage: Option<Usage> = None;
        for round in 1..=MAX_TOOL_ROUNDS {
            if round > 1 {
                // The turn's first call was checked before the backend ran.
                tools.may_call().await?;
            }
            let body = request_body(
                model,
                &lines,
                &request.tools,
                delivery,
                &self.settings.options,
            );
            let span = model_call_span(model);
            let answer = span
                .run(self.complete(&body, delivery, sink))
                .await
                .map_err(|err| {
                    span.failed(|| err.to_string());
                    err.refused_for(model)
                })?;
            span.set(|| answered(&answer));
            drop(span);
            if let Some(used) = answer.usage {
                usage = Some(usage.unwrap_or_default().plus(used));
            }
            if answer.tool_calls.is_empty() {
                return Ok(BackendReply {
                    text: Some(answer.content.unwrap_or_default()),
                    model: answer.model.unwrap_or_else(|| model.to_owned()),
                    usage,
                    attachments: Vec::new(),
                });
            }
            // Text said before calling tools is not the reply.
            sink.retract();
            if let Some(used) = answer.usage {
                tools.spent(used).await;
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
        self.rounds(request, tools, Delivery::Whole, &NoSink).await
    }

    async fn run_streaming(
        &self,
        request: &TurnRequest,
        tools: &dyn ToolExecutor,
        sink: &dyn TextSink,
    ) -> Result<BackendReply, BackendError> {
        self.rounds(request, tools, Delivery::Streamed, sink).await
    }
}

/// The span of one model call, with the GenAI semantic conventions' request attributes.
fn model_call_span(model: &str) -> Span {
    Span::start(format!("chat {model}"), SpanKind::Client, || {
        vec![
            attr("gen_ai.operation.name", "chat"),
            attr("gen_ai.system", "openai"),
            attr("gen_ai.provider.name", "openai"),
            attr("gen_ai.request.model", model.to_owned()),
        ]
    })
}

/// What a model call's span records of its answer: the model that answered and the tokens.
fn answered(answer: &Completion) -> Vec<opentelemetry::KeyValue> {
    let mut attributes = Vec::with_capacity(3);
    if let Some(model) = &answer.model {
        attributes.push(attr("gen_ai.response.model", model.clone()));
    }
    if let Some(usage) = answer.usage {
        let tokens = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        attributes.push(attr(
            "gen_ai.usage.input_tokens",
            tokens(usage.prompt_tokens),
        ));
        attributes.push(attr(
            "gen_ai.usage.output_tokens",
            tokens(usage.completion_tokens),
        ));
    }
    attributes
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
