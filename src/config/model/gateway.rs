//! `[gateway]`, `[store]` and `[cluster]`: the process, its database, and the instances sharing it.

use serde::Deserialize;

/// `[gateway]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct GatewayConfig {
    /// HTTP listen address.
    pub listen: String,
    /// SQLite file; `:memory:` for throwaway runs.
    pub database: String,
    /// Env var holding a `postgres://` URL: when set, the store is that PostgreSQL database
    /// instead of the SQLite file.
    pub database_url_env: Option<String>,
    /// Env var holding the bearer token for every route but the webhooks and health checks;
    /// unset means this machine only.
    pub api_token_env: Option<String>,
    /// The address platforms and peers reach baton at (behind a reverse proxy), such as
    /// `https://baton.example.com`; `baton setup` writes webhook URLs under it, and Telegram
    /// webhooks are registered under it.
    pub public_url: Option<String>,
    /// A reply equal to this (trimmed) is a silent turn.
    pub silent_token: String,
    /// What the user sees when a backend fails; empty means say nothing.
    pub error_reply: String,
    /// A turn running longer than this is cut off and recorded as failed.
    pub turn_timeout_seconds: u64,
    /// On shutdown, how long in-flight turns may finish before the process exits.
    pub drain_seconds: u64,
    /// The clock cron schedules and quiet hours are read in: `local`, `UTC` or an offset such
    /// as `+08:00`.
    pub timezone: String,
    /// Seconds a new connection has to deliver its first request's headers.
    pub header_timeout_seconds: u64,
    /// Seconds a kept-alive connection may wait for (the headers of) its next request.
    pub idle_timeout_seconds: u64,
    /// Seconds a request body may take to arrive in full, counted from its headers.
    pub body_timeout_seconds: u64,
    /// Connections served at once; the ones over it get only `/healthz`, `/readyz` and webhooks.
    pub max_connections: usize,
    /// MCP sessions open at once; an `initialize` over it is refused.
    pub mcp_max_sessions: usize,
    /// Bytes an MCP `initialize` request may have: the client info a session keeps.
    pub mcp_max_init_bytes: usize,
    /// Seconds an MCP session may go unused before it expires and its memory is freed.
    pub mcp_session_idle_seconds: u64,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8642".into(),
            database: "baton.db".into(),
            database_url_env: None,
            api_token_env: None,
            public_url: None,
            silent_token: "NO_REPLY".into(),
            error_reply: "Sorry, I could not answer that just now (my model backend failed). \
                          Please try again in a moment."
                .into(),
            turn_timeout_seconds: 300,
            drain_seconds: 10,
            timezone: "local".into(),
            header_timeout_seconds: 10,
            idle_timeout_seconds: 60,
            body_timeout_seconds: 30,
            max_connections: 512,
            mcp_max_sessions: 64,
            mcp_max_init_bytes: 16 * 1024,
            mcp_session_idle_seconds: 300,
        }
    }
}

/// `[store]`: the SQLite file's upkeep.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct StoreConfig {
    /// The write-ahead log is kept under this many MiB (emptied once it passes half of it).
    pub wal_limit_mb: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            wal_limit_mb: crate::store::DEFAULT_WAL_LIMIT_MB,
        }
    }
}

/// `[cluster]`: several instances sharing one PostgreSQL database (on SQLite the one instance
/// holds every account, through the same leases).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct ClusterConfig {
    /// This instance's name in the lease table; default: the host name and the process id.
    pub instance_id: Option<String>,
    /// An account whose holder stops renewing its lease is taken by another instance after
    /// this many seconds.
    pub lease_seconds: u64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            instance_id: None,
            lease_seconds: 15,
        }
    }
}

/// `[telemetry]`: where traces go when no `OTEL_EXPORTER_OTLP_*ENDPOINT` variable says
/// (docs/tracing.md).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP collector's base URL (traces go to `<it>/v1/traces`); unset: no traces
    /// unless the environment names a collector.
    pub otlp_endpoint: Option<String>,
}
