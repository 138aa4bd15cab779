//! An A2A task that waits on its caller (`input-required`, SPEC 14) and goes on once answered.
//!
//! A bot that escalates in an A2A task asks the task's caller, not a chat
//! (`tools/escalate.rs`), and its turn ends: the task's delivery settles as usual while the
//! question is pending. The caller's answer (a message on the task, `http/a2a/tasks.rs`) or a
//! decision on an approval request is routed back to the bot's session like any answer
//! (`escalation::route_back`), tied to the task: the delivery is opened again ([`resume_task`])
//! and the woken turn's answer settles it ([`continued`]), so the task's state and reply still
//! come from its delivery's row.

use super::moved;
use super::run::{answer_of, change, hand_on, record};
use crate::engine::{Engine, SessionTurn, TurnPlan};
use crate::store::{Delivery, DeliveryState};
use crate::timing::now_ms;

/// Open A2A task `run_id` again for the turn an answer to its question wakes: the task as it
/// stands then, when it runs (again); `None` when it has no row or ended another way
/// (canceled, failed), which the answer does not undo.
pub async fn resume_task(engine: &Engine, run_id: &str) -> Option<Delivery> {
    let store = engine.store();
    let found = match store.delivery_resume(run_id, now_ms()).await {
        Ok(Some(d)) => {
            moved(engine, &d, DeliveryState::Running, None, None);
            Some(d)
        }
        // Opened already (the answer was taken over A2A before the turn woke).
        Ok(None) => store.delivery(run_id).await.unwrap_or_else(|err| {
            tracing::error!(run = run_id, %err, "could not read the A2A task an answer continues");
            None
        }),
        Err(err) => {
            tracing::error!(run = run_id, %err, "could not open the A2A task an answer continues");
            None
        }
    };
    found.filter(|d| d.state == DeliveryState::Running)
}

/// Take the turn an answer woke in task `d`'s session, and settle the task with its answer, as
/// its first turn's answer would have.
pub(super) async fn continued(
    engine: &Engine,
    turn: SessionTurn<'_>,
    plan: TurnPlan<'_>,
    d: &Delivery,
) {
    let answer = answer_of(turn.take_tapped(plan, &d.run_id).await);
    let change = change(d, &answer.result, None);
    let recorded = record(engine, turn, d, &answer, change, |_| None).await;
    hand_on(engine, d, answer.result, recorded).await;
}
