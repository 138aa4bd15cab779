//! Bot-to-bot traffic (SPEC.md section 5.1): `sessions_send` deliveries, their durable record,
//! and messages pushed into a session from outside a chat (a late reply, an escalation answer).

use std::sync::Arc;

use serde_json::Value;

use crate::dispatcher::Shared;
use crate::store::Origin;
use crate::tools::Caller;

/// A message for a session that did not come from its chat: another bot's late reply, a human's
/// answer to an escalation, an approval decision. It wakes the session's bot for a turn on the
/// nested lane (after whatever turn the session is running); the bot's reply is posted to the
/// session's chat when the session has one.
#[derive(Debug, Clone)]
pub struct SessionMessage {
    /// The session to wake.
    pub session: String,
    /// Who speaks: `bot:<id>` for a bot, a human's id or name.
    pub speaker: String,
    /// Human, bot or gateway.
    pub origin: Origin,
    /// The text the bot is given (already prefixed, e.g. `Message from bot 'caid': ...`).
    pub text: String,
    /// Correlates the woken turn with what caused it (a delivery's run id, an escalation id).
    pub run_id: String,
    /// Anything worth keeping in the transcript entry.
    pub meta: Value,
    /// Who the woken turn calls tools as.
    pub caller: Caller,
}

/// Wake `message.session`'s bot with `message`, in the background (tracked, so a shutdown
/// drains it).
pub fn post_to_session(shared: &Arc<Shared>, message: SessionMessage) {
    let _ = (shared, message);
    tracing::warn!("post_to_session is not built yet");
}
