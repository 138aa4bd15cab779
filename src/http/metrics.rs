//! `GET /metrics`: the gateway's counters plus the gauges read where they live (lanes, the
//! relay, the pipeline, the send guards, open connections and MCP sessions) and which instance
//! answered, in Prometheus text format.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::server::OpenConnections;
use crate::engine::Engine;
use crate::metrics::header as describe;
use crate::relay::Relay;

/// Everything, as one text page.
pub(super) async fn metrics(
    State(engine): State<Engine>,
    State(relay): State<Relay>,
    State(connections): State<Arc<OpenConnections>>,
    State(mcp_sessions): State<Arc<LocalSessionManager>>,
) -> impl IntoResponse {
    let mut out = String::with_capacity(4096);
    // Which instance answered: a scrape of several behind one address tells them apart, and
    // the id joins these series to `baton cluster status`. Its alphabet needs no escaping.
    describe(
        &mut out,
        "baton_instance_info",
        "This instance: its cluster.instance_id and version.",
        "gauge",
    );
    let _ = writeln!(
        out,
        "baton_instance_info{{instance=\"{}\",version=\"{}\"}} 1",
        engine
            .config()
            .cluster
            .instance_id
            .as_deref()
            .unwrap_or_default(),
        env!("CARGO_PKG_VERSION")
    );
    engine.metrics().render(&mut out);
    describe(
        &mut out,
        "baton_trace_spans_dropped_total",
        "Trace spans dropped: the OTLP collector did not take them, or the export queue was full.",
        "counter",
    );
    let _ = writeln!(
        out,
        "baton_trace_spans_dropped_total {}",
        crate::trace::dropped()
    );
    engine.budgets().counters().render(&mut out);

    describe(
        &mut out,
        "baton_send_refusals_total",
        "sessions_send calls refused by a guard, by reason.",
        "counter",
    );
    for (reason, n) in relay.sends().refusals() {
        let _ = writeln!(
            out,
            "baton_send_refusals_total{{reason=\"{}\"}} {n}",
            reason.as_str()
        );
    }
    let lanes = engine.lanes().load();
    describe(
        &mut out,
        "baton_lane_queued",
        "Turns waiting per lane.",
        "gauge",
    );
    for l in &lanes {
        let _ = writeln!(out, "baton_lane_queued{{lane=\"{}\"}} {}", l.lane, l.queued);
    }
    describe(
        &mut out,
        "baton_lane_running",
        "Turns running per lane.",
        "gauge",
    );
    for l in &lanes {
        let _ = writeln!(
            out,
            "baton_lane_running{{lane=\"{}\"}} {}",
            l.lane, l.running
        );
    }
    let gauges = [
        (
            "baton_deliveries_in_flight",
            "Bot-to-bot deliveries running in this process.",
            relay.waiters().in_flight(),
        ),
        (
            "baton_pipeline_in_flight",
            "Events and background turns not finished.",
            engine.tasks().len(),
        ),
        (
            "baton_http_connections_open",
            "HTTP connections open, spare ones over gateway.max_connections included.",
            connections.get(),
        ),
        (
            "baton_mcp_sessions_open",
            "MCP sessions open (at most gateway.mcp_max_sessions).",
            mcp_sessions.sessions.read().await.len(),
        ),
    ];
    for (name, help, value) in gauges {
        describe(&mut out, name, help, "gauge");
        let _ = writeln!(out, "{name} {value}");
    }
    let store = engine.store();
    describe(
        &mut out,
        "baton_store_connected",
        "1 while the store's writer has its database connection; 0 while PostgreSQL is lost \
         and it is connecting again (writes fail meanwhile).",
        "gauge",
    );
    let _ = writeln!(
        out,
        "baton_store_connected {}",
        u8::from(store.disconnected().is_none())
    );
    describe(
        &mut out,
        "baton_store_reconnects_total",
        "Times the store's writer connected to PostgreSQL again after losing its connection.",
        "counter",
    );
    let _ = writeln!(out, "baton_store_reconnects_total {}", store.reconnects());
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::extract::State;
    use axum::response::IntoResponse;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

    use super::metrics;
    use crate::gateway::testing::{echo_config, parts};

    /// The page's gauges are read where they live, from the substates the handler is given:
    /// a delivery in flight on the relay, the open connections, the MCP sessions.
    #[tokio::test]
    async fn the_gauges_are_read_from_the_substates() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let in_flight = gw.relay.waiters().running();
        let page = metrics(
            State(gw.engine.clone()),
            State(gw.relay.clone()),
            State(Arc::default()),
            State(Arc::new(LocalSessionManager::default())),
        )
        .await
        .into_response();
        let body = axum::body::to_bytes(page.into_body(), usize::MAX)
            .await
            .unwrap();
        let text = String::from_utf8(body.to_vec()).unwrap();
        for line in [
            "\nbaton_deliveries_in_flight 1\n",
            "\nbaton_http_connections_open 0\n",
            "\nbaton_mcp_sessions_open 0\n",
        ] {
            assert!(text.contains(line), "{line:?} not in:\n{text}");
        }
        drop(in_flight);
    }
}
