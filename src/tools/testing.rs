//! What the tools' unit tests share: a bot's tools in a chat turn, and reading a result.

use serde_json::Value;

use super::AgentTools;
use crate::engine::Caller;
use crate::relay::Relay;

/// `bot`'s tools, sending through `relay`, in a turn a human woke in the local chat `room` (`run_id` set: inside that
/// turn; `None`: called from outside any turn).
pub(super) fn in_room(relay: &Relay, bot: &str, run_id: Option<&str>) -> AgentTools {
    let session = format!("bot:{bot}:local:{bot}:room")
        .parse()
        .expect("session key");
    let mut caller = Caller::from_chat(&session);
    caller.run_id = run_id.map(str::to_owned);
    AgentTools::new(relay.clone(), caller)
}

/// The error of a result that must be one.
pub(super) fn error_of(result: &Value) -> &str {
    assert_eq!(result["status"], "error", "{result}");
    result["error"].as_str().expect("an error says why")
}

/// The reason of a result that must be a refusal.
pub(super) fn refused(result: &Value) -> &str {
    assert_eq!(result["status"], "refused", "{result}");
    result["reason"]
        .as_str()
        .expect("a refusal names its reason")
}
