//! W3C Trace Context: the `traceparent` header sent on backend HTTP requests (any backend,
//! A2A included, takes it from [`traceparent`]), and the one a `/v1`, `/api` or A2A caller sends
//! continued ([`continue_request`]), on into the work it hands to other tasks ([`Handoff`]).

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

/// The span current where work is handed to another task (a local room's post handed to its
/// bots' accounts, an event's run spawned): [`Handoff::run`] runs the work under it there.
/// Holds nothing when tracing is off or no span is current.
#[derive(Clone, Default)]
pub struct Handoff(Option<Context>);

impl Handoff {
    /// The span current here.
    pub fn here() -> Handoff {
        if tracer().is_none() {
            return Handoff(None);
        }
        Handoff(Some(Context::current()).filter(|cx| cx.has_active_span()))
    }

    /// `work` under the span taken by [`Handoff::here`].
    pub async fn run<F: Future>(self, work: F) -> F::Output {
        match self.0 {
            Some(cx) => work.with_context(cx).await,
            None => work.await,
        }
    }
}

/// `work` under the current span, for work spawned onto another task: the span is the one
/// current where `carry` is called, not where the task is first polled.
pub(crate) fn carry<F: Future>(work: F) -> impl Future<Output = F::Output> {
    Handoff::here().run(work)
}

/// The paths whose callers' traces are continued: the OpenAI-compatible API, baton's own API
/// and A2A (where the caller is another agent).
const CONTINUED: [&str; 3] = ["/v1/", "/api/", "/a2a/"];

/// Middleware for `/v1`, `/api` and `/a2a`: a request carrying a valid `traceparent` runs
/// under a server span in the caller's trace, so the event or delivery it makes is traced there
/// too. Requests without one are not traced here (the pipeline starts its own trace for what
/// they post).
pub async fn continue_request(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let continued = tracer().is_some() && CONTINUED.iter().any(|p| path.starts_with(p));
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
