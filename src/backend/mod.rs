//! Pipeline step 10, the turn: one run of a bot's backend, with tools, in a bounded loop.
//!
//! A [`Backend`] turns a [`TurnRequest`] into a [`BackendReply`]. It never decides silence by
//! itself (that is [`crate::outcome`]'s job) and never posts anything (that is delivery's).
//! Tool calls go through a [`ToolExecutor`] that the gateway supplies per turn, so the same
//! loop serves every tool set the later features add.

mod a2a;
mod agent_events;
mod chain_turn;
mod command;
mod echo;
mod http;
mod openai;
mod process_group;
mod schema;

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::trace::{Span, SpanKind, attr, in_span};

pub(crate) use a2a::texts as a2a_texts;
pub use a2a::{A2aBackend, a2a_request};
pub(crate) use chain_turn::{chain_header, chain_topic};
pub use command::CommandBackend;
pub use echo::EchoBackend;
pub use http::HttpBackend;
pub use openai::{ModelOptions, OpenAiBackend, OpenAiSettings};
pub use process_group::{KILL_AFTER, Reaper};
pub use schema::{TURN_SCHEMA_VERSION, session_id, turn_schema};

/// Who said a line of the conversation given to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The bot's instructions.
    System,
    /// A human, or another bot speaking to this one (its text says so).
    User,
    /// The bot itself.
    Assistant,
    /// A tool's result.
    Tool,
}

/// A tool call the model asked for. `arguments` is the JSON text the model produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    /// Correlates the call with its result.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as JSON text (as OpenAI sends them).
    pub arguments: String,
}

/// One line of the conversation handed to a backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ChatLine {
    /// Who said it.
    pub role: Role,
    /// What was said (empty for an assistant line that only calls tools).
    pub content: String,
    /// The speaker's name, for user lines (a human's display name or `bot:<id>`).
    pub name: Option<String>,
    /// Tool calls made by an assistant line.
    pub tool_calls: Vec<ToolCall>,
    /// For a tool line: which call it answers.
    pub tool_call_id: Option<String>,
    /// Images shown with a user line, for a model that reads them (`vision = true`). Never
    /// serialized: the `http` and `command` backends get files by reference
    /// ([`TurnRequest::files`]), not megabytes of base64 in every turn.
    #[serde(skip)]
    pub images: Vec<Image>,
}

impl ChatLine {
    /// A line with just a role and text.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            name: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
            images: Vec::new(),
        }
    }
}

/// An image given to a model with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// Its media type (`image/png`).
    pub media_type: String,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// A file posted with the message a turn answers: kept as an artifact, or not read, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PostedFile {
    /// Its file name.
    pub name: String,
    /// Its media type, when known.
    pub media_type: Option<String>,
    /// Its size in bytes, when known.
    pub bytes: Option<u64>,
    /// The artifact it is kept as (`artifact_get` reads it); `None` when it was not read.
    pub artifact: Option<String>,
    /// Why it was not read (over the size cap, a failed download).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_read: Option<String>,
}

/// A tool a model may call: name, description and JSON schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// Everything a backend needs for one turn. Serialized, it is the turn an agent gets (on
/// stdin for `command`, as the body for `http`), described by `baton schema turn`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(title = "baton turn", extend("$id" = "https://baton.dev/schema/turn-v1.json"))]
pub struct TurnRequest {
    /// The version of this shape: [`TURN_SCHEMA_VERSION`]. A change that could break an agent
    /// reading it raises the version.
    pub version: u32,
    /// The bot taking the turn.
    #[schemars(with = "String")]
    pub bot: crate::bot_id::BotId,
    /// The model name configured for the bot (may be empty for non-model backends).
    pub model: String,
    /// System prompt, then history-buffer context, then the session tail, then the message.
    pub messages: Vec<ChatLine>,
    /// Tools this bot may call on this turn (shared: the bot's set, made once). A model gets
    /// them as functions; an agent calls them over MCP with [`TurnRequest::access`].
    #[serde(skip)]
    pub tools: std::sync::Arc<[ToolSpec]>,
    /// The session this turn belongs to (`bot:<bot>:<platform>:<account>:<chat>...`).
    pub session: String,
    /// A stable id of the session, shaped as a UUID, for an agent that keeps its own memory
    /// per conversation (Claude Code's `--session-id`/`--resume`, Codex sessions).
    pub session_id: String,
    /// The chat of the session: where a reply goes.
    pub chat: TurnChat,
    /// What woke the bot.
    pub trigger: Trigger,
    /// baton's agent tools for this turn: the MCP endpoint and a bearer token that acts as
    /// this bot in this session, until the turn ends (also `$BATON_MCP_URL` and
    /// `$BATON_MCP_TOKEN` for a `command` agent). Absent when the gateway serves no HTTP.
    #[serde(rename = "tools", skip_serializing_if = "Option::is_none")]
    pub access: Option<AgentAccess>,
    /// The files posted with the message being answered (the `http` and `command` backends get
    /// them as this field; the last user line names them for every backend).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<PostedFile>,
}

/// The chat of a turn's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TurnChat {
    /// `slack`, `discord`, `feishu`, `telegram` or `local`.
    pub platform: String,
    /// The bot's account on it.
    pub account: String,
    /// The platform's chat id.
    pub id: String,
    /// The thread, where the platform has threads and the message was in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
}

/// What woke the bot for this turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Trigger {
    /// Who spoke: a person, another bot (its `sessions_send`, or its post in the chat), or
    /// baton itself (a schedule, a chain).
    pub origin: TriggerOrigin,
    /// The speaker as the transcript names them: a person's id, `bot:<id>`, or `baton`.
    pub from: String,
    /// The platform message id, for a message from a chat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

/// Who woke the bot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TriggerOrigin {
    /// A person in a chat.
    Human,
    /// Another bot.
    Bot,
    /// baton: a heartbeat, a cron entry, a chain's turn.
    Gateway,
}

/// How an agent reaches baton's tools during its turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct AgentAccess {
    /// baton's MCP endpoint (`http://127.0.0.1:8787/mcp`).
    pub mcp_url: String,
    /// The bearer token for it (`Authorization: Bearer <token>`), valid until the turn ends.
    pub token: String,
}

impl TurnRequest {
    /// The text of the last user line: the message that woke the bot.
    pub fn last_user_text(&self) -> &str {
        self.messages
            .iter()
            .rev()
            .find(|l| l.role == Role::User)
            .map_or("", |l| l.content.as_str())
    }
}

/// What the backend said. `text: None` means the backend explicitly chose silence
/// (`{"silent": true}` from an http backend); otherwise the silent-token rule applies to `text`.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendReply {
    /// The reply text, or `None` for an explicit silence.
    pub text: Option<String>,
    /// The model that answered, for the transcript and `sessions_send` results.
    pub model: String,
    /// Tokens the turn used, summed over its model calls, where the backend reports them.
    pub usage: Option<Usage>,
    /// Files to post with the reply (the `http`/`command` backends' `attachments`; a model
    /// attaches with the `reply_attach` tool instead).
    pub attachments: Vec<ReplyFile>,
}

/// A file a backend attaches to its reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyFile {
    /// An artifact baton holds, by id.
    Artifact(String),
    /// Content given inline, kept as an artifact of the run before it is attached.
    Inline {
        /// The file name.
        name: String,
        /// Its media type; guessed from the name when not given.
        media_type: Option<String>,
        /// The bytes (decoded from `base64`, or the `text`).
        content: Vec<u8>,
    },
}

/// Tokens a turn used, as OpenAI-compatible servers report them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read.
    pub prompt_tokens: u64,
    /// Tokens written.
    pub completion_tokens: u64,
}

impl Usage {
    /// `self` less `other`, never below zero: what is left to count of a turn's total.
    pub fn minus(self, other: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens.saturating_sub(other.prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_sub(other.completion_tokens),
        }
    }

    /// `self` plus `other`, for a turn of several model calls.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            completion_tokens: self.completion_tokens + other.completion_tokens,
        }
    }
}

/// Hears a reply's text while a streaming backend writes it, so a chat can show it before the
/// turn ends. Called from inside the backend: implementations only hand the text on.
pub trait TextSink: Send + Sync {
    /// More text of the current model call.
    fn text(&self, delta: &str);
    /// The text heard since the last call began was not the reply: the model went on to call
    /// tools, and the reply comes from a later call.
    fn retract(&self);
}

/// A sink for turns nobody watches: the backend answers whole.
pub struct NoSink;

impl TextSink for NoSink {
    fn text(&self, _delta: &str) {}
    fn retract(&self) {}
}

/// Runs the tools a backend asks for during a turn. Implemented by the gateway; the result is
/// given back to the model verbatim as JSON, including structured refusals.
#[async_trait]
pub trait ToolExecutor: Send + Sync {
    /// Run one tool call and return its JSON result (errors are results too, never panics).
    async fn call(&self, call: &ToolCall) -> serde_json::Value;

    /// A model call of the turn answered with tools to run, reporting `usage`: told before the
    /// tools run, so what the turn spent so far is charged before a tool starts work that is
    /// checked against the same budgets (a `sessions_send`). Nothing by default.
    async fn spent(&self, usage: Usage) {
        let _ = usage;
    }

    /// Asked before each further model call of the turn (once its tools ran): `Err` ends the
    /// turn with that error instead of making the call. Every call may go by default.
    async fn may_call(&self) -> Result<(), BackendError> {
        Ok(())
    }
}

/// A tool executor that has no tools: every call gets an error result.
pub struct NoTools;

#[async_trait]
impl ToolExecutor for NoTools {
    async fn call(&self, call: &ToolCall) -> serde_json::Value {
        serde_json::json!({"status": "error", "error": format!("unknown tool `{}`", call.name)})
    }
}

/// Why a turn produced no reply. The text is shown to operators, never to chat users verbatim.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BackendError {
    /// The backend answered with an error status after the retries ran out.
    #[error("backend returned HTTP {status} after {attempts} attempt(s): {message}")]
    Status {
        /// HTTP status of the last attempt.
        status: u16,
        /// How many attempts were made.
        attempts: u32,
        /// The backend's error message (never contains our API key).
        message: String,
    },
    /// The backend could not be reached or did not answer in time.
    #[error("backend unreachable: {0}; check its base_url/url and that it is running")]
    Unreachable(String),
    /// The backend answered something baton cannot read.
    #[error("backend answered an unreadable response: {0}")]
    BadResponse(String),
    /// A budget is used up: the turn's next model call was not made.
    #[error("budget `{0}` is used up; the model call was not made")]
    Budget(String),
    /// The model kept calling tools past the configured bound.
    #[error("the model called tools {0} rounds in a row without answering; stopped")]
    ToolLoop(u32),
    /// The `command` backend's program failed.
    #[error("command backend failed: {0}")]
    Command(String),
    /// The backend answered more than it may; the rest was not read.
    #[error(
        "the backend's answer ran past {0} bytes and was not read further; make the agent answer \
         shorter, or raise [limits] max_reply_bytes"
    )]
    TooLong(usize),
    /// The model server refused the request for a reason that asking again will not change
    /// (an unknown model, a bad key, a request it cannot take): the config needs fixing.
    #[error("the model server refused model `{model}` (HTTP {status}: {message}); {fix}")]
    Refused {
        /// The model asked for.
        model: String,
        /// The HTTP status.
        status: u16,
        /// The server's message (never contains our API key).
        message: String,
        /// What to change.
        fix: &'static str,
    },
}

impl BackendError {
    /// Whether the error is the config's to fix, not a passing failure: it is reported to the
    /// chat as such instead of the generic "try again" reply.
    pub fn is_permanent(&self) -> bool {
        matches!(self, BackendError::Refused { .. })
    }

    /// This error, for a request to `model`, as [`BackendError::Refused`] when the status says
    /// asking again will not help (a 4xx other than 408 and 429).
    pub(crate) fn refused_for(self, model: &str) -> BackendError {
        let BackendError::Status {
            status, message, ..
        } = &self
        else {
            return self;
        };
        let fix = match status {
            401 | 403 => {
                "check the bot's api_key_env (or [backends.openai] api_key_env): the key is missing, wrong or not allowed this model"
            }
            404 => "check the bot's `model` and `base_url`: the server does not know this model",
            400 | 413 | 422 => {
                "check the bot's model settings (max_tokens, temperature, top_p, reasoning_effort, extra_body) and that the model supports tools"
            }
            408 | 429 => return self,
            400..=499 => "check the bot's `model`, `base_url` and key",
            _ => return self,
        };
        BackendError::Refused {
            model: model.to_owned(),
            status: *status,
            message: message.clone(),
            fix,
        }
    }
}

/// Bytes a backend reads of one answer by default (for `openai`, of one model call), before
/// failing the turn ([`BackendError::TooLong`]); the gateway sets it from `[limits]`.
pub const DEFAULT_MAX_READ: usize = 64 * 1024 * 1024;

/// A bot's backend.
#[async_trait]
pub trait Backend: Send + Sync {
    /// Run one turn. Tool calls go through `tools`; the loop is bounded.
    async fn run(
        &self,
        request: &TurnRequest,
        tools: &dyn ToolExecutor,
    ) -> Result<BackendReply, BackendError>;

    /// [`Backend::run`], telling `sink` the reply's text as it is written. A backend that
    /// cannot stream answers whole and never calls `sink` (the default).
    async fn run_streaming(
        &self,
        request: &TurnRequest,
        tools: &dyn ToolExecutor,
        sink: &dyn TextSink,
    ) -> Result<BackendReply, BackendError> {
        let _ = sink;
        self.run(request, tools).await
    }
}

/// How many model rounds one turn may take (each round may call tools) before it is stopped.
pub const MAX_TOOL_ROUNDS: u32 = 8;

/// How long a model server may stay silent in the middle of a request (waiting for the
/// answer's first byte, or between two chunks of it) before the attempt counts as failed. An
/// idle limit, not a cap: a model that keeps streaming may take the whole turn.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(180);

// ---- Shared by the network backends (`openai`, `http`) ----------------------------------------

/// How long a TCP/TLS connect may take before the attempt counts as unreachable: a dead host
/// is reported quickly, while the turn's own limit is what bounds a slow agent.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest piece of a foreign body quoted in an error, so an HTML error page stays readable.
const QUOTE_LIMIT: usize = 300;

/// An HTTP client for a network backend: a short connect timeout, and `idle` as the longest
/// silence in a response (`None`: the turn's limit is the only one, for an agent that may think
/// for an hour before it answers).
fn http_client(idle: Option<Duration>) -> Result<reqwest::Client, BackendError> {
    let builder = reqwest::Client::builder().connect_timeout(CONNECT_TIMEOUT);
    let builder = match idle {
        Some(idle) => builder.read_timeout(idle),
        None => builder,
    };
    builder
        .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| BackendError::Unreachable(format!("could not set up the HTTP client: {e}")))
}

/// One call to an agent backend (`http`, `a2a`) for `request`, under a span of its own: the
/// request `call` makes carries this span's `traceparent`, so the agent's own spans join the
/// turn's trace.
async fn agent_call(
    request: &TurnRequest,
    call: impl Future<Output = Result<BackendReply, BackendError>>,
) -> Result<BackendReply, BackendError> {
    let span = Span::start("invoke_agent", SpanKind::Client, || {
        vec![
            attr("gen_ai.operation.name", "invoke_agent"),
            attr("gen_ai.request.model", request.model.clone()),
        ]
    });
    let reply = in_span!(span, call);
    if let Err(err) = &reply {
        span.failed(|| err.to_string());
    }
    reply
}

/// `url` without user info or query, fit for an error message (either may hold a credential).
fn redacted_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.to_string()
        }
        Err(_) => "<invalid url>".to_owned(),
    }
}

/// A transport failure (connect, timeout, reading the body) as one line, with the cause chain,
/// because reqwest's own text ("error sending request") does not say what went wrong.
fn describe_transport_error(err: &reqwest::Error, url: &str, idle: Option<Duration>) -> String {
    if err.is_timeout() {
        return match idle {
            Some(idle) => format!(
                "{} was silent for {}s (connect limit {}s)",
                redacted_url(url),
                idle.as_secs_f32(),
                CONNECT_TIMEOUT.as_secs()
            ),
            None => format!(
                "could not connect to {} within {}s",
                redacted_url(url),
                CONNECT_TIMEOUT.as_secs()
            ),
        };
    }
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    format!("{} ({text})", redacted_url(url))
}

/// The error message in a non-2xx body: OpenAI's `error.message`, a plain `error` or `message`
/// string, else the start of the body, else the status's reason phrase.
fn error_message(status: reqwest::StatusCode, body: &str) -> String {
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(body) {
        let found = ["/error/message", "/error", "/message"]
            .iter()
            .find_map(|pointer| value.pointer(pointer).and_then(serde_json::Value::as_str));
        if let Some(message) = found {
            return message.to_owned();
        }
    }
    let body = body.trim();
    if body.is_empty() {
        status.canonical_reason().unwrap_or("no message").to_owned()
    } else {
        quote(body)
    }
}

/// At most [`QUOTE_LIMIT`] characters of `text`, marked when cut.
fn quote(text: &str) -> String {
    match text.char_indices().nth(QUOTE_LIMIT) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_message_prefers_openai_shape() {
        let body = r#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":null}}"#;
        assert_eq!(
            error_message(reqwest::StatusCode::TOO_MANY_REQUESTS, body),
            "Rate limit reached"
        );
        assert_eq!(
            error_message(reqwest::StatusCode::BAD_REQUEST, r#"{"error":"bad input"}"#),
            "bad input"
        );
        assert_eq!(
            error_message(reqwest::StatusCode::BAD_GATEWAY, ""),
            "Bad Gateway"
        );
        let html = "<html>".repeat(100);
        let quoted = error_message(reqwest::StatusCode::BAD_GATEWAY, &html);
        assert_eq!(quoted.chars().count(), QUOTE_LIMIT + 1);
        assert!(quoted.ends_with('…'));
    }

    #[test]
    fn redacted_url_drops_credentials_and_query() {
        assert_eq!(
            redacted_url("http://user:hunter2@example.com:8080/v1/chat?key=abc"),
            "http://example.com:8080/v1/chat"
        );
        assert_eq!(redacted_url("not a url"), "<invalid url>");
    }

    #[test]
    fn last_user_text_finds_the_waking_message() {
        let request = TurnRequest {
            bot: "b".parse().unwrap(),
            model: String::new(),
            messages: vec![
                ChatLine::new(Role::System, "be nice"),
                ChatLine::new(Role::User, "first"),
                ChatLine::new(Role::Assistant, "ok"),
                ChatLine::new(Role::User, "second"),
            ],
            tools: Vec::new().into(),
            session: "s".into(),
            session_id: session_id("s", 0),
            version: TURN_SCHEMA_VERSION,
            chat: TurnChat {
                platform: "local".into(),
                account: "b".into(),
                id: "c".into(),
                thread: None,
            },
            trigger: Trigger {
                origin: TriggerOrigin::Human,
                from: "u".into(),
                message_id: None,
            },
            access: None,
            files: Vec::new(),
        };
        assert_eq!(request.last_user_text(), "second");
    }
}
