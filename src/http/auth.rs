//! The guard on `/v1` and `/api`: a bearer token when one is configured, loopback otherwise.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;

/// Let the request through, or answer 401/403 saying what is needed.
pub(super) async fn require(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    match &state.api_token {
        Some(token) => {
            let presented = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            if presented.is_some_and(|p| constant_time_eq(p.as_bytes(), token.expose().as_bytes()))
            {
                next.run(request).await
            } else {
                let msg = "missing or wrong bearer token; send `Authorization: Bearer <token>` \
                           with the value of the env var named by gateway.api_token_env";
                (StatusCode::UNAUTHORIZED, msg).into_response()
            }
        }
        None if peer.ip().is_loopback() => next.run(request).await,
        None => {
            let msg = "this gateway has no API token, so it only serves loopback clients; \
                       set gateway.api_token_env to serve others";
            (StatusCode::FORBIDDEN, msg).into_response()
        }
    }
}

/// Compare without an early exit, so response timing does not leak the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
