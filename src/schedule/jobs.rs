//! The resolved stage of the schedule config: each bot's heartbeat and cron entries as jobs
//! with parsed intervals, windows, schedules and places, and the rules for when each falls due.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::config::{Config, default_platform};
use crate::roster::{Bot, Roster};
use crate::timing::{Place, QuietHours, Schedule, Zone, parse_every};

/// The job id of a bot's heartbeat.
pub const HEARTBEAT_JOB: &str = "heartbeat";

/// One scheduled job of one bot.
pub(crate) struct Job {
    /// The bot.
    pub(crate) bot: Arc<Bot>,
    /// `heartbeat` or `cron-<n>` (its index in the bot's `[[bots.cron]]`).
    pub(crate) id: String,
    /// Where it runs.
    pub(crate) place: Place,
    /// What kind of job.
    pub(crate) what: What,
}

/// A heartbeat or a cron entry.
pub(crate) enum What {
    /// A check-in every `every`, skipped when busy, quiet or empty.
    Heartbeat {
        /// The interval.
        every: Duration,
        /// The checklist, read at every heartbeat (absolute).
        prompt_file: Option<PathBuf>,
        /// No heartbeat in this window.
        quiet: Option<QuietHours>,
    },
    /// A turn at the times `schedule` names.
    Cron {
        /// The schedule (boxed: a parsed cron is large, a heartbeat small).
        schedule: Box<Schedule>,
        /// The schedule as written, for the prompt and the spec.
        expr: String,
        /// What the bot is asked.
        prompt: String,
    },
}

impl What {
    /// The metric label and transcript name of the kind.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            What::Heartbeat { .. } => "heartbeat",
            What::Cron { .. } => "cron",
        }
    }
}

impl Job {
    /// What a stored due time was computed from: when it differs from the config, the stored
    /// time is for another schedule and the job is armed afresh.
    pub(crate) fn spec(&self) -> String {
        match &self.what {
            What::Heartbeat { every, .. } => {
                format!("every={}s target={}", every.as_secs(), self.place)
            }
            What::Cron { expr, .. } => format!("cron={expr} chat={}", self.place),
        }
    }

    /// When a job never run before falls due: a heartbeat one interval from now (a start does
    /// not fire every heartbeat at once), a cron entry at its next time.
    pub(crate) fn first_due(&self, zone: Zone, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.what {
            What::Heartbeat { every, .. } => Some(now + delta(*every)),
            What::Cron { schedule, .. } => schedule.next_after(zone, now),
        }
    }

    /// When the job falls due after the occurrence due at `due` was dealt with at `now`: a
    /// heartbeat keeps its cadence (`due` plus whole intervals), skipping the ones already
    /// past; a cron entry moves to its next time after `now`, so missed slots run once.
    pub(crate) fn due_after(
        &self,
        zone: Zone,
        due: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        match &self.what {
            What::Heartbeat { every, .. } => {
                let step = delta(*every);
                let mut next = due + step;
                if next <= now {
                    let behind = (now - next).num_milliseconds() / step.num_milliseconds();
                    next += step * i32::try_from(behind + 1).unwrap_or(i32::MAX);
                }
                Some(next)
            }
            What::Cron { schedule, .. } => schedule.next_after(zone, now),
        }
    }
}

fn delta(every: Duration) -> TimeDelta {
    TimeDelta::from_std(every).unwrap_or(TimeDelta::MAX)
}

/// Every bot's jobs, in config order. The error names the key and says what to fix; validation
/// reports the same problems earlier, with lines.
pub(crate) fn jobs(config: &Config, roster: &Roster) -> Result<Vec<Job>, String> {
    let mut jobs = Vec::new();
    for (i, bot_config) in config.bots.iter().enumerate() {
        let Some(bot) = roster
            .bots()
            .iter()
            .find(|b| b.id() == bot_config.id.as_str())
        else {
            continue;
        };
        let platform = default_platform(config, &bot_config.id);
        let key = |name: &str| format!("bots[{i}].{name}");
        if let Some(hb) = &bot_config.heartbeat {
            let every =
                parse_every(&hb.every).map_err(|e| format!("{}: {e}", key("heartbeat.every")))?;
            let quiet = hb
                .quiet_hours
                .as_deref()
                .map(QuietHours::parse)
                .transpose()
                .map_err(|e| format!("{}: {e}", key("heartbeat.quiet_hours")))?;
            let place = Place::parse(&hb.target, platform)
                .map_err(|e| format!("{}: {e}", key("heartbeat.target")))?;
            jobs.push(Job {
                bot: Arc::clone(bot),
                id: HEARTBEAT_JOB.to_owned(),
                place,
                what: What::Heartbeat {
                    every,
                    prompt_file: hb.prompt_file.as_ref().map(|f| config.base_dir.join(f)),
                    quiet,
                },
            });
        }
        for (n, entry) in bot_config.cron.iter().enumerate() {
            let key = |name: &str| format!("bots[{i}].cron[{n}].{name}");
            let schedule = Schedule::parse(&entry.schedule)
                .map(Box::new)
                .map_err(|e| format!("{}: {e}", key("schedule")))?;
            let place =
                Place::parse(&entry.chat, platform).map_err(|e| format!("{}: {e}", key("chat")))?;
            jobs.push(Job {
                bot: Arc::clone(bot),
                id: format!("cron-{n}"),
                place,
                what: What::Cron {
                    schedule,
                    expr: entry.schedule.trim().to_owned(),
                    prompt: entry.prompt.clone(),
                },
            });
        }
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn heartbeat(every: u64) -> What {
        What::Heartbeat {
            every: Duration::from_secs(every),
            prompt_file: None,
            quiet: None,
        }
    }

    fn job(what: What) -> Job {
        use crate::backend::EchoBackend;
        use crate::roster::ToolSet;
        let config: crate::config::BotConfig =
            toml::from_str("id = \"snark\"\nbackend = \"echo\"").unwrap();
        Job {
            bot: Arc::new(Bot {
                id: config.id.parse().unwrap(),
                config,
                system_prompt: String::new(),
                backends: crate::roster::Backends::new(
                    crate::config::BackendKind::Echo,
                    Arc::new(EchoBackend::new()),
                ),
                tools: ToolSet::default(),
            }),
            id: "heartbeat".into(),
            place: Place::Private,
            what,
        }
    }

    #[test]
    fn a_heartbeat_keeps_its_cadence_and_skips_what_is_past() {
        let zone = Zone::parse("UTC").unwrap();
        let t0 = Utc.with_ymd_and_hms(2025, 3, 3, 9, 0, 0).unwrap();
        let hb = job(heartbeat(1800));
        assert_eq!(hb.first_due(zone, t0), Some(t0 + TimeDelta::minutes(30)));
        let due = t0 + TimeDelta::minutes(30);
        // Dealt with a little late: the next one is still on the half hour.
        assert_eq!(
            hb.due_after(zone, due, due + TimeDelta::minutes(4)),
            Some(t0 + TimeDelta::minutes(60))
        );
        // Dealt with two hours late: one next occurrence, not four.
        assert_eq!(
            hb.due_after(zone, due, due + TimeDelta::minutes(125)),
            Some(t0 + TimeDelta::minutes(180))
        );
    }

    #[test]
    fn a_cron_entry_moves_to_its_next_time_after_now() {
        let zone = Zone::parse("UTC").unwrap();
        let cron = job(What::Cron {
            schedule: Box::new(Schedule::parse("0 9 * * *").unwrap()),
            expr: "0 9 * * *".into(),
            prompt: "standup".into(),
        });
        let monday_8 = Utc.with_ymd_and_hms(2025, 3, 3, 8, 0, 0).unwrap();
        let monday_9 = Utc.with_ymd_and_hms(2025, 3, 3, 9, 0, 0).unwrap();
        assert_eq!(cron.first_due(zone, monday_8), Some(monday_9));
        // Down from Monday 09:00 to Wednesday 10:00: it runs once, then Thursday.
        let wednesday_10 = Utc.with_ymd_and_hms(2025, 3, 5, 10, 0, 0).unwrap();
        assert_eq!(
            cron.due_after(zone, monday_9, wednesday_10),
            Some(Utc.with_ymd_and_hms(2025, 3, 6, 9, 0, 0).unwrap())
        );
        assert_eq!(cron.spec(), "cron=0 9 * * * chat=none");
    }
}
