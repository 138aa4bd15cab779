//! [`Span`]: one span in progress, or nothing when tracing is off.

use std::borrow::Cow;
use std::future::Future;

use opentelemetry::context::FutureExt as _;
pub(crate) use opentelemetry::trace::SpanKind;
use opentelemetry::trace::{SpanBuilder, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};

use super::export::tracer;
use super::propagate::{parse, render};

/// An attribute: `attr("gen_ai.request.model", model)`.
pub(crate) fn attr(key: &'static str, value: impl Into<opentelemetry::Value>) -> KeyValue {
    KeyValue::new(key, value)
}

/// One span, ended when dropped. Holds nothing when tracing is off, and then every method
/// returns at once.
#[must_use = "a span ends when dropped"]
pub(crate) struct Span(Option<Context>);

impl Span {
    /// A span under the current one (a root if there is none). `attributes` is only called
    /// when tracing is on.
    pub(crate) fn start(
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Span {
        Self::open(None, name, kind, attributes)
    }

    /// A span under the span a stored `traceparent` names (a delivery's sender), else under
    /// the current one.
    pub(crate) fn under(
        traceparent: Option<&str>,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Span {
        Self::open(Some(traceparent), name, kind, attributes)
    }

    /// No span of its own: the span a stored `traceparent` names made current, so the spans
    /// opened under [`Span::run`] are its children (the target's turn under the sender's
    /// `sessions_send`). Nothing when there is none or tracing is off.
    pub(crate) fn continued(traceparent: Option<&str>) -> Span {
        if tracer().is_none() {
            return Span(None);
        }
        Span(
            traceparent
                .and_then(parse)
                .map(|remote| Context::new().with_remote_span_context(remote)),
        )
    }

    /// A span linked to the span `traceparent` names, under the current one: a late reply
    /// answers a request whose span has long ended.
    pub(crate) fn linked(
        traceparent: Option<&str>,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Span {
        let Some(tracer) = tracer() else {
            return Span(None);
        };
        let mut builder = SpanBuilder::from_name(name)
            .with_kind(kind)
            .with_attributes(attributes());
        if let Some(linked) = traceparent.and_then(parse) {
            builder = builder.with_links(vec![opentelemetry::trace::Link::with_context(linked)]);
        }
        let parent = Context::current();
        Span(Some(
            parent.with_span(tracer.build_with_context(builder, &parent)),
        ))
    }

    fn open(
        stored: Option<Option<&str>>,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Span {
        let Some(tracer) = tracer() else {
            return Span(None);
        };
        let parent = match stored.flatten().and_then(parse) {
            Some(remote) => Context::new().with_remote_span_context(remote),
            None => Context::current(),
        };
        let builder = SpanBuilder::from_name(name)
            .with_kind(kind)
            .with_attributes(attributes());
        Span(Some(
            parent.with_span(tracer.build_with_context(builder, &parent)),
        ))
    }

    /// Adds attributes (only computed when tracing is on).
    pub(crate) fn set(&self, attributes: impl FnOnce() -> Vec<KeyValue>) {
        if let Some(cx) = &self.0 {
            cx.span().set_attributes(attributes());
        }
    }

    /// Marks the span failed, with why.
    pub(crate) fn failed(&self, why: impl FnOnce() -> String) {
        if let Some(cx) = &self.0 {
            cx.span().set_status(Status::error(why()));
        }
    }

    /// Runs `work` with this span current: spans it opens are its children, and its backend
    /// requests carry this span's `traceparent`.
    pub(crate) async fn run<F: Future>(&self, work: F) -> F::Output {
        match &self.0 {
            Some(cx) => work.with_context(cx.clone()).await,
            None => work.await,
        }
    }

    /// This span's W3C `traceparent`, to store with work another task or instance continues.
    pub(crate) fn traceparent(&self) -> Option<String> {
        self.0
            .as_ref()
            .and_then(|cx| render(cx.span().span_context()))
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if let Some(cx) = &self.0 {
            cx.span().end();
        }
    }
}
