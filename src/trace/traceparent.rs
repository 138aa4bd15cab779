//! The W3C `traceparent` value's format, read ([`parse`]) and written ([`render`]): both the
//! header a request carries (`propagate.rs`) and the value stored with work another task
//! continues (`span.rs`) are this one format.

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

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
