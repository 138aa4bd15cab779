//! The trace id on JSON log lines: a line logged while a traced span is current starts with
//! `"trace_id"`, so a log search and a trace view meet.

use std::fmt;

use opentelemetry::Context;
use opentelemetry::trace::TraceContextExt as _;
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use super::export::tracer;

/// A JSON event format with `"trace_id"` added first when a span is current.
pub struct WithTraceId<F>(pub F);

impl<S, N, F> FormatEvent<S, N> for WithTraceId<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let trace = tracer().and_then(|_| {
            Context::map_current(|cx| {
                let span = cx.span().span_context().clone();
                span.is_valid().then(|| span.trace_id())
            })
        });
        let Some(trace) = trace else {
            return self.0.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        match line.strip_prefix('{') {
            Some(rest) => write!(writer, "{{\"trace_id\":\"{trace}\",{rest}"),
            None => writer.write_str(&line),
        }
    }
}
