//! `GET /api/why?message=ID` (or `event=ID`): what each bot's pipeline decided on one inbound
//! message, and why (SPEC section 13; `src/why.rs`), read from the store so every instance
//! answers the same.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::api::bad;
use crate::store::Store;
use crate::why::{self, WhyParams};

/// The report as JSON; a query that names no message is a 400 saying what to write.
pub(super) async fn why(State(store): State<Store>, Query(params): Query<WhyParams>) -> Response {
    let query = match params.query() {
        Ok(query) => query,
        Err(no) => return bad(StatusCode::BAD_REQUEST, &no.to_string()),
    };
    match why::why(&store, query).await {
        Ok(found) => Json(why::to_json(&found)).into_response(),
        Err(err) => bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}
