//! `[agent_to_agent]`, `[chains]` and `[artifacts]`: how bots talk to each other and what they hand
//! over.

use serde::Deserialize;

/// `[agent_to_agent]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct AgentToAgentConfig {
    /// Bot-to-bot messaging on or off.
    pub enabled: bool,
    /// Bot ids or globs allowed to message each other.
    pub allow: Vec<String>,
}

impl Default for AgentToAgentConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            allow: vec!["*".into()],
        }
    }
}

/// `[chains]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct ChainsConfig {
    /// The bot that coordinates chains; unset: baton coordinates round-robin.
    pub coordinator: Option<String>,
    /// Round-robin rounds when baton coordinates.
    pub rounds: u32,
    /// A stalled turn goes back to the coordinator after this long.
    pub turn_timeout_seconds: u64,
    /// Hard cap on rounds.
    pub max_rounds: u32,
}

impl Default for ChainsConfig {
    fn default() -> Self {
        Self {
            coordinator: None,
            rounds: 1,
            turn_timeout_seconds: 300,
            max_rounds: 10,
        }
    }
}

/// `[artifacts]`: the blobs bots hand each other (`artifact_put`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct ArtifactsConfig {
    /// The largest artifact accepted, in bytes; a bigger one is refused with the reason.
    pub max_bytes: u64,
}

impl Default for ArtifactsConfig {
    fn default() -> Self {
        Self {
            max_bytes: 25 * 1024 * 1024,
        }
    }
}
