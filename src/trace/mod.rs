//! OpenTelemetry traces (SPEC section 13): one trace per trigger, from the inbound event through
//! the pipeline's decision, each turn, model call, tool call, `sessions_send` (the target's turn
//! under it, across instances) and post, exported over OTLP/HTTP.
//!
//! The span in progress travels with the future that runs under it ([`in_span!`], the
//! `opentelemetry` context attached at each poll), so no function takes a span parameter: a step
//! that opens a span opens it under whatever span is current. Where work leaves the task (a
//! delivery run by another task or instance), the W3C `traceparent` is stored with it and its
//! span continues from that ([`Span::under`]).
//!
//! Off unless an OTLP endpoint is set ([`export::start`]): every helper here first asks whether
//! a tracer is installed, one load of a static, and does nothing more when none is.

mod export;
mod json_log;
mod propagate;
mod span;
mod traceparent;

pub use export::{Exporting, TraceStartError, dropped, start};
pub use json_log::WithTraceId;
pub use propagate::{Handoff, continue_request};
pub(crate) use propagate::{carry, traced};
pub(crate) use span::{Span, SpanKind, attr, in_span};
