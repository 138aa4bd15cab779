//! Files a fake platform serves for download: bytes by path, every fetch recorded with the
//! credentials it carried, and failures on demand. Each fake mounts it at its own download
//! route and says which credentials it takes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

/// One download request as the fake received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// The path under the fake's download route.
    pub path: String,
    /// The `Authorization` header, if any.
    pub authorization: Option<String>,
}

#[derive(Default)]
struct Inner {
    files: HashMap<String, (Vec<u8>, String)>,
    failures: HashMap<String, u16>,
    fetches: Vec<Fetch>,
}

/// The files one fake serves.
#[derive(Clone, Default)]
pub struct Shelf(Arc<Mutex<Inner>>);

impl Shelf {
    /// Serve `bytes` as `content_type` at `path`.
    pub fn put(&self, path: &str, bytes: &[u8], content_type: &str) {
        self.0
            .lock()
            .unwrap()
            .files
            .insert(path.to_owned(), (bytes.to_vec(), content_type.to_owned()));
    }

    /// Answer every fetch of `path` with `status` (404, 500, ...).
    pub fn fail(&self, path: &str, status: u16) {
        self.0
            .lock()
            .unwrap()
            .failures
            .insert(path.to_owned(), status);
    }

    /// Every fetch, in order.
    pub fn fetches(&self) -> Vec<Fetch> {
        self.0.lock().unwrap().fetches.clone()
    }

    /// Answer a fetch of `path`: recorded; 401 when `allowed` refuses its `Authorization`; the
    /// failure set for it; 404 for an unknown path; else the bytes.
    pub fn answer(
        &self,
        path: &str,
        headers: &HeaderMap,
        allowed: impl Fn(Option<&str>) -> bool,
    ) -> Response {
        let authorization = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut inner = self.0.lock().unwrap();
        inner.fetches.push(Fetch {
            path: path.to_owned(),
            authorization: authorization.clone(),
        });
        if !allowed(authorization.as_deref()) {
            return StatusCode::UNAUTHORIZED.into_response();
        }
        if let Some(status) = inner.failures.get(path) {
            return StatusCode::from_u16(*status).unwrap().into_response();
        }
        match inner.files.get(path) {
            Some((bytes, content_type)) => {
                ([("content-type", content_type.clone())], bytes.clone()).into_response()
            }
            None => StatusCode::NOT_FOUND.into_response(),
        }
    }
}
