//! The gateway's own short lines in answer to an event (notices, admin replies, the error
//! reply): posted through the woken bot's account as gateway lines, recorded in its transcript,
//! never running a model. Every step that owes the sender a line posts it through here, so the
//! steps and the one place that performs a stop (`handled.rs`) share it without naming each other.

use super::Inbound;
use crate::engine::{Engine, Line, say};

/// A short answer from the gateway itself (rate-limit and policy notices, admin replies),
/// delivered to the sender's chat and recorded in the bot's transcript. Boxed like the turn
/// step's run: rare, and its delivery state would otherwise sit in every event's future.
pub(crate) async fn notice(engine: &Engine, inbound: &Inbound<'_>, text: &str) {
    let line = gateway_says(engine, inbound, run_id(inbound, "notice"), "notice", text);
    Box::pin(line).await;
}

/// Post a line on the gateway's behalf through the bot's account, in answer to `inbound`.
pub(super) async fn gateway_says(
    engine: &Engine,
    inbound: &Inbound<'_>,
    run_id: String,
    stage: &'static str,
    text: &str,
) {
    let session = inbound.session();
    let line = Line {
        account: inbound.account,
        session: &session,
        run_id,
        quiet_in: inbound.chat_key.clone(),
        target: inbound.reply_target(),
        stage,
        text,
    };
    // A failure is logged and recorded by `say`; the event's outcome stands either way.
    let _ = say(engine, line).await;
}

/// The run id of a run answering `inbound`. It derives from the event, so a replay of the same
/// event reuses the same idempotency keys and cannot post twice.
pub(super) fn run_id(inbound: &Inbound<'_>, kind: &str) -> String {
    let event = &inbound.event;
    [
        kind,
        event.platform.as_str(),
        inbound.account.id.as_str(),
        event.message_id.as_str(),
    ]
    .join(":")
}
