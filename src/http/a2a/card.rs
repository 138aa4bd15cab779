//! Agent cards (SPEC 14): which bots are published as A2A agents, where callers reach them,
//! and the card each declares, with both of its interfaces (JSON-RPC first, the one the card
//! prefers, then HTTP+JSON at the same URL).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_contract::Platform;
use serde_json::{Value, json};

use super::error::status_body;
use super::version::PROTOCOL_VERSION;
use crate::engine::Engine;
use crate::roster::{Bot, glob_set};

/// The bindings each card declares, in the order the card prefers them.
const BINDINGS: [&str; 2] = ["JSONRPC", "HTTP+JSON"];

/// Whether `path` is an agent card (readable without the API token: SPEC 14).
pub(in crate::http) fn is_card(path: &str) -> bool {
    path == "/.well-known/agent-card.json"
        || path
            .strip_prefix("/a2a/")
            .is_some_and(|rest| rest.ends_with("/.well-known/agent-card.json"))
}

/// The bots published as A2A agents (`[a2a] expose`, when `[a2a] enabled`), settled once at
/// start-up: every A2A request looks its bot up here (matching the globs again on each one
/// cost a round trip through A2A ~30k instructions, BENCHMARKS.md).
#[derive(Clone)]
pub(in crate::http) struct Agents {
    bots: Arc<[Arc<Bot>]>,
    enabled: bool,
}

impl Agents {
    /// `engine`'s exposed bots that have a local account to speak through.
    pub(in crate::http) fn published(engine: &Engine) -> Agents {
        let config = &engine.config().a2a;
        let roster = engine.roster();
        // Validation compiled these at start-up.
        let globs = glob_set(&config.expose).ok().filter(|_| config.enabled);
        let bots = globs.map_or_else(Vec::new, |globs| {
            roster
                .bots()
                .iter()
                .filter(|b| globs.is_match(b.id().as_str()))
                .filter(|b| roster.account_of_bot(Platform::Local, b.id()).is_some())
                .cloned()
                .collect()
        });
        Agents {
            bots: bots.into(),
            enabled: config.enabled,
        }
    }

    /// The published bot named `name`.
    pub(super) fn find(&self, name: &str) -> Option<Arc<Bot>> {
        self.bots.iter().find(|b| b.id() == name).cloned()
    }

    /// The answer to a request for `bot`, which is not published.
    pub(super) fn not_found(&self, bot: &str) -> Response {
        let message = if self.enabled {
            let names: Vec<String> = self.bots.iter().map(|b| b.id().to_string()).collect();
            format!(
                "no A2A agent `{bot}`; exposed: {} (`[a2a] expose` in the config)",
                names.join(", ")
            )
        } else {
            "A2A is off; set `[a2a] enabled = true` in the config".to_owned()
        };
        let body = status_body(StatusCode::NOT_FOUND, "NOT_FOUND", &message, json!([]));
        (StatusCode::NOT_FOUND, Json(body)).into_response()
    }
}

/// `GET /.well-known/agent-card.json`: the cards of every exposed bot, as a list.
pub(in crate::http) async fn cards(
    State(engine): State<Engine>,
    State(agents): State<Agents>,
    headers: HeaderMap,
) -> Response {
    let base = base_url(&engine, &headers);
    let cards: Vec<Value> = agents
        .bots
        .iter()
        .map(|bot| card(&engine, bot, &base))
        .collect();
    Json(cards).into_response()
}

/// `GET /a2a/<bot>/.well-known/agent-card.json`.
pub(in crate::http) async fn bot_card(
    State(engine): State<Engine>,
    State(agents): State<Agents>,
    Path(bot): Path<String>,
    headers: HeaderMap,
) -> Response {
    match agents.find(&bot) {
        Some(found) => Json(card(&engine, &found, &base_url(&engine, &headers))).into_response(),
        None => agents.not_found(&bot),
    }
}

/// Where callers reach baton: `gateway.public_url`, else the host the request was sent to.
pub(super) fn base_url(engine: &Engine, headers: &HeaderMap) -> String {
    let gateway = &engine.config().gateway;
    if let Some(url) = &gateway.public_url {
        return url.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or(&gateway.listen);
    format!("http://{host}")
}

/// A bot's agent card: its name and description, one skill from the description, its
/// interfaces (both bindings), streaming on, and the bearer scheme when the API needs a token.
fn card(engine: &Engine, bot: &Bot, base: &str) -> Value {
    let id = bot.id();
    let name = if bot.config.name.is_empty() {
        id.to_string()
    } else {
        bot.config.name.clone()
    };
    let description = if bot.config.description.is_empty() {
        format!("{name}, a bot on baton")
    } else {
        bot.config.description.clone()
    };
    let mut card = json!({
        "name": name,
        "description": description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": BINDINGS.map(|binding| json!({
            "url": format!("{base}/a2a/{id}"),
            "protocolBinding": binding,
            "protocolVersion": PROTOCOL_VERSION,
        })),
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": id,
            "name": name,
            "description": description,
            "tags": ["baton"],
        }],
    });
    if engine.config().gateway.api_token_env.is_some() {
        card["securitySchemes"] = json!({
            "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}
        });
        card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
    }
    card
}
