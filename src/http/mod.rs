//! The one HTTP listener: health, the OpenAI-compatible API, the local
//! rooms, the JSON API, the event stream and the dashboard, platform webhooks
//! (`/hooks/<platform>/<account>`) and the MCP server.
//!
//! Everything but the webhooks and the health checks is behind one gate ([`auth`]): with
//! `gateway.api_token_env` set, a bearer token is required; without it, only clients on this
//! machine are served, so a gateway started on a laptop is not an open relay to its bots.
//! Connections get deadlines and a cap ([`server`]), request bodies a deadline
//! ([`body_deadline`]).

mod a2a;
mod api;
mod artifacts;
mod auth;
mod body_deadline;
mod budgets;
mod dashboard;
mod events;
mod export;
mod health;
mod hooks;
mod listen;
mod mcp;
mod mcp_admission;
mod metrics;
mod openai;
mod roster;
mod server;
mod usage;
mod why;

pub use listen::{bind, raise_open_file_limit};
pub use server::SPARE_CONNECTIONS;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::FromRef;
use axum::routing::{get, post};
use baton_contract::Secret;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::dispatcher::Dispatcher;
use crate::engine::Engine;
use crate::events::Events;
use crate::local::LocalHub;
use crate::relay::Relay;
use crate::store::Store;

use crate::dispatcher::MAX_TEXT_BYTES;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    dispatcher: Dispatcher,
    relay: Relay,
    hub: Arc<LocalHub>,
    token: Option<auth::Token>,
    /// Counted by the accept loop, shown by `/metrics`.
    connections: Arc<server::OpenConnections>,
    /// rmcp's session table behind `/mcp`, counted by its admission and by `/metrics`.
    mcp_sessions: Arc<LocalSessionManager>,
    /// Open `/api/events` streams, capped below the connection cap (`events.rs`).
    event_readers: events::EventReaders,
    /// The bots published as A2A agents.
    a2a_agents: a2a::Agents,
}

impl AppState {
    /// State over the pipeline, the relay and the local hub; `api_token`, when set, is required on every
    /// route but the webhooks and the health checks.
    pub fn new(
        dispatcher: Dispatcher,
        relay: Relay,
        hub: Arc<LocalHub>,
        api_token: Option<Secret>,
    ) -> Self {
        let gateway = &dispatcher.engine().config().gateway;
        let mcp_sessions = mcp::session_table(gateway);
        let event_readers = events::EventReaders::new(gateway.max_connections);
        let a2a_agents = a2a::Agents::published(dispatcher.engine());
        Self {
            dispatcher,
            relay,
            hub,
            token: api_token.as_ref().map(auth::Token::new),
            connections: Arc::default(),
            mcp_sessions,
            event_readers,
            a2a_agents,
        }
    }
}

/// A handler takes the part of the state it reads (`State<Store>`, `State<Relay>`, ...), as
/// axum's substates: its signature says what it touches.
impl FromRef<AppState> for Dispatcher {
    fn from_ref(state: &AppState) -> Dispatcher {
        state.dispatcher.clone()
    }
}

impl FromRef<AppState> for Relay {
    fn from_ref(state: &AppState) -> Relay {
        state.relay.clone()
    }
}

impl FromRef<AppState> for Engine {
    fn from_ref(state: &AppState) -> Engine {
        state.dispatcher.engine().clone()
    }
}

impl FromRef<AppState> for Store {
    fn from_ref(state: &AppState) -> Store {
        state.dispatcher.engine().store().clone()
    }
}

impl FromRef<AppState> for Arc<LocalHub> {
    fn from_ref(state: &AppState) -> Arc<LocalHub> {
        Arc::clone(&state.hub)
    }
}

impl FromRef<AppState> for Events {
    fn from_ref(state: &AppState) -> Events {
        state.dispatcher.engine().events().clone()
    }
}

impl FromRef<AppState> for events::EventReaders {
    fn from_ref(state: &AppState) -> events::EventReaders {
        state.event_readers.clone()
    }
}

impl FromRef<AppState> for Option<auth::Token> {
    fn from_ref(state: &AppState) -> Option<auth::Token> {
        state.token.clone()
    }
}

impl FromRef<AppState> for Arc<server::OpenConnections> {
    fn from_ref(state: &AppState) -> Arc<server::OpenConnections> {
        Arc::clone(&state.connections)
    }
}

impl FromRef<AppState> for a2a::Agents {
    fn from_ref(state: &AppState) -> a2a::Agents {
        state.a2a_agents.clone()
    }
}

impl FromRef<AppState> for Arc<LocalSessionManager> {
    fn from_ref(state: &AppState) -> Arc<LocalSessionManager> {
        Arc::clone(&state.mcp_sessions)
    }
}

/// Every route. `stop` ends the long-lived MCP streams, which graceful shutdown would otherwise
/// wait on.
pub fn router(state: AppState, stop: CancellationToken) -> Router {
    let body_timeout = body_timeout(&state);
    let events_stop = stop.clone();
    Router::new()
        .route("/", get(dashboard::page))
        .route("/assets/dashboard.js", get(dashboard::script))
        .route("/assets/dashboard.css", get(dashboard::style))
        .route(
            "/api/events",
            get(move |events, readers, close, headers, query| {
                events::stream(events, readers, close, headers, query, events_stop.clone())
            }),
        )
        .route("/api/roster", get(roster::roster))
        .route("/.well-known/agent-card.json", get(a2a::cards))
        .route("/a2a/{bot}/.well-known/agent-card.json", get(a2a::bot_card))
        .route("/a2a/{bot}", post(a2a::rpc))
        .route("/a2a/{bot}/message:send", post(a2a::send_message))
        .route("/a2a/{bot}/message:stream", post(a2a::stream_message))
        .route("/a2a/{bot}/tasks", get(a2a::list_tasks))
        .route(
            "/a2a/{bot}/tasks/{call}",
            get(a2a::task_call).post(a2a::task_call),
        )
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics::metrics))
        .route("/hooks/{platform}/{account}", post(hooks::hook))
        .route("/v1/models", get(openai::models))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route(
            "/api/local/rooms/{room}/messages",
            get(api::room_messages).post(api::post_room_message),
        )
        .route("/api/sessions", get(api::sessions))
        .route("/api/cluster", get(api::cluster))
        .route("/api/transcript", get(api::transcript))
        .route("/api/deliveries", get(api::deliveries))
        .route("/api/usage", get(usage::usage))
        .route("/api/why", get(why::why))
        .route("/api/chats/{platform}/{chat}/export", get(export::export))
        .route("/api/budgets", get(budgets::budgets))
        .route("/api/chains", get(api::chains))
        .route("/api/chains/{id}", get(api::chain))
        .route("/api/artifacts", get(artifacts::list))
        .route("/api/artifacts/{id}", get(artifacts::one))
        .route("/api/artifacts/{id}/content", get(artifacts::content))
        .nest_service("/mcp", mcp_service(&state, stop))
        // Inside the gate: only an authorized caller's trace is continued.
        .layer(axum::middleware::from_fn(crate::trace::continue_request))
        // A layer, not a route layer: unknown paths meet the gate too.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require,
        ))
        .layer(axum::middleware::from_fn_with_state(
            body_timeout,
            body_deadline::limit,
        ))
        .with_state(state)
}

/// The MCP service over the state's relay and session table.
fn mcp_service(state: &AppState, stop: CancellationToken) -> Router {
    let sessions = Arc::clone(&state.mcp_sessions);
    mcp::service(state.relay.clone(), sessions, stop)
}

/// `gateway.body_timeout_seconds`.
fn body_timeout(state: &AppState) -> Duration {
    let gateway = &state.dispatcher.engine().config().gateway;
    Duration::from_secs(gateway.body_timeout_seconds)
}

/// What a connection over `gateway.max_connections` is served: the health checks and the
/// platforms' webhooks (their retries must never meet a gateway that streams and idle clients
/// filled), and a 503 saying why for everything else.
fn spare_router(state: AppState) -> Router {
    let body_timeout = body_timeout(&state);
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/hooks/{platform}/{account}", post(hooks::hook))
        // The gate's host and proxy checks, as on the full service; the refusal below needs none.
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require,
        ))
        .fallback(server::busy)
        .layer(axum::middleware::from_fn_with_state(
            body_timeout,
            body_deadline::limit,
        ))
        .with_state(state)
}

/// Serve until `stop` fires, then finish the requests in progress.
pub async fn serve(listener: TcpListener, state: AppState, stop: CancellationToken) {
    let gateway = &state.dispatcher.engine().config().gateway;
    let limits = server::Limits {
        header: Duration::from_secs(gateway.header_timeout_seconds),
        idle: Duration::from_secs(gateway.idle_timeout_seconds),
        max_connections: gateway.max_connections,
    };
    let spare = spare_router(state.clone());
    let open = Arc::clone(&state.connections);
    let app = router(state, stop.clone());
    server::run(listener, app, spare, limits, open, stop).await;
}
