//! `/api/artifacts`: the artifacts bots made, as JSON (`/api/artifacts/{id}`, a list by
//! `?session=` or `?run=`), and their bytes (`/api/artifacts/{id}/content`), for the dashboard,
//! for a person, and for a bot given a URL because the content was too large to inline.
//!
//! The bytes are served as a download (`Content-Disposition: attachment`, `nosniff`, a sandbox
//! CSP): an artifact is whatever a model wrote, and an HTML one opened on the dashboard's origin
//! must not run as part of it.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::api::bad;
use crate::store::content_path;
use crate::store::{Artifact, ArtifactQuery, Store};

/// `?session=KEY` or `?run=ID`, and `limit`.
#[derive(Debug, Deserialize)]
pub(super) struct ListParams {
    session: Option<String>,
    run: Option<String>,
    limit: Option<usize>,
}

/// Artifacts, oldest first: a session's, a run's, or the newest of all.
pub(super) async fn list(State(store): State<Store>, Query(params): Query<ListParams>) -> Response {
    let query = match (params.session, params.run) {
        (Some(_), Some(_)) => {
            return bad(StatusCode::BAD_REQUEST, "give `session` or `run`, not both");
        }
        (Some(session), None) => match session.parse() {
            Ok(key) => ArtifactQuery::Session(key),
            Err(err) => return bad(StatusCode::BAD_REQUEST, &format!("{err}")),
        },
        (None, Some(run)) => ArtifactQuery::Run(run),
        (None, None) => ArtifactQuery::All,
    };
    match store.artifacts(query, params.limit.unwrap_or(200)).await {
        Ok(found) => {
            let found: Vec<_> = found.iter().map(with_url).collect();
            Json(json!({"artifacts": found})).into_response()
        }
        Err(err) => bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}

/// One artifact's record.
pub(super) async fn one(State(store): State<Store>, Path(id): Path<String>) -> Response {
    match store.artifact(&id).await {
        Ok(Some(artifact)) => Json(with_url(&artifact)).into_response(),
        Ok(None) => not_found(),
        Err(err) => bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    }
}

/// One artifact's bytes, as a download of its media type.
pub(super) async fn content(State(store): State<Store>, Path(id): Path<String>) -> Response {
    let (artifact, bytes) = match store.artifact_content(&id).await {
        Ok(Some(found)) => found,
        Ok(None) => return not_found(),
        Err(err) => return bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    };
    let media_type = HeaderValue::from_str(&artifact.media_type)
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    // The name as the bot gave it, kept to characters that need no quoting in a header.
    let file: String = artifact
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{file}\""))
        .unwrap_or(HeaderValue::from_static("attachment"));
    let etag = HeaderValue::from_str(&format!("\"{}\"", artifact.sha256))
        .unwrap_or(HeaderValue::from_static("\"\""));
    (
        [
            (header::CONTENT_TYPE, media_type),
            (header::CONTENT_DISPOSITION, disposition),
            (header::ETAG, etag),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("sandbox; default-src 'none'"),
            ),
        ],
        bytes,
    )
        .into_response()
}

/// The record with where its bytes are.
fn with_url(artifact: &Artifact) -> serde_json::Value {
    let mut value = json!(artifact);
    value["content_url"] = json!(content_path(&artifact.id));
    value
}

fn not_found() -> Response {
    bad(
        StatusCode::NOT_FOUND,
        "no such artifact; GET /api/artifacts?session=KEY (or ?run=ID) lists them",
    )
}
