//! `sessions_send` (alias `bots_send_message`).

use serde_json::Value;

use super::{AgentTools, error};

/// Hand the target a message; see [`crate::relay`].
pub(super) async fn call(_tools: &AgentTools, _args: Value) -> Value {
    error("sessions_send is not built yet")
}
