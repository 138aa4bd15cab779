//! The one HTTP listener: health, the OpenAI-compatible API, the local
//! rooms, the JSON API, platform webhooks (`/hooks/<platform>/<account>`) and the MCP server.
//!
//! `/v1`, `/api` and `/mcp` are guarded: with `gateway.api_token_env` set, a bearer token is
//! required; without it, only loopback clients are served, so a gateway started on a laptop is
//! not an open relay to its bots.

mod api;
mod auth;
mod health;
mod hooks;
mod mcp;
mod metrics;
mod openai;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use baton_contract::Secret;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::dispatcher::Dispatcher;
use crate::local::LocalHub;

use crate::dispatcher::MAX_TEXT_BYTES;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    dispatcher: Dispatcher,
    hub: Arc<LocalHub>,
    api_token: Option<Arc<Secret>>,
}

impl AppState {
    /// State over the pipeline and the local hub; `api_token` guards `/v1`, `/api` and `/mcp`.
    pub fn new(dispatcher: Dispatcher, hub: Arc<LocalHub>, api_token: Option<Secret>) -> Self {
        Self {
            dispatcher,
            hub,
            api_token: api_token.map(Arc::new),
        }
    }
}

/// Every route. `stop` ends the long-lived MCP streams, which graceful shutdown would otherwise
/// wait on.
pub fn router(state: AppState, stop: CancellationToken) -> Router {
    let guarded = Router::new()
        .route("/v1/models", get(openai::models))
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route(
            "/api/local/rooms/{room}/messages",
            get(api::room_messages).post(api::post_room_message),
        )
        .route("/api/sessions", get(api::sessions))
        .route("/api/transcript", get(api::transcript))
        .route("/api/deliveries", get(api::deliveries))
        .route("/api/chains", get(api::chains))
        .route("/api/chains/{id}", get(api::chain))
        .nest_service("/mcp", mcp::service(&state, stop))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require,
        ));
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics::metrics))
        .route("/hooks/{platform}/{account}", post(hooks::hook))
        .merge(guarded)
        .with_state(state)
}

/// Serve until `stop` fires, then finish the requests in progress.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    stop: CancellationToken,
) -> std::io::Result<()> {
    let app = router(state, stop.clone()).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
}
