//! `/api/...`: the local rooms (post and read) and the store's sessions, transcripts,
//! deliveries and chains as JSON, and the instances sharing the database (`/api/cluster`).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use std::sync::Arc;

use super::MAX_TEXT_BYTES;
use crate::engine::Engine;
use crate::local::{HubRefusal, LocalHub, Post};
use crate::relay::Relay;
use crate::session::SessionKey;
use crate::store::{ChainQuery, DeliveryQuery, Store, StoreError, TranscriptQuery};

/// `?after=SEQ` for reading a room.
#[derive(Debug, Deserialize)]
pub(super) struct After {
    after: Option<u64>,
}

/// Post into a local room as a human. The pipeline runs in the background, as for a platform.
pub(super) async fn post_room_message(
    State(hub): State<Arc<LocalHub>>,
    Path(room): Path<String>,
    post: Result<Json<Post>, JsonRejection>,
) -> Response {
    // A body that is not the JSON asked for gets a JSON error like every other refusal here.
    let Json(post) = match post {
        Ok(post) => post,
        Err(rejection) => return bad(rejection.status(), &rejection.body_text()),
    };
    if post.sender.trim().is_empty() {
        return bad(StatusCode::BAD_REQUEST, "`sender` is required");
    }
    if let Err(refusal) = hub.check_sender(&post.sender) {
        return bad(StatusCode::BAD_REQUEST, &refusal.to_string());
    }
    if room.starts_with("dm:") {
        return bad(
            StatusCode::BAD_REQUEST,
            "rooms named `dm:...` are direct messages; use /v1/chat/completions",
        );
    }
    if post.text.len() > MAX_TEXT_BYTES {
        return bad(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the message is over 100 kB; send less text",
        );
    }
    let accepted = match hub.post(&room, post).await {
        Ok(accepted) => accepted,
        Err(refusal @ HubRefusal::StoreFailing) => return unavailable(&refusal.to_string()),
        Err(refusal) => return bad(refused_status(&refusal), &refusal.to_string()),
    };
    // 202 means recorded: answered once every bot account's pipeline has the message.
    match accepted.recorded().await {
        Ok(message) => (StatusCode::ACCEPTED, Json(message)).into_response(),
        Err(not) => {
            tracing::error!(%room, %not, "a room post was not recorded; refused with 503");
            unavailable(&not.to_string())
        }
    }
}

/// 503 with `Retry-After`: the post was not recorded, and sending it again shortly may be.
fn unavailable(message: &str) -> Response {
    let body = Json(json!({"error": message}));
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(axum::http::header::RETRY_AFTER, "5")],
        body,
    )
        .into_response()
}

/// The status for a post the hub refused.
pub(super) fn refused_status(refusal: &HubRefusal) -> StatusCode {
    match refusal {
        HubRefusal::TooManyRooms { .. } => StatusCode::CONFLICT,
        HubRefusal::TooLong { .. } | HubRefusal::FieldTooLong(_) => StatusCode::PAYLOAD_TOO_LARGE,
        HubRefusal::BadSender(_) => StatusCode::BAD_REQUEST,
        HubRefusal::NotRunning => StatusCode::INTERNAL_SERVER_ERROR,
        HubRefusal::StoreFailing => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// A room's messages, oldest first, whichever instance they were posted through.
pub(super) async fn room_messages(
    State(hub): State<Arc<LocalHub>>,
    Path(room): Path<String>,
    Query(after): Query<After>,
) -> Response {
    match hub.messages(&room, after.after).await {
        Ok(messages) => Json(messages).into_response(),
        Err(err) => bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}

/// Every session the store knows.
pub(super) async fn sessions(State(store): State<Store>) -> Response {
    match store.sessions().await {
        Ok(sessions) => Json(sessions).into_response(),
        Err(err) => bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}

/// The instances sharing the database (`baton cluster status` as JSON): each with its last
/// renewal and the accounts it holds; `instance` says which one answered.
pub(super) async fn cluster(State(engine): State<Engine>) -> Response {
    match engine.store().cluster_status().await {
        Ok(status) => Json(json!({
            "instance": engine.config().cluster.instance_id,
            "now_ms": status.now_ms,
            "instances": status.instances,
        }))
        .into_response(),
        Err(err) => bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}

/// `?session=KEY&open=true&limit=N` for deliveries.
#[derive(Debug, Deserialize)]
pub(super) struct DeliveryParams {
    session: Option<String>,
    #[serde(default)]
    open: bool,
    #[serde(default)]
    limit: usize,
}

/// Bot-to-bot deliveries, newest first, with the guards' refusal counts since start.
pub(super) async fn deliveries(
    State(relay): State<Relay>,
    Query(params): Query<DeliveryParams>,
) -> Response {
    let engine = relay.engine();
    let session = match params
        .session
        .as_deref()
        .map(str::parse::<SessionKey>)
        .transpose()
    {
        Ok(session) => session,
        Err(err) => return bad(StatusCode::BAD_REQUEST, &err.to_string()),
    };
    let query = DeliveryQuery {
        session,
        open_only: params.open,
        limit: params.limit,
    };
    let refusals: serde_json::Map<String, serde_json::Value> = relay
        .sends()
        .refusals()
        .into_iter()
        .map(|(reason, n)| (reason.as_str().to_owned(), json!(n)))
        .collect();
    match engine.store().deliveries(query).await {
        Ok(deliveries) => Json(json!({
            "deliveries": deliveries,
            "in_flight": relay.waiters().in_flight(),
            "refusals": refusals,
        }))
        .into_response(),
        Err(err) => bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}

/// `?session=KEY&after=ID` or `?session=KEY&run=ID`: a session's transcript.
#[derive(Debug, Deserialize)]
pub(super) struct TranscriptParams {
    session: String,
    after: Option<i64>,
    run: Option<String>,
}

/// One session's transcript, oldest first; with `run`, only that run's entries (a bot-to-bot
/// call's tool calls and reply, for the dashboard's nested cards).
pub(super) async fn transcript(
    State(store): State<Store>,
    Query(params): Query<TranscriptParams>,
) -> Response {
    let session = match params.session.parse::<SessionKey>() {
        Ok(session) => session,
        Err(err) => return bad(StatusCode::BAD_REQUEST, &err.to_string()),
    };
    if let Some(run) = &params.run {
        return match store.run_entries(&session, run).await {
            Ok(entries) => Json(entries).into_response(),
            Err(err) => bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
        };
    }
    let query = TranscriptQuery {
        session,
        after_id: params.after,
        last: None,
        since_reset: false,
    };
    match store.transcript(query).await {
        Ok(entries) => Json(entries).into_response(),
        Err(err) => bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}

/// `?limit=N` for chains.
#[derive(Debug, Deserialize)]
pub(super) struct ChainParams {
    limit: Option<usize>,
}

/// Chains, newest first.
pub(super) async fn chains(
    State(store): State<Store>,
    Query(params): Query<ChainParams>,
) -> Response {
    let query = ChainQuery {
        open_in: None,
        limit: params.limit,
    };
    match store.chains(query).await {
        Ok(chains) => Json(json!({"chains": chains})).into_response(),
        Err(err) => bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}

/// One chain, its messages (handoffs and system notes included), oldest first, and its steps:
/// the artifacts each turn took in and made.
pub(super) async fn chain(State(store): State<Store>, Path(id): Path<String>) -> Response {
    let chain = match store.chain(&id).await {
        Ok(Some(chain)) => chain,
        Ok(None) => {
            return bad(
                StatusCode::NOT_FOUND,
                "no such chain; GET /api/chains lists them",
            );
        }
        Err(err) => return bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    };
    let read = async {
        let messages = store.chain_entries(&chain.id).await?;
        let steps = store.chain_steps(&chain.id).await?;
        Ok::<_, StoreError>((messages, steps))
    };
    match read.await {
        Ok((messages, steps)) => {
            Json(json!({"chain": chain, "messages": messages, "steps": steps})).into_response()
        }
        Err(err) => bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}

/// A JSON error body with `status`.
pub(super) fn bad(status: StatusCode, message: &str) -> Response {
    (status, Json(json!({"error": message}))).into_response()
}
