//! `GET /healthz` (the process answers) and `GET /readyz` (the store can commit a write, and
//! every account is connected or reconnecting with backoff; each one that is not is listed with
//! its state and why: invalid token, missing scope, unreachable). A store that cannot commit (full
//! disk, read-only file) makes the gateway refuse events, so it must not look ready either.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::engine::Engine;

/// Liveness.
pub(super) async fn healthz() -> &'static str {
    "ok"
}

/// Readiness, with the accounts that are not ready.
pub(super) async fn readyz(State(engine): State<Engine>) -> (StatusCode, Json<Value>) {
    let probe = engine.store().probe(crate::timing::now_ms()).await;
    if let Err(err) = &probe {
        tracing::error!(%err, "not ready: the store cannot commit; new events are refused");
    }
    let store_ok = probe.is_ok();
    let store_error = probe.err().map(|err| err.to_string());
    let not_ready: Vec<_> = engine
        .roster()
        .accounts()
        .iter()
        .filter(|a| !a.adapter.connection_state().is_ready())
        .collect();
    let waiting: Vec<String> = not_ready
        .iter()
        .map(|a| format!("{}/{}", a.platform, a.id))
        .collect();
    // Each account that is not ready, with its state and why (when the platform said).
    let accounts: Vec<Value> = not_ready
        .iter()
        .map(|a| {
            let cell = a.adapter.connection();
            json!({
                "account": format!("{}/{}", a.platform, a.id),
                "state": cell.get().as_str(),
                "reason": cell.trouble().map(|t| t.as_str()),
            })
        })
        .collect();
    let ready = store_ok && waiting.is_empty();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({
        "ready": ready,
        "store": store_ok,
        "store_error": store_error,
        "accounts_not_ready": waiting,
        "accounts": accounts,
    });
    (status, Json(body))
}
