//! After a restart: every delivery the last process left open is resumed or failed, and every
//! outcome that had not reached its sender is pushed. Nothing is dropped without a record.
//!
//! A delivery still *queued* never started, so it is simply run now. One that was *running* may
//! have done part of its work (tool calls with effects), so it is not run again: if its turn got
//! as far as an outcome in the target's transcript, that outcome stands; otherwise it is failed
//! with a reason that says why it was not retried.

use std::sync::Arc;

use super::run::{self, push_run_id};
use super::send::start;
use crate::engine::RunResult;
use crate::engine::Services;
use crate::store::{Delivery, DeliveryState, EntryKind, Notify, StoreError};

/// Pick up what the last process left. Returns how many deliveries were dealt with.
pub async fn recover(shared: &Arc<Services>) -> Result<usize, StoreError> {
    let open = shared.store().deliveries_unsettled().await?;
    for d in &open {
        match d.state {
            DeliveryState::Queued => {
                tracing::info!(run = %d.run_id, target = %d.target, "resuming a queued delivery");
                shared
                    .store()
                    .delivery_notify(&d.run_id, Notify::Pending)
                    .await?;
                start(shared, d);
            }
            DeliveryState::Running => {
                let result = interrupted(shared, d).await?;
                tracing::warn!(run = %d.run_id, target = %d.target, ?result, "settling a delivery interrupted by a restart");
                run::settle(shared, d, result, None).await;
            }
            _ => {
                let pushed = shared
                    .store()
                    .run_entries(&d.sender_session, &push_run_id(&d.run_id))
                    .await?;
                if pushed.is_empty() {
                    run::push(shared, d, &settled(d)).await;
                } else {
                    shared
                        .store()
                        .delivery_notify(&d.run_id, Notify::Done)
                        .await?;
                }
            }
        }
    }
    Ok(open.len())
}

/// What became of a run the restart cut short, judged from the target's transcript.
async fn interrupted(shared: &Services, d: &Delivery) -> Result<RunResult, StoreError> {
    let entries = shared
        .store()
        .run_entries(&d.target_session, &d.run_id)
        .await?;
    let model = |e: &crate::store::Entry| e.meta["model"].as_str().unwrap_or_default().to_owned();
    let outcome = entries.iter().rev().find_map(|e| match e.kind {
        EntryKind::Answer => Some(RunResult::Answered {
            reply: e.text.clone(),
            model: model(e),
        }),
        EntryKind::Silent => Some(RunResult::Answered {
            reply: String::new(),
            model: model(e),
        }),
        EntryKind::Failure => Some(RunResult::Failed {
            state: DeliveryState::Failed,
            reason: e.text.clone(),
        }),
        _ => None,
    });
    Ok(outcome.unwrap_or_else(|| RunResult::Failed {
        state: DeliveryState::Failed,
        reason: format!(
            "the gateway restarted while bot '{}' was working on this; it was not run again, so \
             it cannot act twice. Send it again if it is still needed.",
            d.target
        ),
    }))
}

/// The outcome a settled delivery records.
fn settled(d: &Delivery) -> RunResult {
    match d.state {
        DeliveryState::Delivered => RunResult::Answered {
            reply: d.reply.clone().unwrap_or_default(),
            model: d.model.clone().unwrap_or_default(),
        },
        state => RunResult::Failed {
            state,
            reason: d.reason.clone().unwrap_or_default(),
        },
    }
}
