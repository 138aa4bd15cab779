//! [`Span`]: one span in progress, or nothing when tracing is off.

pub(crate) use opentelemetry::trace::SpanKind;
use opentelemetry::trace::{SpanBuilder, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use std::borrow::Cow;

use super::export::tracer;
use super::traceparent::{parse, render};

/// `in_span!(span, work)` awaits `work` with `span` current: spans it opens are its children,
/// and its backend requests carry the span's `traceparent`. With tracing off it is `work.await`
/// itself. A macro rather than a method because a method takes the future by value into a
/// wrapper of its own, and an unoptimised build copies the (large) pipeline and turn futures on
/// every such move whether tracing is on or not.
macro_rules! in_span {
    ($span:expr, $work:expr) => {
        match $span.context() {
            Some(cx) => ::opentelemetry::context::FutureExt::with_context($work, cx.clone()).await,
            None => $work.await,
        }
    };
}
pub(crate) use in_span;

/// An attribute: `attr("gen_ai.request.model", model)`.
pub(crate) fn attr(key: &'static str, value: impl Into<opentelemetry::Value>) -> KeyValue {
    KeyValue::new(key, value)
}

/// A span's name: a `&'static str`, or a closure building one, called only when tracing is on.
pub(crate) trait SpanName {
    /// The name.
    fn name(self) -> Cow<'static, str>;
}

impl SpanName for &'static str {
    fn name(self) -> Cow<'static, str> {
        Cow::Borrowed(self)
    }
}

impl<F: FnOnce() -> String> SpanName for F {
    fn name(self) -> Cow<'static, str> {
        Cow::Owned(self())
    }
}

/// One span, ended when dropped. Holds nothing when tracing is off, and then every method
/// returns at once.
#[must_use = "a span ends when dropped"]
pub(crate) struct Span(Option<Context>);

impl Span {
    /// A span under the current one (a root if there is none). `attributes` is only called
    /// when tracing is on.
    pub(crate) fn start(
        name: impl SpanName,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Span {
        Self::open(None, name, kind, attributes)
    }

    /// A span under the span a stored `traceparent` names (a delivery's sender), else under
    /// the current one.
    pub(crate) fn under(
        traceparent: Option<&str>,
        name: impl SpanName,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Span {
        Self::open(Some(traceparent), name, kind, attributes)
    }

    /// No span of its own: the span a stored `traceparent` names made current, so the spans
    /// opened under it with [`in_span!`] are its children (the target's turn under the sender's
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
        name: impl SpanName,
        kind: SpanKind,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Span {
        let Some(tracer) = tracer() else {
            return Span(None);
        };
        let mut builder = SpanBuilder::from_name(name.name())
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
        name: impl SpanName,
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
        let builder = SpanBuilder::from_name(name.name())
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

    /// The context [`in_span!`] runs work in: `None` when tracing is off.
    pub(crate) fn context(&self) -> Option<&Context> {
        self.0.as_ref()
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
