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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use baton_contract::{Platform, StubAdapter};

    use super::super::testing::to_bot;
    use super::*;
    use crate::engine::testing::{End, Scripted, account_on, bot, bot_on};
    use crate::events::Event;
    use crate::gateway::testing::{Parts, echo_config, parts};
    use crate::pen::Arrival;

    /// Steps 9 to 13 for `@alpha hi` from `ann` in `room`, woken as `wake`, on an `alpha`
    /// account on `stub` whose backend ends as `end` (its own echo backend without one).
    async fn woken(gw: &Parts, stub: &Arc<StubAdapter>, end: Option<End>, wake: Wake) -> Turned {
        let alpha = match end {
            Some(end) => bot_on(&gw.engine, "alpha", Scripted::ends(end)),
            None => bot(&gw.engine, "alpha"),
        };
        let account = account_on(&alpha, stub);
        let event = to_bot("alpha", 1, "room", "ann", "@alpha hi");
        let inbound = gw.dispatcher.inbound(event, &account, Arrival::Fresh, None);
        run(&gw.engine, &inbound, wake).await.expect("the turn ran")
    }

    fn stub() -> Arc<StubAdapter> {
        Arc::new(StubAdapter::new(Platform::Local, "alpha"))
    }

    /// The texts `stub` was asked to post.
    fn posted(stub: &StubAdapter) -> Vec<String> {
        stub.sent().into_iter().map(|m| m.text).collect()
    }

    /// A woken bot's reply is posted in answer to the message and is what became of it; the
    /// wake is announced on the event stream before the turn.
    #[tokio::test]
    async fn a_reply_is_posted_in_answer_after_the_wake_is_announced() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let mut stream = gw.engine.events().subscribe(None).live;
        let stub = stub();
        let turned = woken(&gw, &stub, Some(End::Says("main")), Wake::Mentioned).await;
        assert_eq!(turned.handled, Handled::Replied("main".into()));
        assert_eq!((turned.wake, turned.by_budget), (Wake::Mentioned, false));
        let sent = stub.sent();
        assert_eq!(posted(&stub), ["main"]);
        assert_eq!(sent[0].reply_to.as_ref().map(|m| m.as_str()), Some("m1"));
        let first = stream.try_recv().expect("announced").event.clone();
        assert!(
            matches!(
                first,
                Event::EventReceived {
                    outcome: Received::Wake,
                    ..
                }
            ),
            "{first:?}"
        );
    }

    /// A failed turn tells the chat the configured error reply.
    #[tokio::test]
    async fn a_failed_turn_posts_the_error_reply() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let stub = stub();
        let turned = woken(&gw, &stub, Some(End::Fails), Wake::Mentioned).await;
        assert!(matches!(turned.handled, Handled::Failed(_)), "{turned:?}");
        assert_eq!(
            posted(&stub),
            [gw.engine.config().gateway.error_reply.clone()]
        );
    }

    /// With `error_reply = ""`, a failed turn posts nothing.
    #[tokio::test]
    async fn with_an_empty_error_reply_a_failed_turn_posts_nothing() {
        let config =
            echo_config(&["alpha"], "").replace("[gateway]\n", "[gateway]\nerror_reply = \"\"\n");
        let gw = parts(&config).await;
        let stub = stub();
        let turned = woken(&gw, &stub, Some(End::Fails), Wake::Mentioned).await;
        assert!(matches!(turned.handled, Handled::Failed(_)), "{turned:?}");
        assert!(posted(&stub).is_empty(), "{:?}", posted(&stub));
    }

    /// A failure only the config can mend is said as it is, for the chat's admins to act on,
    /// not as "try again".
    #[tokio::test]
    async fn a_misconfigured_backend_is_said_as_it_is() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let stub = stub();
        woken(&gw, &stub, Some(End::Refused), Wake::Mentioned).await;
        let told = posted(&stub);
        assert_eq!(told.len(), 1, "{told:?}");
        assert!(
            told[0].starts_with(
                "alpha cannot answer until its config is fixed (for the baton admins): "
            ),
            "{told:?}"
        );
    }
}
