//! The agent a request under `/a2a/<bot>` addresses, resolved once for every call of both
//! bindings: the published bot (else the 404 that names the exposed ones), the relay that runs
//! its tasks, the base URL its cards and tasks name, and the protocol version the request asked
//! for (each binding refuses one it does not speak in its own framing).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{FromRef, FromRequestParts, Path};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};

use super::card::{Agents, base_url};
use super::version::Asked;
use crate::relay::Relay;
use crate::roster::Bot;

/// The addressed agent, as a handler's argument.
pub(in crate::http) struct Addressed {
    pub(super) relay: Relay,
    pub(super) bot: Arc<Bot>,
    /// Where this gateway is reached (`card::base_url`).
    pub(super) base: String,
    pub(super) asked: Asked,
}

impl<S> FromRequestParts<S> for Addressed
where
    Relay: FromRef<S>,
    Agents: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let name = params.get("bot").map_or("", String::as_str);
        let agents = Agents::from_ref(state);
        let Some(bot) = agents.find(name) else {
            return Err(agents.not_found(name));
        };
        let relay = Relay::from_ref(state);
        let base = base_url(relay.engine(), &parts.headers);
        let asked = Asked::of(&parts.headers);
        Ok(Addressed {
            relay,
            bot,
            base,
            asked,
        })
    }
}
