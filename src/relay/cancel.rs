//! Canceling a delivery its sender no longer wants (an A2A `CancelTask`): its turn is stopped
//! where it runs here, or, not started, it is settled `canceled` before it can start. Either
//! way the row says `canceled` and nothing of the run is posted after.

use std::time::Duration;

use super::{Relay, moved, settled};
use crate::store::{Delivery, DeliveryChange, DeliveryState, StoreError};
use crate::timing::now_ms;

/// How long a stopped turn may take to put its end on record.
const STOPPED_WITHIN: Duration = Duration::from_secs(10);

/// Cancel run `run_id`: the delivery as it stands afterwards (`None`: no such run). A run that
/// already ended keeps its outcome.
pub async fn cancel(relay: &Relay, run_id: &str) -> Result<Option<Delivery>, StoreError> {
    let engine = relay.engine();
    let Some(d) = engine.store().delivery(run_id).await? else {
        return Ok(None);
    };
    if d.state.is_settled() {
        return Ok(Some(d));
    }
    if engine.running().cancel_run(run_id) == 0 {
        // Not running here: settled now, so a run that starts (here or on another instance)
        // finds it over, and one running elsewhere finds its outcome refused by the record.
        let reason = crate::engine::Stop::Canceled.to_string();
        let change = DeliveryChange {
            reason: Some(reason.clone()),
            ..DeliveryChange::to(run_id, DeliveryState::Canceled, now_ms())
        };
        if engine.store().delivery_settle(change).await?.is_some() {
            moved(engine, &d, DeliveryState::Canceled, Some(&reason), None);
        }
    }
    settled(relay, run_id, STOPPED_WITHIN).await
}
