//! `POST /hooks/<platform>/<account>`: platform webhooks, handed to the account's adapter.
//!
//! The route is not behind the API token (platforms cannot send one): each adapter verifies its
//! platform's signature over the raw body, which is why the body arrives here as bytes and is
//! passed on untouched.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_contract::{AccountId, EventSink, Platform, WebhookRequest};

use crate::dispatcher::Dispatcher;

/// Find the account and let its adapter answer.
pub(super) async fn hook(
    State(dispatcher): State<Dispatcher>,
    Path((platform, account)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Ok(platform) = platform.parse::<Platform>() else {
        return (StatusCode::NOT_FOUND, "no such platform").into_response();
    };
    let roster = dispatcher.engine().roster();
    let Some(account) = roster.account(platform, &AccountId::from(account.as_str())) else {
        return (
            StatusCode::NOT_FOUND,
            "no such account; the path is /hooks/<platform>/<account id>",
        )
            .into_response();
    };
    let request = WebhookRequest {
        headers: headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect(),
        body,
    };
    let sink: &dyn EventSink = &dispatcher;
    let answer = account.adapter.webhook(request, sink).await;
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, answer.content_type)],
        answer.body,
    )
        .into_response()
}
