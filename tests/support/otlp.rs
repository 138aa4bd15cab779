//! A small OTLP/HTTP trace collector on loopback: it decodes what baton exports (the real
//! protobuf with `opentelemetry-proto`'s types, or OTLP/JSON) into flat [`Span`]s a test can
//! search, each with its resource's attributes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message as _;
use serde_json::Value;

use super::process::eventually;

/// One received span.
#[derive(Debug, Clone)]
pub struct Span {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root.
    pub parent_span_id: String,
    pub name: String,
    pub attributes: HashMap<String, Value>,
    /// The spans it links to, as `(trace id, span id)`.
    pub links: Vec<(String, String)>,
    /// Its resource's attributes (`service.name`, `service.instance.id`).
    pub resource: HashMap<String, Value>,
}

impl Span {
    /// The string attribute `key`, or "".
    pub fn text(&self, key: &str) -> &str {
        self.attributes
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

/// The collector: POST `<endpoint>/v1/traces`.
pub struct Collector {
    /// `http://127.0.0.1:PORT`: what `OTEL_EXPORTER_OTLP_ENDPOINT` is set to.
    pub endpoint: String,
    spans: Arc<Mutex<Vec<Span>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Collector {
    pub async fn start() -> Collector {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&spans);
        let app = Router::new().route(
            "/v1/traces",
            post(move |headers: HeaderMap, body: Bytes| {
                let kept = Arc::clone(&kept);
                async move { receive(&kept, &headers, &body) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("collector serves");
        });
        Collector {
            endpoint,
            spans,
            task,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits until `found` picks something out of the spans received.
    pub async fn wait_for<T>(&self, what: &str, found: impl Fn(&[Span]) -> Option<T>) -> T {
        eventually(Duration::from_secs(20), what, || {
            let got = found(&self.spans());
            async move { got }
        })
        .await
    }

    /// The spans of trace `trace_id`.
    pub fn trace(&self, trace_id: &str) -> Vec<Span> {
        self.spans()
            .into_iter()
            .filter(|s| s.trace_id == trace_id)
            .collect()
    }
}

fn receive(kept: &Mutex<Vec<Span>>, headers: &HeaderMap, body: &[u8]) -> (StatusCode, Vec<u8>) {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let request = if json {
        serde_json::from_slice::<ExportTraceServiceRequest>(body).map_err(|e| e.to_string())
    } else {
        ExportTraceServiceRequest::decode(body).map_err(|e| e.to_string())
    };
    let request = match request {
        Ok(request) => request,
        Err(err) => return (StatusCode::BAD_REQUEST, err.into_bytes()),
    };
    let mut spans = kept.lock().unwrap();
    for resource_spans in request.resource_spans {
        let resource = resource_spans
            .resource
            .map(|r| attributes(&r.attributes))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                spans.push(Span {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    name: span.name,
                    attributes: attributes(&span.attributes),
                    links: span
                        .links
                        .iter()
                        .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
                        .collect(),
                    resource: resource.clone(),
                });
            }
        }
    }
    (StatusCode::OK, Vec::new())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(pairs: &[KeyValue]) -> HashMap<String, Value> {
    pairs
        .iter()
        .map(|kv| (kv.key.clone(), value(kv.value.as_ref())))
        .collect()
}

fn value(value: Option<&AnyValue>) -> Value {
    match value.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => Value::from(s.clone()),
        Some(any_value::Value::IntValue(n)) => Value::from(*n),
        Some(any_value::Value::BoolValue(b)) => Value::from(*b),
        Some(any_value::Value::DoubleValue(d)) => Value::from(*d),
        other => Value::from(format!("{other:?}")),
    }
}
