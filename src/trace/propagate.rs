//! W3C Trace Context: the `traceparent` header sent on backend HTTP requests (any backend,
//! A2A included, takes it from [`traceparent`]), and the one a `/v1` or `/api` caller sends
//! continued ([`continue_request`]).

use std::future::Future;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use opentelemetry::Context;
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};

use super::export::tracer;
use super::span::{Span, SpanKind, attr};

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

/// `00-<trace id>-<span id>-<flags>`, for a valid span context.
pub(super) fn render(span: &SpanContext) -> Option<String> {
    span.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            span.trace_id(),
            span.span_id(),
            span.trace_flags().to_u8()
        )
    })
}

/// A `traceparent` value (version 00 and the later versions' same first fields), or `None`
/// if it is not one.
pub(super) fn parse(value: &str) -> Option<SpanContext> {
    let mut parts = value.trim().split('-');
    let version = parts.next().filter(|v| v.len() == 2 && *v != "ff")?;
    u8::from_str_radix(version, 16).ok()?;
    let trace = parts.next().filter(|t| t.len() == 32)?;
    let span = parts.next().filter(|s| s.len() == 16)?;
    let flags = parts.next().filter(|f| f.len() == 2)?;
    if version == "00" && parts.next().is_some() {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok()?;
    let span = SpanId::from_hex(span).ok()?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()? & 1);
    let context = SpanContext::new(trace, span, flags, true, TraceState::default());
    context.is_valid().then_some(context)
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
        format!("{method} {path}"),
        SpanKind::Server,
        || vec![attr("http.request.method", method.clone())],
    );
    span.run(next.run(request)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_is_read_and_written_back_the_same() {
        let value = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse(value).expect("valid");
        assert!(context.is_remote() && context.is_sampled());
        assert_eq!(render(&context).as_deref(), Some(value));
    }

    #[test]
    fn malformed_or_zero_ids_are_not_continued() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-xyz92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
    }
}
