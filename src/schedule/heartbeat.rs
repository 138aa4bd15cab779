//! A due heartbeat: the checks that come before its turn, in order.
//!
//! Quiet hours skip it until they end. Work on the bot's main lane (or its own previous
//! heartbeat, still going) holds it back without queueing it: it stays due, the skip is
//! recorded once for that occurrence, and the first tick after the work ends runs it. A
//! checklist with nothing in it skips it. Anything else starts the turn.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use chrono::{DateTime, Utc};

use super::jobs::{Job, What};
use super::prompt::{builtin_heartbeat_prompt, checklist_prompt, is_effectively_empty};
use super::run::record_skip;
use super::{Scheduler, SkipReason, Slot, TickOutcome};
use crate::lanes::Lane;

impl Scheduler {
    /// Deal with `job` (a heartbeat) due at `due`, at `now`.
    pub(super) async fn heartbeat_due(
        &self,
        job: &Arc<Job>,
        slot: &mut Slot,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> TickOutcome {
        let What::Heartbeat {
            prompt_file, quiet, ..
        } = &job.what
        else {
            unreachable!("heartbeat_due is only called for heartbeats");
        };
        let wall = self.zone.wall(now);
        if let Some(quiet) = quiet
            && quiet.contains(wall.time())
        {
            let end = self.zone.instant(quiet.end_after(wall));
            if !self.advance(job, slot, due, Some(end)).await {
                return TickOutcome::Elsewhere;
            }
            record_skip(&self.engine, job, due, SkipReason::QuietHours, "").await;
            return TickOutcome::Skipped(SkipReason::QuietHours);
        }
        let busy = if slot.running.load(Ordering::Acquire) {
            Some(SkipReason::StillRunning)
        } else if self.engine.lanes().bot_busy(Lane::Main, job.bot.id()) {
            Some(SkipReason::RequestsInFlight)
        } else {
            None
        };
        if let Some(reason) = busy {
            if slot.noted != Some((due, reason)) {
                record_skip(&self.engine, job, due, reason, "").await;
                slot.noted = Some((due, reason));
            }
            return TickOutcome::Waiting(reason);
        }
        let prompt = match prompt_file {
            None => builtin_heartbeat_prompt(),
            Some(path) => match tokio::fs::read_to_string(path).await {
                Ok(text) if is_effectively_empty(&text) => {
                    return self.skip(job, slot, due, now, SkipReason::Empty, "").await;
                }
                Ok(text) => checklist_prompt(&text),
                Err(err) => {
                    let detail = format!("{}: {err}", path.display());
                    return self
                        .skip(job, slot, due, now, SkipReason::PromptUnreadable, &detail)
                        .await;
                }
            },
        };
        self.start(job, slot, due, now, prompt).await
    }
}
