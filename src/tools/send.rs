//! `sessions_send` (alias `bots_send_message`): the arguments, then [`crate::relay::send`].

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::{AgentTools, ToolName, args};
use crate::relay::{self, SendRequest};

/// The longest a sender may ask to wait; fire-and-forget runs are bounded the same.
const MAX_TIMEOUT_SECONDS: u64 = 30 * 60;

#[derive(Debug, Deserialize)]
struct SendArgs {
    target: String,
    message: String,
    #[serde(default = "default_timeout")]
    timeout_seconds: u64,
    #[serde(default)]
    idempotency_key: Option<String>,
}

fn default_timeout() -> u64 {
    30
}

/// Hand the target a message and return what became of it.
pub(super) async fn call(tools: &AgentTools, raw: Value) -> Value {
    let a: SendArgs = match args(ToolName::SessionsSend, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    if a.message.trim().is_empty() {
        return super::error("`message` is empty; say what the other bot should do");
    }
    let request = SendRequest {
        target: a.target.trim().to_owned(),
        message: a.message,
        timeout: Duration::from_secs(a.timeout_seconds.min(MAX_TIMEOUT_SECONDS)),
        idempotency_key: a.idempotency_key.filter(|k| !k.is_empty()),
    };
    relay::send(&tools.shared, &tools.caller, request).await
}
