//! The real clock: `baton run` ticks the scheduler once a second with the time of day.
//!
//! A second is fine-grained enough for the shortest interval the config takes (`1s`) and for
//! cron's minutes, and a tick with nothing due costs a comparison per job. Missed ticks (a
//! suspended machine) are not replayed: the next tick sees everything due since.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use super::Scheduler;

/// Tick `scheduler` every second until `stop`.
pub(crate) async fn run_timer(scheduler: Arc<Scheduler>, stop: CancellationToken) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        for ticked in scheduler.tick(chrono::Utc::now()).await {
            tracing::debug!(bot = %ticked.bot, job = %ticked.job, outcome = ?ticked.outcome, "scheduled job due");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::testing::{echo_config, eventually, parts};

    /// The timer's first tick comes at once (it arms the jobs: their due times show), and
    /// it ends when told to stop.
    #[tokio::test]
    async fn the_timer_ticks_at_once_and_ends_when_stopped() {
        let heartbeat = "heartbeat = { every = \"30m\", target = \"none\" }\n";
        let gw = parts(&echo_config(&["hb"], heartbeat)).await;
        let stop = CancellationToken::new();
        let timer = tokio::spawn(run_timer(Arc::clone(&gw.scheduler), stop.clone()));
        eventually("the first tick arms the heartbeat", || async {
            !gw.scheduler.next_due().is_empty()
        })
        .await;
        stop.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(10), timer).await;
        assert!(ended.is_ok(), "the timer kept ticking after its stop");
    }
}
