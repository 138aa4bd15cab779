//! The target's side of a delivery: its turn on the nested lane, then settling the outcome and
//! handing it to whoever is responsible for it.

use std::sync::Arc;

use serde_json::{Value, json};

use super::handoff::{self, Report};
use super::{Committing, Finished, Handing, Relay, RunResult};
use super::{SessionMessage, from_bot, moved, ping_pong, post_to_session};
use crate::backend::Usage;
use crate::engine::{
    Attached, Caller, Engine, Heard, History, Recall, Seat, SessionTurn, Stop, TurnEnd,
    TurnFailure, TurnPlan,
};
use crate::lanes::Lane;
use crate::roster::Bot;
use crate::store::{
    Delivery, DeliveryChange, DeliveryState, EntryKind, Notify, Origin, StoreError,
};
use crate::timing::now_ms;
use crate::trace::{Span, in_span};

/// Run the target's turn for `delivery` and settle it. Spawned; the sender (if it waits) is
/// parked in the relay meanwhile.
pub(super) async fn run(relay: Relay, delivery: Delivery) {
    let _counted = relay.waiters().running();
    let engine = relay.engine();
    let d = &delivery;
    // Dropped unhanded on every other way out: a sender waiting here then reads the row.
    let handing = relay.waiters().handing(&d.run_id);
    // The target's turn, or the peer's request, is a child of the sender's `sessions_send`,
    // on whichever instance runs it.
    let traced = Span::continued(d.trace_parent.as_deref());
    if d.target_session.a2a_out_peer().is_some() {
        let call = super::a2a_out::call(relay.peers(), engine.config(), d);
        let result = in_span!(traced, call);
        let change = change(d, &result, None);
        let settled_ms = change.at_ms;
        // A peer's answer is text alone, and its row keeps no report: a sender waiting here
        // is handed it rather than sent to read the row back, as soon as the settle ran.
        let moved = engine.store().delivery_settle_early(change).await;
        let moved = moved.map(|(notify, committed)| (notify, committed.answer()));
        let recorded = committed(moved, |notify| {
            offer(handing, notify, Some(Value::Null), &result, settled_ms)
        })
        .await;
        return hand_on(engine, d, result, recorded).await;
    }
    let Some(bot) = engine.roster().bot(&d.target) else {
        let gone = format!("bot `{}` is no longer configured", d.target);
        return settle(engine, d, failed(gone), None).await;
    };
    let seat = Seat {
        session: &d.target_session,
        run_id: d.run_id.clone(),
        lane: Lane::Nested,
    };
    // Before the session is taken: a cancel while the run waits for it is heard.
    let notices = engine.store().subscribe();
    let turn = SessionTurn::enter(engine, seat).await;
    let turns = super::cancel::heeding(engine, &d.run_id, notices, turns(engine, &turn, bot, d));
    let (answer, report) = in_span!(traced, turns);
    // A run that made nothing but text leaves its row nothing a sender here must read back.
    let handed_report = turn.journal().made_nothing().then(|| report.clone());
    let change = change(d, &answer.result, Some(report));
    let settled_ms = change.at_ms;
    let recorded = record(engine, turn, d, &answer, change, |notify| {
        offer(handing, notify, handed_report, &answer.result, settled_ms)
    })
    .await;
    hand_on(engine, d, answer.result, recorded).await;
}

/// Keep the outcome `change` with the answer the turn spoke (if any), queued while `turn` still
/// holds the session: its next turn is given this answer, and does not wait for its commit.
/// `ran` is told the row's notify state once the settle ran, before it is committed; what it
/// leaves to hand over once committed is handed then.
pub(super) async fn record(
    engine: &Engine,
    turn: SessionTurn<'_>,
    d: &Delivery,
    answer: &Answer,
    change: DeliveryChange,
    ran: impl FnOnce(Option<Notify>) -> Option<Committing>,
) -> Result<Option<Notify>, StoreError> {
    match &answer.spoken {
        Some(spoken) => {
            let meta = answer_meta(d, &spoken.model);
            let queued = turn.journal().answered(&spoken.text, meta, change).await;
            // Queued: whatever the session's next turn records comes after it.
            drop(turn);
            let moved = match queued {
                Ok(queued) => queued.ran().await,
                Err(err) => Err(err),
            };
            committed(moved, ran).await
        }
        None => {
            let settled = engine.store().delivery_settle(change).await;
            drop(turn);
            // Committed already.
            if let Ok(notify) = settled
                && let Some(committing) = ran(notify)
            {
                committing.hand();
            }
            settled
        }
    }
}

/// Once a settle `moved` the row (run, not yet committed): `ran` told the row's notify state,
/// then the commit's answer, and what `ran` left to hand over once committed handed then.
/// Whatever the sender does with an outcome handed before is written after the settle, and
/// nothing it posts goes out before a later commit.
async fn committed(
    moved: Result<(Option<Notify>, impl Future<Output = Result<(), StoreError>>), StoreError>,
    ran: impl FnOnce(Option<Notify>) -> Option<Committing>,
) -> Result<Option<Notify>, StoreError> {
    let (notify, committed) = moved?;
    let committing = ran(notify);
    let committed = committed.await.map(|()| notify);
    if let (Ok(_), Some(committing)) = (&committed, committing) {
        committing.hand();
    }
    committed
}

/// Hand the outcome to a sender waiting here when the settle moved the row with nobody given
/// up (`Some(Notify::None)`) and the run made nothing its row would add (`report` kept), at
/// `settled_ms`: now, or what is left to hand over once the settle is committed.
fn offer(
    handing: Handing<'_>,
    notify: Option<Notify>,
    report: Option<Value>,
    result: &RunResult,
    settled_ms: i64,
) -> Option<Committing> {
    let (Some(Notify::None), Some(report)) = (notify, report) else {
        return None;
    };
    let result = result.clone();
    handing.hand(Finished {
        result,
        report,
        settled_ms,
    })
}

/// One turn's answer to a delivery. What it said is not on record yet: the last answer is kept
/// with the delivery's outcome, in the same store job, whatever the outcome.
pub(super) struct Answer {
    pub(super) result: RunResult,
    usage: Option<Usage>,
    /// What the bot replied (text, or files alone); `None` when it stayed silent or failed.
    spoken: Option<Spoken>,
}

/// A reply not yet on record, and the model that wrote it.
struct Spoken {
    text: String,
    model: String,
}

/// The target's turns for `d` (a second one, told what was wrong, when its answer does not
/// match the expected output): the last answer, and the run's report.
async fn turns(
    engine: &Engine,
    turn: &SessionTurn<'_>,
    bot: &Arc<Bot>,
    d: &Delivery,
) -> (Answer, Value) {
    // Marked running by the turn's start, in its store job.
    moved(engine, d, DeliveryState::Running, None, None);
    let speaker = super::speaker(d);
    let text = handoff::brief(engine, d).await;
    let heard = Heard {
        attached: Attached::NONE,
        speaker: &speaker,
        name: &speaker,
        origin: Origin::Bot,
        text: &text,
        message_id: None,
        meta: json!({"name": speaker, "sender": d.sender, "run_id": d.run_id, "depth": d.depth,
                     "artifacts": d.artifacts_in}),
    };
    let mut answer = answer(turn, bot, d, heard, Some(&d.run_id)).await;
    let mut report = Report::default();
    if let (Some(schema), RunResult::Answered { reply, .. }) = (&d.expect, &answer.result) {
        match handoff::validate(schema, reply) {
            Ok(output) => report.output = Some(output),
            Err(errors) => {
                if let Some(spoken) = &answer.spoken {
                    // The second turn is told what was wrong with this answer: it is given it.
                    let meta = answer_meta(d, &spoken.model);
                    let journal = turn.journal();
                    journal.bot_did(EntryKind::Answer, &spoken.text, meta).await;
                }
                // One more turn, told what was wrong; its answer stands or falls.
                let retry = handoff::again(&errors);
                let heard = Heard {
                    attached: Attached::NONE,
                    speaker: "baton",
                    name: "baton",
                    origin: Origin::Gateway,
                    text: &retry,
                    message_id: None,
                    meta: json!({"name": "baton", "run_id": d.run_id, "invalid": errors}),
                };
                let second = self::answer(turn, bot, d, heard, None).await;
                let usage = match (answer.usage, second.usage) {
                    (Some(a), Some(b)) => Some(a.plus(b)),
                    (a, b) => a.or(b),
                };
                let result = match second.result {
                    RunResult::Answered { reply, model } => {
                        match handoff::validate(schema, &reply) {
                            Ok(output) => {
                                report.output = Some(output);
                                RunResult::Answered { reply, model }
                            }
                            Err(errors) => {
                                // Still kept on record (`spoken`), with the failure.
                                let reason = format!(
                                    "the answer did not match the expected JSON Schema, twice: {}",
                                    errors.join("; ")
                                );
                                report.errors = errors;
                                RunResult::Failed {
                                    state: DeliveryState::InvalidOutput,
                                    reason,
                                }
                            }
                        }
                    }
                    failed => failed,
                };
                answer = Answer {
                    result,
                    usage,
                    spoken: second.spoken,
                };
            }
        }
    }
    report.usage = answer.usage;
    report.tool_calls = turn.journal().tool_calls();
    let report = serde_json::to_value(&report).unwrap_or_default();
    (answer, report)
}

/// One turn of the target for `d`, woken by `heard` (the first marks `delivery` running).
async fn answer(
    turn: &SessionTurn<'_>,
    bot: &Arc<Bot>,
    d: &Delivery,
    heard: Heard<'_>,
    delivery: Option<&str>,
) -> Answer {
    let plan = TurnPlan {
        bot,
        caller: caller_of(d),
        history: History::NONE,
        heard,
        // The target bot's own turn limit: a sender that stops waiting does not shorten it.
        deadline: None,
        recall: Recall::SessionTail,
        delivery,
    };
    // An A2A caller may follow the task's stream: it hears the reply as it is written.
    let end = match d.sender_session.a2a_peer() {
        Some(_) => turn.take_tapped(plan, &d.run_id).await,
        None => turn.take(plan).await,
    };
    answer_of(end)
}

/// What a turn answering a delivery amounted to, from its end.
pub(super) fn answer_of(end: TurnEnd) -> Answer {
    let (result, usage, spoken) = match end {
        TurnEnd::Reply { text, model, usage } => {
            let spoken = Spoken {
                text: text.clone(),
                model: model.clone(),
            };
            let result = RunResult::Answered { reply: text, model };
            (result, usage, Some(spoken))
        }
        TurnEnd::Silent { model, usage } => (
            RunResult::Answered {
                reply: String::new(),
                model,
            },
            usage,
            None,
        ),
        TurnEnd::Failed(TurnFailure::TimedOut(limit)) => (
            RunResult::Failed {
                state: DeliveryState::TimedOut,
                reason: TurnFailure::TimedOut(limit).to_string(),
            },
            None,
            None,
        ),
        TurnEnd::Failed(TurnFailure::Budget(budget)) => (
            RunResult::Failed {
                state: DeliveryState::Refused,
                reason: crate::budget::refusal_reason(&budget),
            },
            None,
            None,
        ),
        TurnEnd::Failed(TurnFailure::Stopped(Stop::Canceled)) => (
            RunResult::Failed {
                state: DeliveryState::Canceled,
                reason: Stop::Canceled.to_string(),
            },
            None,
            None,
        ),
        TurnEnd::Failed(err) => (failed(err.to_string()), None, None),
    };
    Answer {
        result,
        usage,
        spoken,
    }
}

/// What an answer's transcript entry keeps besides its text.
fn answer_meta(d: &Delivery, model: &str) -> Value {
    json!({"to": d.sender, "model": model})
}

/// The target's turn runs as itself, one hop deeper, and may not send back to the sender.
fn caller_of(d: &Delivery) -> Caller {
    Caller {
        bot: d.target.clone(),
        session: d.target_session.clone(),
        depth: d.depth,
        passive_to: Some(d.sender.clone()),
        origin: d.origin.clone(),
        run_id: None,
        trigger: d.trigger.clone(),
    }
}

fn failed(reason: String) -> RunResult {
    RunResult::Failed {
        state: DeliveryState::Failed,
        reason,
    }
}

/// Record the outcome, with the run's `report` when it got as far as one (in the same job),
/// and hand it on ([`hand_on`]).
pub(super) async fn settle(
    engine: &Engine,
    d: &Delivery,
    result: RunResult,
    report: Option<Value>,
) {
    let recorded = engine
        .store()
        .delivery_settle(change(d, &result, report))
        .await;
    hand_on(engine, d, result, recorded).await;
}

/// The change that settles `d` with `result`, keeping the run's `report`.
pub(super) fn change(d: &Delivery, result: &RunResult, report: Option<Value>) -> DeliveryChange {
    let mut change = match result {
        RunResult::Answered { reply, model } => DeliveryChange {
            reply: Some(reply.clone()),
            model: Some(model.clone()),
            ..DeliveryChange::to(&d.run_id, DeliveryState::Delivered, now_ms())
        },
        RunResult::Failed { state, reason } => DeliveryChange {
            reason: Some(reason.clone()),
            ..DeliveryChange::to(&d.run_id, *state, now_ms())
        },
    };
    change.result = report;
    change
}

/// Once the outcome is `recorded`: if the sender stopped waiting (or never did), push it to
/// the sender's session, else start the ping-pong exchange when one is configured. Which of
/// the two is the row's to say, not this process's: the sender may be waiting on another
/// instance (`waiters.rs`).
pub(super) async fn hand_on(
    engine: &Engine,
    d: &Delivery,
    result: RunResult,
    recorded: Result<Option<Notify>, StoreError>,
) {
    let notify = match recorded {
        Ok(None) => {
            tracing::warn!(run = %d.run_id, "the delivery was settled before its run ended; its outcome stands");
            return;
        }
        Ok(Some(notify)) => notify,
        Err(err) => {
            // Not on record: pushing it may tell the sender twice, but never not at all.
            tracing::error!(run = %d.run_id, %err, "could not record the delivery's outcome");
            Notify::Pending
        }
    };
    let (state, reason, model) = match &result {
        RunResult::Answered { model, .. } => (DeliveryState::Delivered, None, Some(model.as_str())),
        RunResult::Failed { state, reason } => (*state, Some(reason.as_str()), None),
    };
    moved(engine, d, state, reason, model);
    if notify == Notify::Pending {
        push(engine, d, &result).await;
    } else if let (RunResult::Answered { reply, .. }, None) =
        (&result, d.target_session.a2a_out_peer())
    {
        ping_pong::start(engine, d, reply);
    }
}

/// Tell the sender's session the outcome nobody waited for: it arrives as a message from the
/// target (or from baton, for a failure) and wakes the sender.
pub(super) async fn push(engine: &Engine, d: &Delivery, result: &RunResult) {
    if d.sender_session.a2a_peer().is_some() {
        // An external A2A agent reads its task; no session of its stands to be woken.
        if let Err(err) = engine
            .store()
            .delivery_notify(&d.run_id, Notify::Done)
            .await
        {
            tracing::error!(run = %d.run_id, %err, "could not record that the A2A task was settled");
        }
        return;
    }
    let (speaker, origin, text) = match result {
        RunResult::Answered { reply, .. } => {
            let reply = if reply.is_empty() {
                "(no reply)"
            } else {
                reply
            };
            let text = format!("[reply to your sessions_send, run {}] {reply}", d.run_id);
            match d.target_session.a2a_out_peer() {
                Some(peer) => (
                    format!("a2a:{peer}"),
                    Origin::Bot,
                    format!("Message from A2A agent '{peer}': {text}"),
                ),
                None => (
                    format!("bot:{}", d.target),
                    Origin::Bot,
                    from_bot(&d.target, &text),
                ),
            }
        }
        RunResult::Failed { state, reason } => {
            let to = match d.target_session.a2a_out_peer() {
                Some(peer) => format!("A2A agent '{peer}'"),
                None => format!("bot '{}'", d.target),
            };
            (
                "baton".to_owned(),
                Origin::Gateway,
                format!(
                    "Message from baton: your sessions_send to {to} (run {}) ended {state}: {reason}",
                    d.run_id
                ),
            )
        }
    };
    let caller = Caller {
        bot: d.sender.clone(),
        session: d.sender_session.clone(),
        depth: d.depth.saturating_sub(1).max(1),
        passive_to: None,
        origin: d.origin.clone(),
        run_id: None,
        trigger: d.trigger.clone(),
    };
    post_to_session(
        engine,
        SessionMessage {
            session: d.sender_session.clone(),
            speaker: speaker.clone(),
            origin,
            text,
            run_id: push_run_id(&d.run_id),
            meta: json!({"name": speaker, "in_reply_to": d.run_id, "from": d.target}),
            caller,
            delivery: Some(d.run_id.clone()),
            trace_parent: d.trace_parent.clone(),
            task: None,
        },
    );
}

/// The run id of the sender's turn woken by a pushed outcome: derived, so a restart can tell
/// whether the push already happened.
pub(super) fn push_run_id(run_id: &str) -> String {
    format!("reply:{run_id}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::testing::{
        Parts, begun, echo_config, new_delivery, parts, room_texts, until_idle,
    };
    use crate::store::{NewDelivery, SendMode};

    async fn two_bots() -> Parts {
        parts(&echo_config(&["alpha", "beta"], "")).await
    }

    async fn row(engine: &Engine, run_id: &str) -> Delivery {
        engine.store().delivery(run_id).await.unwrap().unwrap()
    }

    /// Nobody waits: the answer is settled with its report, and pushed to the sender's session,
    /// whose chat sees the sender's turn on it.
    #[tokio::test]
    async fn an_answer_nobody_waits_for_is_settled_and_pushed() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        let d = begun(engine, new_delivery("r1", "alpha", "beta", "ping"), None).await;
        run(gw.relay.clone(), d).await;
        until_idle(engine).await;
        let d = row(engine, "r1").await;
        assert_eq!(
            (d.state, d.reply.as_deref(), d.model.as_deref(), d.notify),
            (
                DeliveryState::Delivered,
                Some("ping"),
                Some("echo"),
                Notify::Done
            )
        );
        assert_eq!(d.result.unwrap()["tool_calls"], json!(0));
        assert_eq!(
            room_texts(&gw, "room").await,
            ["[reply to your sessions_send, run r1] ping"]
        );
    }

    /// A sender waiting gets the outcome from the row (or handed over): nothing is pushed.
    #[tokio::test]
    async fn an_answer_a_sender_waits_for_is_not_pushed() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        let waited = NewDelivery {
            mode: SendMode::Wait,
            ..new_delivery("r1", "alpha", "beta", "ping")
        };
        let d = begun(engine, waited, None).await;
        run(gw.relay.clone(), d).await;
        until_idle(engine).await;
        let d = row(engine, "r1").await;
        assert_eq!(
            (d.state, d.notify),
            (DeliveryState::Delivered, Notify::None)
        );
        assert!(room_texts(&gw, "room").await.is_empty());
    }

    /// A delivery to a bot taken out of the config fails, and the sender is told by baton.
    #[tokio::test]
    async fn a_target_no_longer_configured_fails_and_the_sender_is_told() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        let d = begun(engine, new_delivery("r1", "alpha", "gone", "hi"), None).await;
        run(gw.relay.clone(), d).await;
        until_idle(engine).await;
        let d = row(engine, "r1").await;
        let reason = "bot `gone` is no longer configured";
        assert_eq!(
            (d.state, d.reason.as_deref()),
            (DeliveryState::Failed, Some(reason))
        );
        assert_eq!(
            room_texts(&gw, "room").await,
            [format!(
                "Message from baton: your sessions_send to bot 'gone' (run r1) ended failed: \
                 {reason}"
            )]
        );
    }

    /// An answer that misses the expected schema gets one more turn, told what was wrong; a
    /// second miss settles it `invalid_output` with the errors in its report.
    #[tokio::test]
    async fn an_answer_missing_the_schema_twice_is_invalid_output() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        let expecting = NewDelivery {
            expect: Some(json!({"type": "object", "required": ["vendors"]})),
            ..new_delivery("r1", "alpha", "beta", "list the vendors")
        };
        let d = begun(engine, expecting, None).await;
        run(gw.relay.clone(), d).await;
        until_idle(engine).await;
        let d = row(engine, "r1").await;
        assert_eq!(d.state, DeliveryState::InvalidOutput);
        let reason = d.reason.unwrap_or_default();
        assert!(
            reason.starts_with("the answer did not match the expected JSON Schema, twice: "),
            "{reason}"
        );
        let errors = &d.result.unwrap()["errors"];
        assert!(errors.as_array().is_some_and(|e| !e.is_empty()), "{errors}");
        let answers = engine
            .store()
            .run_entries(&d.target_session, "r1")
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == EntryKind::Answer)
            .count();
        assert_eq!(answers, 2, "both answers are on record");
    }

    /// A delivery settled while its run went on (canceled, say) keeps that outcome: the run's
    /// answer neither replaces it nor is pushed.
    #[tokio::test]
    async fn an_outcome_settled_before_the_run_ended_stands() {
        let gw = two_bots().await;
        let engine = &gw.engine;
        let d = begun(engine, new_delivery("r1", "alpha", "beta", "ping"), None).await;
        let canceled = DeliveryChange::to("r1", DeliveryState::Canceled, now_ms());
        engine.store().delivery_settle(canceled).await.unwrap();
        run(gw.relay.clone(), d).await;
        until_idle(engine).await;
        let d = row(engine, "r1").await;
        assert_eq!((d.state, d.reply), (DeliveryState::Canceled, None));
        assert!(room_texts(&gw, "room").await.is_empty());
    }
}
