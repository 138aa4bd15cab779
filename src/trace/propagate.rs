//! W3C Trace Context: the `traceparent` header sent on backend HTTP requests (any backend,
//! A2A included, takes it from [`traceparent`]), and the one a `/v1` or `/api` caller sends
//! continued ([`continue_request`]).

use std::future::Future;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::Context;
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::TraceContextExt as _;

use super::export::tracer;
use super::span::{Span, SpanKind, attr, in_span};
use super::traceparent::{parse, render};

/// The header's name.
pub(crate) const TRACEPARENT: &str = "traceparent";

/// The `traceparent` of the current span, for an outbound request: `None` when tracing is off
/// or no span is current.
pub(crate) fn traceparent() -> Option<String> {
    tracer()?;
    Context::map_current(|cx| render(cx.span().span_context()))
}

/// `request` with the current span's `traceparent` header (none when no span is current):
/// what every backend's HTTP request is sent with.
pub(crate) fn traced(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    match traceparent() {
        Some(value) => request.header(TRACEPARENT, value),
        None => request,
    }
}

/// `work` under the current span, for work spawned onto another task.
pub(crate) async fn carry<F: Future>(work: F) -> F::Output {
    if tracer().is_none() {
        return work.await;
    }
    work.with_context(Context::current()).await
}

/// Middleware for `/v1` and `/api`: a request carrying a valid `traceparent` runs under a
/// server span in the caller's trace, so the event it posts is traced there too. Requests
/// without one are not traced here (the pipeline starts its own trace for what they post).
pub async fn continue_request(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let continued = tracer().is_some() && (path.starts_with("/v1/") || path.starts_with("/api/"));
    let caller = request
        .headers()
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .filter(|v| continued && parse(v).is_some());
    let Some(caller) = caller else {
        return next.run(request).await;
    };
    let method = request.method().to_string();
    let span = Span::under(
        Some(caller),
        || format!("{method} {path}"),
        SpanKind::Server,
        || vec![attr("http.request.method", method.clone())],
    );
    in_span!(span, next.run(request))
}
