//! Starting the OTLP exporter from the standard `OTEL_*` variables, and counting the spans a
//! collector did not take.
//!
//! The batch processor runs on its own thread and exports with the blocking reqwest client
//! (the same reqwest and rustls as the rest of baton), so a slow or absent collector never
//! holds up a turn: a failed export drops its batch, and a span ended while the queue is full
//! (`OTEL_BSP_MAX_QUEUE_SIZE` spans waiting or being exported) is dropped; both are added to
//! [`dropped`].

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
    SpanProcessor,
};

/// The tracer, once [`start`] installed one; `None` means tracing is off.
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Spans dropped since the start: by a failed export, or ended while the queue was full.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Spans handed to the batch processor and not yet through an export.
static QUEUED: AtomicUsize = AtomicUsize::new(0);

/// The batch processor's queue when `OTEL_BSP_MAX_QUEUE_SIZE` does not say (the SDK's default).
const QUEUE_DEFAULT: usize = 2048;

/// The installed tracer, if tracing is on.
pub(super) fn tracer() -> Option<&'static SdkTracer> {
    TRACER.get()
}

/// Spans dropped because the collector did not take them or the queue was full
/// (`baton_trace_spans_dropped_total`).
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Why traces could not be exported as configured.
#[derive(Debug, thiserror::Error)]
pub enum TraceStartError {
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` names a protocol baton does not send.
    #[error(
        "{variable}=`{value}` is not supported: baton exports traces over OTLP/HTTP; set it to \
         `http/protobuf` (the default) or `http/json`"
    )]
    Protocol {
        /// The variable that named it.
        variable: &'static str,
        /// What it said.
        value: String,
    },
    /// The exporter refused its settings (an endpoint that is not a URL, a bad header).
    #[error("the OTLP exporter cannot start: {0}; check the OTEL_EXPORTER_OTLP_* variables")]
    Exporter(String),
    /// Another exporter is already running in this process.
    #[error("traces are already being exported by this process")]
    AlreadyStarted,
}

/// The exporter while it runs: dropping it flushes what is queued and stops it.
pub struct Exporting {
    provider: SdkTracerProvider,
}

impl Drop for Exporting {
    fn drop(&mut self) {
        if let Err(err) = self.provider.shutdown_with_timeout(Duration::from_secs(5)) {
            tracing::warn!(%err, "traces still queued at shutdown were not all exported");
        }
    }
}

/// Starts exporting traces when `OTEL_EXPORTER_OTLP_ENDPOINT` or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (else `configured`, `[telemetry] otlp_endpoint`) is set
/// and `OTEL_SDK_DISABLED` is not `true`. The resource is `service.name` `baton` (unless
/// `OTEL_SERVICE_NAME` says otherwise) and `service.instance.id` `instance`.
pub fn start(
    configured: Option<&str>,
    instance: &str,
) -> Result<Option<Exporting>, TraceStartError> {
    let env = |name| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let from_env = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .is_some();
    if !from_env && configured.is_none() {
        return Ok(None);
    }
    let protocol = protocol(env)?;
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(protocol);
    if let (false, Some(base)) = (from_env, configured) {
        builder = builder.with_endpoint(format!("{}/v1/traces", base.trim_end_matches('/')));
    }
    let exporter = builder
        .build()
        .map_err(|e| TraceStartError::Exporter(e.to_string()))?;
    let mut resource = Resource::builder()
        .with_attribute(KeyValue::new("service.instance.id", instance.to_owned()));
    if env("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("baton");
    }
    let capacity = env("OTEL_BSP_MAX_QUEUE_SIZE")
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(QUEUE_DEFAULT);
    let mut config = BatchConfigBuilder::default().with_max_queue_size(capacity);
    if env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE").is_none() {
        config = config.with_max_export_batch_size(batch_size(capacity));
    }
    let batch = BatchSpanProcessor::builder(Counted(exporter))
        .with_batch_config(config.build())
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(Bounded {
            batch,
            capacity,
            full: AtomicBool::new(false),
        })
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("baton");
    TRACER
        .set(tracer)
        .map_err(|_| TraceStartError::AlreadyStarted)?;
    Ok(Some(Exporting { provider }))
}

/// Spans per export when `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` does not say: half the queue, so
/// the other half takes the spans ended while a batch is on its way, and each request to the
/// collector carries as many spans as that allows (the SDK's 512 sends four times as many
/// requests for the default queue, each costing more than the spans in it).
fn batch_size(capacity: usize) -> usize {
    (capacity / 2).max(1)
}

/// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`; protobuf unless
/// one says `http/json`.
fn protocol(env: impl Fn(&'static str) -> Option<String>) -> Result<Protocol, TraceStartError> {
    let named = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]
    .into_iter()
    .find_map(|variable| env(variable).map(|value| (variable, value)));
    match named {
        None => Ok(Protocol::HttpBinary),
        Some((_, value)) if value.trim() == "http/protobuf" => Ok(Protocol::HttpBinary),
        Some((_, value)) if value.trim() == "http/json" => Ok(Protocol::HttpJson),
        Some((variable, value)) => Err(TraceStartError::Protocol { variable, value }),
    }
}

/// The batch processor, counting the spans it has no room for: it drops them itself, uncounted,
/// so a span is refused here first when `capacity` spans are waiting or being exported.
#[derive(Debug)]
struct Bounded {
    batch: BatchSpanProcessor,
    capacity: usize,
    /// Whether the last span was refused, to warn once each time the queue fills.
    full: AtomicBool,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut opentelemetry_sdk::trace::Span, cx: &Context) {
        self.batch.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if QUEUED.fetch_add(1, Ordering::Relaxed) >= self.capacity {
            QUEUED.fetch_sub(1, Ordering::Relaxed);
            DROPPED.fetch_add(1, Ordering::Relaxed);
            if !self.full.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    queue = self.capacity,
                    "the trace export queue is full (the collector is slow or down); new spans \
                     are dropped until it drains; raise OTEL_BSP_MAX_QUEUE_SIZE to keep more"
                );
            }
            return;
        }
        self.full.store(false, Ordering::Relaxed);
        self.batch.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.batch.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.batch.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.batch.set_resource(resource);
    }
}

/// The OTLP exporter, counting the spans of each batch it could not deliver.
#[derive(Debug)]
struct Counted(opentelemetry_otlp::SpanExporter);

impl SpanExporter for Counted {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let exported = self.0.export(batch).await;
        QUEUED.fetch_sub(spans, Ordering::Relaxed);
        if let Err(err) = &exported {
            DROPPED.fetch_add(spans as u64, Ordering::Relaxed);
            tracing::warn!(%err, spans, "the trace collector did not take a batch; its spans are dropped");
        }
        exported
    }

    fn shutdown_with_timeout(&mut self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&mut self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_unless_json_is_asked_and_grpc_is_refused() {
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            protocol(move |name| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            })
        };
        assert!(matches!(with(&[]), Ok(Protocol::HttpBinary)));
        assert!(matches!(
            with(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]),
            Ok(Protocol::HttpJson)
        ));
        assert!(matches!(
            with(&[
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
                ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
            ]),
            Ok(Protocol::HttpBinary)
        ));
        let err = with(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).unwrap_err();
        assert!(err.to_string().contains("http/json"), "{err}");
    }
}
