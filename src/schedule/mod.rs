//! Scheduled turns: each bot's heartbeat and cron entries, run on the `cron` lane.
//!
//! The [`Scheduler`] has no clock of its own. [`Scheduler::tick`] is given the time and does
//! whatever fell due by then; `baton run` calls it every second with the real time
//! (`timer.rs`), and tests call it with the times they choose, so nothing waits for a real
//! half hour to pass.
//!
//! At a tick, a job whose due time has come is dealt with once:
//!
//! ```text
//!  any job ─▶ bot paused in the target chat? ──yes──▶ skip `paused`
//!                 │ no
//!                 ▼
//!  heartbeat ─▶ quiet hours? ──yes──▶ skip `quiet-hours`, due again when they end
//!                 │ no
//!                 ▼
//!             bot busy on the main lane (or its last heartbeat still running)?
//!                 │ yes: skip `requests-in-flight` (recorded once), stays due: runs at the
//!                 │      first tick after the work ends; never queued behind it
//!                 ▼ no
//!             checklist effectively empty? ──yes──▶ skip `empty`
//!                 │ no
//!                 ▼
//!             turn on the cron lane ─▶ HEARTBEAT_OK? not delivered ─▶ same as last (24 h)?
//!                                      suppressed `duplicate` ─▶ posted (in a thread with `>>`)
//!
//!  cron entry ─▶ turn on the cron lane ─▶ posted
//! ```
//!
//! Due times live in the store (`schedule_jobs`), so a restart neither fires every heartbeat at
//! once nor forgets a cron slot that passed while the gateway was down (it runs once, late).
//! The first tick after a start arms the jobs the store does not know. The scheduler's
//! [`Board`] shows every job's next due time to whoever asks (`/baton status`).
//!
//! Several instances on one database each tick every job, and the stored due time decides who
//! deals with an occurrence: before running or skipping it, an instance moves the stored time
//! on from the one it saw (`Store::schedule_advance`, a conditional write). One instance wins;
//! the others learn the new due time and report [`TickOutcome::Elsewhere`]. No instance is the
//! scheduler, so none has to be handed the role when one dies: the survivors keep ticking, and
//! an occurrence the dead one had claimed but not finished is not run again.

mod heartbeat;
mod jobs;
mod monitor;
mod prompt;
mod run;
mod timer;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};

pub use jobs::HEARTBEAT_JOB;
pub use monitor::REPLY_DIRECTIVE;
pub use prompt::{builtin_heartbeat_prompt, is_effectively_empty};
pub(crate) use timer::run_timer;

use self::jobs::{Job, What};
use self::run::{Occurrence, Running};
use crate::engine::Engine;
use crate::store::{Advanced, NEVER_DUE_MS, ScheduleRow};
use crate::timing::{Board, NextDue, Place, Zone};

/// Why a due heartbeat did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Inside the bot's quiet hours.
    QuietHours,
    /// The bot has turns queued or running on the main lane.
    RequestsInFlight,
    /// The bot's previous heartbeat is still queued or running.
    StillRunning,
    /// The checklist holds only headings and empty checkboxes.
    Empty,
    /// The checklist file could not be read.
    PromptUnreadable,
    /// The bot is paused in the target chat (`/baton pause`).
    Paused,
}

impl SkipReason {
    /// The name in the transcript (`reason`) and in `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::QuietHours => "quiet-hours",
            SkipReason::RequestsInFlight => "requests-in-flight",
            SkipReason::StillRunning => "still-running",
            SkipReason::Empty => "empty",
            SkipReason::PromptUnreadable => "prompt-unreadable",
            SkipReason::Paused => "paused",
        }
    }
}

/// What a tick did with one due job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticked {
    /// The bot.
    pub bot: crate::bot_id::BotId,
    /// `heartbeat` or `cron-<n>`.
    pub job: String,
    /// What happened.
    pub outcome: TickOutcome,
}

/// What became of a due job at a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickOutcome {
    /// Its turn was started (it runs in the background, on the cron lane).
    Started,
    /// Skipped; it falls due again later.
    Skipped(SkipReason),
    /// Not run now, still due: it runs at the first tick the reason is gone.
    Waiting(SkipReason),
    /// Another instance on the same database dealt with this occurrence first.
    Elsewhere,
}

/// Why the scheduler could not be built from the config (validation reports the same earlier).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(pub(crate) String);

/// One job's place in the schedule.
struct Slot {
    /// When it falls due; `None` for a cron schedule that names no future time.
    next_due: Option<DateTime<Utc>>,
    /// The occurrence (by due time) a waiting skip was already recorded for, so a heartbeat
    /// held back by a long turn is recorded once, not at every tick.
    noted: Option<(DateTime<Utc>, SkipReason)>,
    /// Set while its turn is queued or running.
    running: Arc<AtomicBool>,
}

struct State {
    /// Whether the first tick loaded the store and armed the jobs.
    armed: bool,
    /// One per job, in the same order.
    slots: Vec<Slot>,
}

/// Runs each bot's heartbeat and cron entries when they fall due. See the module docs.
pub struct Scheduler {
    engine: Engine,
    jobs: Vec<Arc<Job>>,
    zone: Zone,
    /// Every job's next due time, written here, read by `/baton status` (the `Admin`'s view).
    board: Arc<Board>,
    /// A tokio mutex: a tick awaits the store while holding it, and two ticks must not
    /// interleave (each would start the same due job).
    state: tokio::sync::Mutex<State>,
}

impl Scheduler {
    /// The jobs of every bot in `engine`'s config, showing their due times on `board` (on the
    /// board's clock, `gateway.timezone`).
    pub fn new(engine: Engine, board: Arc<Board>) -> Result<Scheduler, ScheduleError> {
        let config = engine.config();
        let zone = *board.zone();
        let jobs: Vec<Arc<Job>> = jobs::jobs(config, engine.roster())
            .map_err(ScheduleError)?
            .into_iter()
            .map(Arc::new)
            .collect();
        let slots = jobs
            .iter()
            .map(|_| Slot {
                next_due: None,
                noted: None,
                running: Arc::new(AtomicBool::new(false)),
            })
            .collect();
        Ok(Scheduler {
            engine,
            jobs,
            zone,
            board,
            state: tokio::sync::Mutex::new(State {
                armed: false,
                slots,
            }),
        })
    }

    /// Whether any bot has a heartbeat or cron entry.
    pub fn has_jobs(&self) -> bool {
        !self.jobs.is_empty()
    }

    /// Every job's next due time (empty until the first tick).
    pub fn next_due(&self) -> Vec<NextDue> {
        self.board.next_due()
    }

    /// Deal with every job due at `now`: start its turn (in the background, tracked like any
    /// pipeline run, so a shutdown drains it) or skip it. Returns what was done with each due
    /// job. Does nothing once the gateway is shutting down.
    pub async fn tick(&self, now: DateTime<Utc>) -> Vec<Ticked> {
        let mut state = self.state.lock().await;
        if self.engine.tasks().is_closed() {
            return Vec::new();
        }
        if !state.armed {
            self.arm(&mut state, now).await;
        }
        let mut done = Vec::new();
        for (job, slot) in self.jobs.iter().zip(state.slots.iter_mut()) {
            let Some(due) = slot.next_due.filter(|due| *due <= now) else {
                continue;
            };
            let outcome = if self.paused(job).await {
                self.skip(job, slot, due, now, SkipReason::Paused, "").await
            } else {
                self.due(job, slot, due, now).await
            };
            done.push(Ticked {
                bot: job.bot.id().clone(),
                job: job.id.clone(),
                outcome,
            });
        }
        done
    }

    /// Deal with `job`, due at `due`, at `now`.
    async fn due(
        &self,
        job: &Arc<Job>,
        slot: &mut Slot,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> TickOutcome {
        match &job.what {
            What::Heartbeat { .. } => self.heartbeat_due(job, slot, due, now).await,
            What::Cron { expr, prompt, .. } => {
                let prompt = format!(
                    "This is a scheduled task (cron `{expr}`), not a message from \
                         anyone:\n\n{prompt}"
                );
                self.start(job, slot, due, now, prompt).await
            }
        }
    }

    /// Whether `job`'s bot was paused (`/baton pause`) in the job's chat: it says nothing
    /// there, on schedule or not, until it is resumed.
    async fn paused(&self, job: &Job) -> bool {
        let Place::Chat { platform, chat } = &job.place else {
            return false;
        };
        let key = baton_contract::ChatKey::new(*platform, &chat.as_str().into(), None);
        self.engine
            .store()
            .chat_settings(&key)
            .await
            .is_ok_and(|settings| settings.is_paused(job.bot.id()))
    }

    /// Record a skip and move on to the next occurrence.
    async fn skip(
        &self,
        job: &Job,
        slot: &mut Slot,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
        reason: SkipReason,
        detail: &str,
    ) -> TickOutcome {
        if !self
            .advance(job, slot, due, job.due_after(self.zone, due, now))
            .await
        {
            return TickOutcome::Elsewhere;
        }
        run::record_skip(&self.engine, job, due, reason, detail).await;
        TickOutcome::Skipped(reason)
    }

    /// First tick: take the due times the store kept for jobs whose schedule is unchanged, and
    /// arm the others from `now`.
    async fn arm(&self, state: &mut State, now: DateTime<Utc>) {
        let stored = self.engine.store().schedule_jobs().await.unwrap_or_else(|err| {
            tracing::error!(%err, "could not read the stored schedule; arming every job afresh");
            Vec::new()
        });
        for (job, slot) in self.jobs.iter().zip(state.slots.iter_mut()) {
            let spec = job.spec();
            let kept = stored
                .iter()
                .find(|row| &row.bot == job.bot.id() && row.job == job.id && row.spec == spec)
                .and_then(|row| DateTime::from_timestamp_millis(row.next_due_ms));
            let due = match kept {
                Some(due) => Some(due),
                None => self.arm_afresh(job, now).await,
            };
            self.show_due(job, slot, due);
        }
        state.armed = true;
    }

    /// Store `job`'s first due time from `now`, unless another instance armed it first under
    /// the same spec: the due time that counts.
    async fn arm_afresh(&self, job: &Job, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let first = job.first_due(self.zone, now)?;
        match self
            .engine
            .store()
            .schedule_arm(row(job, first.timestamp_millis()))
            .await
        {
            Ok(due_ms) => DateTime::from_timestamp_millis(due_ms),
            Err(err) => {
                tracing::error!(%err, "could not store the first due time");
                Some(first)
            }
        }
    }

    /// Move `job` past the occurrence due at `due` to `next`, in the store first: returns
    /// whether this instance won the occurrence. Losing, the slot takes the due time the winner
    /// stored. A store that cannot be written keeps the job running here (logged).
    async fn advance(
        &self,
        job: &Job,
        slot: &mut Slot,
        due: DateTime<Utc>,
        next: Option<DateTime<Utc>>,
    ) -> bool {
        let row = row(job, next.map_or(NEVER_DUE_MS, |t| t.timestamp_millis()));
        let advanced = self
            .engine
            .store()
            .schedule_advance(row, due.timestamp_millis())
            .await;
        match advanced {
            Ok(Advanced::Won) => {
                self.show_due(job, slot, next);
                true
            }
            Ok(Advanced::Lost { next_due_ms }) => {
                self.show_due(job, slot, DateTime::from_timestamp_millis(next_due_ms));
                false
            }
            Err(err) => {
                tracing::error!(%err, "could not store the next due time");
                self.show_due(job, slot, next);
                true
            }
        }
    }

    /// `job`'s due time is `due` now: in memory and on the board.
    fn show_due(&self, job: &Job, slot: &mut Slot, due: Option<DateTime<Utc>>) {
        slot.next_due = due;
        slot.noted = None;
        match due {
            Some(due) => self.board.set(job.bot.id(), &job.id, due),
            None => {
                tracing::warn!(bot = %job.bot.id(), job = %job.id, "the schedule names no future time; the job will not run again");
            }
        }
    }

    /// Move past the occurrence due at `due`, then run it in the background, unless another
    /// instance moved past it first.
    async fn start(
        &self,
        job: &Arc<Job>,
        slot: &mut Slot,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
        prompt: String,
    ) -> TickOutcome {
        if !self
            .advance(job, slot, due, job.due_after(self.zone, due, now))
            .await
        {
            return TickOutcome::Elsewhere;
        }
        slot.running.store(true, Ordering::Release);
        let occurrence = Occurrence {
            job: Arc::clone(job),
            due,
            now,
            prompt,
            running: Running(Arc::clone(&slot.running)),
        };
        let engine = self.engine.clone();
        self.engine.tasks().spawn(run::run(engine, occurrence));
        TickOutcome::Started
    }
}

/// `job`'s store row, due at `due_ms`.
fn row(job: &Job, due_ms: i64) -> ScheduleRow {
    ScheduleRow {
        bot: job.bot.id().clone(),
        job: job.id.clone(),
        spec: job.spec(),
        next_due_ms: due_ms,
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::gateway::testing::{Parts, echo_config, eventually, parts};
    use crate::store::{EntryKind, TranscriptQuery};

    /// A scheduler over `gw`'s engine with a board of its own on the gateway's clock: what
    /// each instance on one store has.
    pub(super) fn scheduler(gw: &Parts) -> Scheduler {
        let zone = Zone::parse(&gw.engine.config().gateway.timezone).unwrap();
        Scheduler::new(gw.engine.clone(), Arc::new(Board::new(zone))).unwrap()
    }

    /// Monday 2025-03-03, `h:m` UTC.
    pub(super) fn monday(h: u32, m: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 3, 3, h, m, 0).unwrap()
    }

    /// A due heartbeat whose bot is paused in its chat, or due in its quiet hours, is skipped:
    /// no turn, and the skip is on record in the job's session and in the counters.
    #[tokio::test]
    async fn a_due_heartbeat_is_skipped_when_paused_or_quiet_on_record() {
        let heartbeat = "heartbeat = { every = \"30m\", quiet_hours = \"22:00-07:00\", \
                         target = \"local:ops\" }\n";
        let config = echo_config(&["hb"], heartbeat).replace(
            "database = \":memory:\"",
            "database = \":memory:\"\ntimezone = \"UTC\"",
        );
        let gw = parts(&config).await;
        let s = &gw.engine;
        let scheduler = scheduler(&gw);
        let ops =
            baton_contract::ChatKey::new(baton_contract::Platform::Local, &"ops".into(), None);
        let skipped = |reason| {
            vec![Ticked {
                bot: "hb".parse().unwrap(),
                job: HEARTBEAT_JOB.into(),
                outcome: TickOutcome::Skipped(reason),
            }]
        };
        assert_eq!(
            scheduler.tick(monday(21, 0)).await,
            vec![],
            "the first tick arms"
        );

        s.store().set_paused(&ops, "hb", true).await.unwrap();
        assert_eq!(
            scheduler.tick(monday(21, 30)).await,
            skipped(SkipReason::Paused)
        );
        s.store().set_paused(&ops, "hb", false).await.unwrap();
        assert_eq!(
            scheduler.tick(monday(22, 0)).await,
            skipped(SkipReason::QuietHours)
        );

        let transcript = s
            .store()
            .transcript(TranscriptQuery::session(
                "bot:hb:local:hb:ops".parse().unwrap(),
            ))
            .await
            .unwrap();
        let reasons: Vec<(EntryKind, String)> = transcript
            .iter()
            .map(|e| (e.kind, e.meta["reason"].as_str().unwrap_or("").to_owned()))
            .collect();
        assert_eq!(
            reasons,
            [
                (EntryKind::Notice, "paused".to_owned()),
                (EntryKind::Notice, "quiet-hours".to_owned())
            ]
        );
        let skips = |reason| s.metrics().get(&crate::metrics::SCHEDULED_SKIPS, reason);
        assert_eq!((skips("paused"), skips("quiet-hours")), (1, 1));
    }

    /// Two schedulers on one database (two instances) tick the same due heartbeat at once:
    /// one starts it, the other reports it dealt with elsewhere, and both then wait for the
    /// same next occurrence.
    #[tokio::test]
    async fn two_instances_run_one_due_heartbeat_once() {
        let config = echo_config(
            &["hb"],
            "heartbeat = { every = \"30m\", target = \"none\" }\n",
        );
        let gw = parts(&config).await;
        let a = scheduler(&gw);
        let b = scheduler(&gw);
        assert_eq!(a.tick(monday(9, 0)).await, vec![], "the first tick arms");
        assert_eq!(
            b.tick(monday(9, 10)).await,
            vec![],
            "the second instance takes the stored due time, not one from its own start"
        );
        for round in 1..=3 {
            let at = monday(9, 0) + chrono::TimeDelta::minutes(30 * round);
            let (x, y) = tokio::join!(a.tick(at), b.tick(at));
            let mut outcomes: Vec<TickOutcome> =
                x.into_iter().chain(y).map(|t| t.outcome).collect();
            outcomes.sort_by_key(|o| *o == TickOutcome::Elsewhere);
            assert_eq!(
                outcomes,
                [TickOutcome::Started, TickOutcome::Elsewhere],
                "round {round}"
            );
            for scheduler in [&a, &b] {
                until_idle(scheduler).await;
            }
        }
    }

    /// Waits (at most 10 s) until none of `scheduler`'s turns is queued or running.
    pub(super) async fn until_idle(scheduler: &Scheduler) {
        eventually("the scheduled turns end", || async {
            let state = scheduler.state.lock().await;
            !state
                .slots
                .iter()
                .any(|s| s.running.load(Ordering::Acquire))
        })
        .await;
    }
}
