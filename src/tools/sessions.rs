//! `sessions_list`, `sessions_history`, `session_status`.

use serde_json::Value;

use super::{AgentTools, error};

/// The sessions the store holds.
pub(super) async fn list(_tools: &AgentTools, _args: Value) -> Value {
    error("sessions_list is not built yet")
}

/// One session's transcript.
pub(super) async fn history(_tools: &AgentTools, _args: Value) -> Value {
    error("sessions_history is not built yet")
}

/// One session's state.
pub(super) async fn status(_tools: &AgentTools, _args: Value) -> Value {
    error("session_status is not built yet")
}
