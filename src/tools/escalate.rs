//! `escalate_to_user` and `resolve_agent_approval`.

use serde_json::Value;

use super::{AgentTools, error};

/// Post a question to the human side of the caller's originating conversation.
pub(super) async fn escalate(_tools: &AgentTools, _args: Value) -> Value {
    error("escalate_to_user is not built yet")
}

/// Approve or deny a pending approval request.
pub(super) async fn resolve(_tools: &AgentTools, _args: Value) -> Value {
    error("resolve_agent_approval is not built yet")
}
