//! `[a2a]`: which bots are published as Agent2Agent agents, and the agents outside baton that
//! bots may call (`[[a2a.peers]]`, SPEC 14).

use serde::Deserialize;

/// `[a2a]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct A2aConfig {
    /// Serve the A2A routes (`/a2a/<bot>`, the agent cards) at all.
    pub enabled: bool,
    /// Bot ids or globs published as A2A agents.
    pub expose: Vec<String>,
    /// Agents outside baton that bots reach with `sessions_send(target = "a2a:<id>")`.
    pub peers: Vec<A2aPeer>,
}

impl Default for A2aConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            expose: vec!["*".into()],
            peers: Vec::new(),
        }
    }
}

/// One `[[a2a.peers]]`: an A2A agent outside baton.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct A2aPeer {
    /// The name bots call it by (`a2a:<id>`): like a bot id, and no bot's.
    pub id: String,
    /// Its JSON-RPC endpoint (the `url` of its card's interface).
    pub url: String,
    /// The environment variable holding the bearer token it expects, if any.
    #[serde(default)]
    pub token_env: Option<String>,
    /// The longest one call to it may take before it counts as failed.
    #[serde(default = "peer_timeout")]
    pub timeout_seconds: u64,
}

fn peer_timeout() -> u64 {
    300
}
