//! `GET /api/usage?bot=&chat=&since=&group_by=bot|chat|trigger|model`: what the model calls
//! spent (SPEC 12), summed from the store, so every instance answers the same.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::api::bad;
use crate::budget::report::{self, UsageParams};
use crate::store::Store;
use crate::timing::now_ms;

/// The report as JSON; a parameter that does not parse is a 400 saying what to write.
pub(super) async fn usage(
    State(store): State<Store>,
    Query(params): Query<UsageParams>,
) -> Response {
    match report::usage(&store, &params, now_ms()).await {
        Ok(Ok((group, rows))) => Json(report::to_json(group, &rows)).into_response(),
        Ok(Err(why)) => bad(StatusCode::BAD_REQUEST, &why.to_string()),
        Err(err) => bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}
