//! `/mcp`: the agent tools as an MCP server (streamable HTTP), so an agent
//! runtime outside baton (Claude Code, an IDE, another gateway) can find bots, read sessions and
//! hand work over exactly as a bot's own turn can.
//!
//! # Who is calling
//!
//! A tool call always speaks as one configured bot: the guards (self-send, allow lists, rate
//! limits, depth) and the bot's `tools` list are keyed by it. The client names that bot with
//! the HTTP header `X-Baton-Bot: <bot id>`, sent on every request. Clients that cannot set
//! headers may instead put a `bot` argument in each `tools/call`; it is taken out of the
//! arguments before the tool sees them. The header wins when both are present, and then a
//! `bot` argument reaches the tool untouched (`sessions_list` has a `bot` filter of its own).
//!
//! `tools/list` with the header lists that bot's tools. Without it, the list is every tool any
//! bot may use, each with a required `bot` parameter naming the bots allowed to call it. That
//! choice, rather than an error, is what keeps the `bot`-argument route usable: MCP clients learn
//! tool names only from `tools/list`, and one that cannot send headers would otherwise see a
//! broken server. A call naming nobody gets a tool error saying to set the header. An unknown
//! bot id is an error naming the known bots.
//!
//! # An agent's turn
//!
//! An agent bot (`command`, `http`) gets a bearer token with each turn (SPEC 6.1). A request
//! with it ([`super::auth::AgentTurn`]) acts as that turn's caller: that bot, in that session
//! and run, at that depth, whatever header or `bot` argument it sends, so every guard applies
//! as to the turn's own tool calls. The token dies with the turn.
//!
//! # Where the calls land
//!
//! Calls run as [`Caller::external`] on the session
//! `bot:<bot>:local:<its local account>:mcp:client` ([`SessionKey::mcp`]):
//! each call and its result are recorded there (so `baton sessions` lists it), so is a late
//! `sessions_send` reply, and `escalate_to_user` has no human to ask.
//!
//! # Transport choices
//!
//! rmcp's session mode (an `Mcp-Session-Id` per client, SSE responses) is kept because it is
//! what MCP clients expect from a streamable HTTP server. Its cancellation token is the
//! gateway's stop token, so open SSE streams end when the gateway stops: graceful shutdown would
//! otherwise wait on them, and each connection's task outlives the aborted server task.
//! rmcp's own `Host` check is off: the gate in front of every route ([`super::auth`]) checks
//! `Host` against DNS rebinding when no token is set, with the same rules as for `/v1` and
//! `/api`. Sessions are capped and expire ([`super::mcp_admission`]).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::request::Parts;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use baton_contract::Platform;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use super::auth::AgentTurn;
use super::mcp_admission::{self, Admission};
use crate::backend::{ToolCall, ToolExecutor, ToolSpec};
use crate::bot_id::BotId;
use crate::config::GatewayConfig;
use crate::engine::RecordingTools;
use crate::engine::{Caller, Engine, journal};
use crate::relay::Relay;
use crate::session::SessionKey;
use crate::tools::AgentTools;

/// The header naming the bot an MCP client speaks as.
const BOT_HEADER: &str = "x-baton-bot";

/// The MCP session table: sessions unused for `gateway.mcp_session_idle_seconds` end. Made
/// with the [`super::AppState`], so `/metrics` can count it.
pub(super) fn session_table(gateway: &GatewayConfig) -> Arc<LocalSessionManager> {
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive =
        Some(Duration::from_secs(gateway.mcp_session_idle_seconds));
    Arc::new(sessions)
}

/// The service mounted at `/mcp`, tools sending through `relay`, its sessions kept in
/// `sessions`, behind its admission checks ([`super::mcp_admission`]); it ends its streams when
/// `stop` fires.
pub(super) fn service(
    relay: Relay,
    sessions: Arc<LocalSessionManager>,
    stop: CancellationToken,
) -> Router {
    let gateway = &relay.engine().config().gateway;
    // The gate in front of every route checks `Host` (and `Origin`) already, for every client
    // and with the same rules; rmcp's own list would refuse loopback names the gate accepts.
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(stop)
        .disable_allowed_hosts()
        .with_max_request_body_bytes(mcp_admission::MAX_REQUEST_BYTES);
    let admission = Arc::new(Admission::new(
        Arc::clone(&sessions),
        gateway.mcp_max_sessions,
        gateway.mcp_max_init_bytes,
    ));
    let mcp = StreamableHttpService::new(
        move || {
            Ok(BatonMcp {
                engine: relay.engine().clone(),
                relay: relay.clone(),
            })
        },
        sessions,
        config,
    );
    Router::new()
        .fallback_service(mcp)
        .layer(axum::middleware::from_fn_with_state(
            admission,
            mcp_admission::admit,
        ))
        .layer(axum::middleware::from_fn(session_ended))
}

/// A client ending its session (`DELETE /mcp` with its `Mcp-Session-Id`) is told `204 No
/// Content`. rmcp answers `202 Accepted`, which the official Python SDK takes for a failure (it
/// accepts 200 and 204, and 405 for a server that keeps sessions) and logs as one on every
/// clean exit; the TypeScript SDK takes any 2xx. The session is gone either way.
async fn session_ended(request: Request, next: Next) -> Response {
    let deleting = request.method() == Method::DELETE;
    let mut response = next.run(request).await;
    if deleting && response.status() == StatusCode::ACCEPTED {
        response = StatusCode::NO_CONTENT.into_response();
    }
    response
}

/// The MCP handler: one per MCP session, all over the gateway's shared state.
#[derive(Clone)]
pub(super) struct BatonMcp {
    engine: Engine,
    /// What the tools send to other bots through.
    relay: Relay,
}

/// Why a request names no usable bot. Each says what the client should change.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
enum SpeakerError {
    /// Neither the header nor a `bot` argument.
    #[error(
        "no bot named: send the header `X-Baton-Bot: <bot id>` (or a `bot` argument in the \
         tool call) to say which bot you act as; known bots: {known}"
    )]
    NoBot {
        /// The configured bot ids, comma-separated.
        known: String,
    },
    /// A bot id baton does not know.
    #[error("unknown bot `{bot}`; known bots: {known}")]
    Unknown {
        /// The id given.
        bot: String,
        /// The configured bot ids, comma-separated.
        known: String,
    },
    /// The header is not text.
    #[error("the X-Baton-Bot header is not valid text; send a bot id such as `{example}`")]
    BadHeader {
        /// A configured bot id.
        example: String,
    },
    /// A `bot` argument that is not a string.
    #[error("the `bot` argument must be a bot id string; known bots: {known}")]
    BadArgument {
        /// The configured bot ids, comma-separated.
        known: String,
    },
}

impl BatonMcp {
    fn known(&self) -> String {
        let ids: Vec<&str> = self
            .engine
            .roster()
            .bots()
            .iter()
            .map(|b| b.id().as_str())
            .collect();
        ids.join(", ")
    }

    /// The bot the `X-Baton-Bot` header names, checked against the roster.
    fn header_bot(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<BotId>, SpeakerError> {
        let Some(value) = context
            .extensions
            .get::<Parts>()
            .and_then(|parts| parts.headers.get(BOT_HEADER))
        else {
            return Ok(None);
        };
        let bot = value
            .to_str()
            .map_err(|_| SpeakerError::BadHeader {
                example: self
                    .engine
                    .roster()
                    .bots()
                    .first()
                    .map(|b| b.id().to_string())
                    .unwrap_or_else(|| "snark".into()),
            })?
            .trim();
        self.checked(bot).map(Some)
    }

    /// The bot `name` names, if the roster has it.
    fn checked(&self, name: &str) -> Result<BotId, SpeakerError> {
        let bot = name.parse().ok();
        match bot.as_ref().and_then(|bot| self.engine.roster().bot(bot)) {
            Some(bot) => Ok(bot.id().clone()),
            None => Err(SpeakerError::Unknown {
                bot: name.to_owned(),
                known: self.known(),
            }),
        }
    }

    /// The calling bot: the header, else the `bot` argument, which is taken out of `args`.
    fn speaker(
        &self,
        context: &RequestContext<RoleServer>,
        args: &mut Map<String, Value>,
    ) -> Result<BotId, SpeakerError> {
        if let Some(bot) = self.header_bot(context)? {
            return Ok(bot);
        }
        match args.remove("bot") {
            Some(Value::String(bot)) => self.checked(bot.trim()),
            Some(_) => Err(SpeakerError::BadArgument {
                known: self.known(),
            }),
            None => Err(SpeakerError::NoBot {
                known: self.known(),
            }),
        }
    }

    /// The session an MCP client's calls speak from (see [`SessionKey::mcp`]).
    fn session(&self, bot: &BotId) -> Option<SessionKey> {
        let account = self.engine.roster().account_of_bot(Platform::Local, bot)?;
        Some(SessionKey::mcp(bot, account.id.clone()))
    }

    /// Every tool some bot may use, each with a required `bot` parameter listing who may.
    fn tools_for_anyone(&self) -> Vec<Tool> {
        let mut merged: Vec<(ToolSpec, Vec<String>)> = Vec::new();
        for bot in self.engine.roster().bots() {
            for spec in bot.tools.specs().iter() {
                match merged.iter_mut().find(|(s, _)| s.name == spec.name) {
                    Some((_, bots)) => bots.push(bot.id().to_string()),
                    None => merged.push((spec.clone(), vec![bot.id().to_string()])),
                }
            }
        }
        merged
            .into_iter()
            .map(|(mut spec, bots)| {
                if let Value::Object(schema) = &mut spec.parameters {
                    add_bot_parameter(schema, &bots);
                }
                tool(spec)
            })
            .collect()
    }
}

/// Make `bot` a required string parameter naming one of `bots`. It replaces a tool's own `bot`
/// parameter (the `sessions_list` filter): without the header, `bot` names the caller.
fn add_bot_parameter(schema: &mut Map<String, Value>, bots: &[String]) {
    let properties = schema
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    if let Some(properties) = properties {
        properties.insert(
            "bot".into(),
            json!({
                "type": "string",
                "enum": bots,
                "description": "The baton bot you act as. (Send the X-Baton-Bot header instead \
                                to leave this out.)"
            }),
        );
    }
    let required = schema.entry("required").or_insert_with(|| json!([]));
    if let Some(required) = required.as_array_mut()
        && !required.iter().any(|r| r == "bot")
    {
        required.push(json!("bot"));
    }
}

/// A baton tool spec as an MCP tool: its JSON schema becomes the `inputSchema`.
fn tool(spec: ToolSpec) -> Tool {
    let schema = match spec.parameters {
        Value::Object(schema) => schema,
        _ => JsonObject::new(),
    };
    Tool::new(spec.name, spec.description, schema)
}

/// A tool result as MCP content: the JSON as text, flagged as an error when baton says so.
fn tool_result(result: &Value) -> CallToolResult {
    let content = vec![ContentBlock::text(result.to_string())];
    if result["status"] == "error" {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

/// A failure before any tool ran, shaped like baton's own tool errors.
fn error_result(message: impl std::fmt::Display) -> CallToolResult {
    tool_result(&json!({"status": "error", "error": message.to_string()}))
}

impl ServerHandler for BatonMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("baton", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Agent tools of the baton gateway: find other bots (bots_list), read sessions, \
                 and hand work to another bot (sessions_send). Every call acts as one baton bot, \
                 named by the X-Baton-Bot header or a `bot` argument; that bot's tool list and \
                 guards apply.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if let Some(AgentTurn(caller)) = agent_turn(&context) {
            let tools = AgentTools::new(self.relay.clone(), caller);
            let tools = tools.specs().iter().cloned().map(tool).collect();
            return Ok(ListToolsResult::with_all_items(tools));
        }
        let tools = match self.header_bot(&context) {
            Ok(Some(bot)) => {
                let caller = Caller::external(&self.session(&bot).ok_or_else(|| {
                    ErrorData::internal_error(format!("bot `{bot}` has no local account"), None)
                })?);
                AgentTools::new(self.relay.clone(), caller)
                    .specs()
                    .iter()
                    .cloned()
                    .map(tool)
                    .collect()
            }
            Ok(None) => self.tools_for_anyone(),
            Err(err) => return Err(ErrorData::invalid_params(err.to_string(), None)),
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut args = request.arguments.unwrap_or_default();
        if let Some(AgentTurn(caller)) = agent_turn(&context) {
            // The token says who calls; a `bot` argument claims nothing.
            args.remove("bot");
            return Ok(self
                .call_as(caller, request.name.into_owned(), args, &context)
                .await);
        }
        let bot = match self.speaker(&context, &mut args) {
            Ok(bot) => bot,
            Err(err) => return Ok(error_result(err).into()),
        };
        let Some(session) = self.session(&bot) else {
            // The roster gives every bot a local account; this is a bug if it happens.
            return Ok(error_result(format!("bot `{bot}` has no local account")).into());
        };
        let caller = Caller::external(&session);
        Ok(self
            .call_as(caller, request.name.into_owned(), args, &context)
            .await)
    }
}

impl BatonMcp {
    /// Run one tool call as `caller`, recorded in its session like a bot's own tool calls (so
    /// `baton sessions` lists it and the transcript shows what the client did), in its run
    /// when it has one.
    async fn call_as(
        &self,
        caller: Caller,
        name: String,
        args: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let call = ToolCall {
            id: format!("mcp-{}", context.id),
            name,
            arguments: Value::Object(args).to_string(),
        };
        tracing::debug!(bot = %caller.bot, tool = %call.name, "MCP tool call");
        let run_id = caller.run_id.clone().unwrap_or_else(|| call.id.clone());
        let journal = journal(&self.engine, &caller.session, run_id).await;
        let tools = AgentTools::new(self.relay.clone(), caller);
        let result = RecordingTools::new(&tools, &journal).call(&call).await;
        tool_result(&result).into()
    }
}

/// The running turn whose token the request carries, if any.
fn agent_turn(context: &RequestContext<RoleServer>) -> Option<AgentTurn> {
    context
        .extensions
        .get::<Parts>()
        .and_then(|parts| parts.extensions.get::<AgentTurn>())
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bot_parameter_is_added_and_required_once() {
        let mut schema = json!({
            "type": "object",
            "properties": {"bot": {"type": "string", "description": "filter"}, "limit": {}},
            "required": ["bot"]
        });
        let obj = schema.as_object_mut().unwrap();
        add_bot_parameter(obj, &["snark".into(), "caid".into()]);
        assert_eq!(
            schema["properties"]["bot"]["enum"],
            json!(["snark", "caid"])
        );
        assert_eq!(schema["required"], json!(["bot"]));
        assert!(schema["properties"]["limit"].is_object());

        let mut empty = json!({"type": "object"});
        add_bot_parameter(empty.as_object_mut().unwrap(), &["snark".into()]);
        assert_eq!(empty["required"], json!(["bot"]));
        assert_eq!(empty["properties"]["bot"]["type"], "string");
    }

    #[test]
    fn error_status_marks_the_result_as_an_error() {
        let failed = tool_result(&json!({"status": "error", "error": "nope"}));
        assert_eq!(failed.is_error, Some(true));
        let refused = tool_result(&json!({"status": "refused", "reason": "self-send"}));
        assert_ne!(refused.is_error, Some(true));
        let ok = tool_result(&json!({"status": "ok"}));
        assert_ne!(ok.is_error, Some(true));
    }

    #[test]
    fn no_bot_tells_the_client_to_set_the_header() {
        let err = SpeakerError::NoBot {
            known: "snark, caid".into(),
        };
        let text = err.to_string();
        assert!(text.contains("X-Baton-Bot"), "{text}");
        assert!(text.contains("snark, caid"), "{text}");
    }
}
