//! `[a2a]`: which bots are published as Agent2Agent agents (SPEC 14).

use serde::Deserialize;

/// `[a2a]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct A2aConfig {
    /// Serve the A2A routes (`/a2a/<bot>`, the agent cards) at all.
    pub enabled: bool,
    /// Bot ids or globs published as A2A agents.
    pub expose: Vec<String>,
}

impl Default for A2aConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            expose: vec!["*".into()],
        }
    }
}
