//! `/`: the dashboard, a page written by hand (HTML, CSS, JavaScript; no build step, no
//! outside fetch) and embedded in the binary, so it works offline and ships with it. It reads
//! `/api/...` and follows `/api/events`; the `/api` gate covers it too.
//!
//! Everything it shows from a chat is untrusted: the script builds its DOM with `textContent`
//! only, and the page is served with a content security policy that allows no script but its
//! own, as a second line of defence.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const PAGE: &str = include_str!("dashboard/index.html");
const SCRIPT: &str = include_str!("dashboard/dashboard.js");
const STYLE: &str = include_str!("dashboard/dashboard.css");

/// Only the gateway's own script, style and API; no inline script, no frames.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; \
                      frame-ancestors 'none'";

/// The page.
pub(super) async fn page() -> Response {
    asset(PAGE, "text/html; charset=utf-8")
}

/// Its script.
pub(super) async fn script() -> Response {
    asset(SCRIPT, "text/javascript; charset=utf-8")
}

/// Its style.
pub(super) async fn style() -> Response {
    asset(STYLE, "text/css; charset=utf-8")
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
        .into_response()
}
