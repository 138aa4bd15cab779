//! The schedule board: when each bot's jobs fall due next, readable by anyone holding the
//! gateway's shared state (`/baton status`, the dashboard) without touching the scheduler.
//!
//! The scheduler writes it whenever a due time moves; readers get a snapshot. A std mutex:
//! it is held for a map copy, never across an `.await`.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::{DateTime, FixedOffset, Utc};

use super::Zone;

use crate::bot_id::BotId;

/// When one job falls due next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextDue {
    /// The bot.
    pub bot: BotId,
    /// `heartbeat` or `cron-<n>`.
    pub job: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The same moment on the gateway's clock (`gateway.timezone`), for people.
    pub local: DateTime<FixedOffset>,
}

/// Next due times by bot and job.
#[derive(Debug)]
pub struct Board {
    zone: Zone,
    due: Mutex<BTreeMap<(BotId, String), DateTime<Utc>>>,
}

impl Board {
    /// An empty board showing times on `zone`'s clock. It fills on the scheduler's first tick.
    pub fn new(zone: Zone) -> Board {
        Board {
            zone,
            due: Mutex::new(BTreeMap::new()),
        }
    }

    /// The clock the board shows times on.
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// Every job's next due time, by bot then job.
    pub fn next_due(&self) -> Vec<NextDue> {
        let due = self.due.lock().expect("schedule board poisoned");
        due.iter()
            .map(|((bot, job), at)| NextDue {
                bot: bot.clone(),
                job: job.clone(),
                at: *at,
                local: self.zone.show(*at),
            })
            .collect()
    }

    /// The soonest due time of `bot`'s jobs, if it has any.
    pub fn next_due_of(&self, bot: &BotId) -> Option<NextDue> {
        self.next_due()
            .into_iter()
            .filter(|d| &d.bot == bot)
            .min_by_key(|d| d.at)
    }

    /// `bot`'s `job` falls due next at `at` (the scheduler's record).
    pub(crate) fn set(&self, bot: &BotId, job: &str, at: DateTime<Utc>) {
        let mut due = self.due.lock().expect("schedule board poisoned");
        due.insert((bot.clone(), job.to_owned()), at);
    }
}
