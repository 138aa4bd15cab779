//! Steps 9 to 13 for one woken bot: the session turn (lane, turn, outcome), then the reply
//! delivered to the event's chat; a failed turn's error reply goes out as a gateway line
//! (`gateway_line.rs`).

use serde_json::json;

use std::time::Instant;

use super::decision::Turned;
use super::gateway_line::{gateway_says, run_id};
use super::stop::{Handled, Step};
use super::{Inbound, Wake, files_in};
use crate::engine::{
    Answered, Attached, Caller, ChatReply, Engine, Heard, History, Recall, Refused, Seat,
    SessionTurn, TurnEnd, TurnFailure, TurnPlan,
};
use crate::events::Received;
use crate::lanes::Lane;
use crate::store::HistoryTake;

/// Run the woken bot's turn for `inbound`.
///
/// The turn's state (context, backend call, delivery) is boxed: only an event that wakes a bot
/// pays for it, while an inline state machine would make every event's pipeline future as big
/// as the largest turn, copied each time the runtime moves the task (BENCHMARKS.md).
/// The wake is announced on the event stream first; a full queue stops the event
/// ([`super::busy`]).
pub(crate) async fn run(engine: &Engine, inbound: &Inbound<'_>, wake: Wake) -> Step<Turned> {
    engine.events().emit(inbound.received(Received::Wake, None));
    Box::pin(run_turn(engine, inbound, wake)).await
}

async fn run_turn(engine: &Engine, inbound: &Inbound<'_>, wake: Wake) -> Step<Turned> {
    let session = inbound.session();
    let run = run_id(inbound, "in");
    let seat = Seat {
        session: &session,
        run_id: run.clone(),
        lane: Lane::Main,
    };
    let queued = Instant::now();
    let turn = match SessionTurn::enter_queued(engine, seat, inbound.arrival).await {
        Ok(turn) => turn,
        Err(Refused { journal, full }) => {
            return Err(super::busy::refuse(engine, inbound, &journal, full).await);
        }
    };
    let waited_ms = i64::try_from(queued.elapsed().as_millis()).unwrap_or(i64::MAX);
    let event = &inbound.event;
    let me = inbound.account.adapter.self_id();
    // Taken when the turn records its start, in the same store job as the inbound entry.
    let history = History::Take(HistoryTake {
        chat_key: &inbound.chat_key,
        bot: inbound.bot(),
        skip_sender: me.as_ref().map(|m| m.as_str()),
        skip_message: Some(event.message_id.as_str()),
        limit: inbound.policy.history_limit,
    });
    let files = files_in::take_in(engine, inbound, &run).await;
    let text = if files.text.is_empty() {
        event.text.clone()
    } else {
        format!("{}\n\n{}", event.text, files.text)
    };
    let speaker = &inbound.speaker;
    let mut meta = json!({
        "name": speaker.name,
        "wake": format!("{wake:?}"),
        "raw": event.raw,
    });
    if !files.files.is_empty() {
        meta["files"] = json!(files.files);
    }
    let heard = Heard {
        speaker: &speaker.label,
        name: &speaker.name,
        origin: speaker.origin,
        text: &text,
        message_id: Some(event.message_id.as_str()),
        meta,
        attached: Attached {
            files: &files.files,
            images: &files.images,
        },
    };
    let plan = TurnPlan {
        bot: &inbound.account.bot,
        caller: Caller::from_chat(&session),
        history,
        heard,
        deadline: None,
        recall: Recall::SessionTail,
        delivery: None,
    };
    let reply = ChatReply {
        account: inbound.account,
        target: inbound.reply_target(),
        answering: Some(&event.message_id),
        // An `always` bot that was not addressed shows nothing until it has text.
        typing_at: (wake != Wake::Always).then_some(&event.message_id),
        gate: None,
        asker: Some(&event.sender.id),
    };
    let Answered { end, posted } = turn.answer(plan, reply).await;
    let by_budget = matches!(end, TurnEnd::Failed(TurnFailure::Budget(_)));
    let handled = match (end, posted) {
        (TurnEnd::Reply { text, .. }, Ok(_)) => Handled::Replied(text),
        (TurnEnd::Reply { .. }, Err(err)) => Handled::Failed(err),
        // The reply had begun to stream: its posts end with the error reply already.
        (TurnEnd::Failed(err), Ok(shown)) if !shown.is_empty() => Handled::Failed(err.to_string()),
        // A used-up budget posted its notice (once per window) instead of an error reply.
        (TurnEnd::Failed(err @ TurnFailure::Budget(_)), _) => Handled::Failed(err.to_string()),
        // A stopped turn posts nothing, not even the error reply.
        (TurnEnd::Failed(err @ TurnFailure::Stopped(_)), _) => Handled::Failed(err.to_string()),
        (TurnEnd::Failed(err), _) => fail(engine, inbound, err).await,
        (TurnEnd::Silent { .. }, _) => Handled::Silent,
    };
    Ok(Turned {
        handled,
        wake,
        waited_ms,
        by_budget,
    })
}

/// The backend failed (already recorded): tell the user briefly, unless `error_reply` is empty;
/// a failure the config must fix is said as it is, for the chat's admins to act on.
async fn fail(engine: &Engine, inbound: &Inbound<'_>, err: TurnFailure) -> Handled {
    let text = match &err {
        TurnFailure::Misconfigured(why) => format!(
            "{} cannot answer until its config is fixed (for the baton admins): {why}",
            inbound.account.bot.id()
        ),
        _ => engine.config().gateway.error_reply.clone(),
    };
    if !text.trim().is_empty() {
        // The turn's own run: it posted nothing, so its idempotency keys are free.
        gateway_says(engine, inbound, run_id(inbound, "in"), "error-reply", &text).await;
    }
    Handled::Failed(err.to_string())
}
