//! Counters for `GET /metrics` (Prometheus text format): what came in, what was dropped as a
//! duplicate, how turns ended, and what the guards refused.
//!
//! Every label value is a `&'static str` (a platform name, a reason), so counting allocates
//! nothing; the map holds one entry per (counter, label) pair seen. Gauges (lane depth, runs in
//! flight) are read at render time from where they live instead of being mirrored here.
//!
//! Guard refusals are also kept for an hour, one timestamped record each ([`RecentRefusals`]),
//! because `/baton status` and `/baton limits` answer "what did the guards refuse lately, and
//! here?", which counters since start cannot.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use baton_contract::ChatKey;

/// A labelled counter's name, help text and label name.
#[derive(Debug)]
pub struct Counter {
    /// Metric name.
    pub name: &'static str,
    /// `# HELP` text.
    pub help: &'static str,
    /// The one label it is split by.
    pub label: &'static str,
    /// The label's values known from the start: each is shown at 0 until it is counted, so a
    /// dashboard or alert sees every series from the first scrape.
    pub known: &'static [&'static str],
}

/// Platform names, for the counters split by platform.
const PLATFORMS: &[&str] = &["discord", "feishu", "local", "slack", "telegram"];

/// Every counter, in the order `/metrics` shows them.
const ALL: [&Counter; 10] = [
    &EVENTS_IN,
    &DUPLICATES,
    &EVENTS_REFUSED,
    &EVENTS_RECOVERED,
    &TURNS,
    &BOT_MESSAGE_REFUSALS,
    &QUEUE_REFUSALS,
    &SCHEDULED_RUNS,
    &SCHEDULED_SKIPS,
    &SCHEDULED_SUPPRESSED,
];

/// Events accepted from a platform (after dedupe), by platform.
pub static EVENTS_IN: Counter = Counter {
    name: "baton_events_in_total",
    help: "Events accepted from platforms, after deduplication.",
    label: "platform",
    known: PLATFORMS,
};

/// Redeliveries recognised by dedupe, by platform.
pub static DUPLICATES: Counter = Counter {
    name: "baton_dedupe_hits_total",
    help: "Events dropped as duplicates (platform redeliveries, replays).",
    label: "platform",
    known: PLATFORMS,
};

/// Events refused because the store could not record them (disk full, read-only), by platform.
pub static EVENTS_REFUSED: Counter = Counter {
    name: "baton_events_refused_total",
    help: "Events refused because the store could not record them; the platform redelivers.",
    label: "platform",
    known: PLATFORMS,
};

/// Events a start found left unfinished by the last process, by what became of them:
/// `rerun`, `given-up`.
pub static EVENTS_RECOVERED: Counter = Counter {
    name: "baton_events_recovered_total",
    help: "Events left unfinished by a stop (kill -9, crash) and picked up at the next start.",
    label: "outcome",
    known: &["rerun", "given-up"],
};

/// How turns ended: `reply`, `silent`, `failed`.
pub static TURNS: Counter = Counter {
    name: "baton_turns_total",
    help: "Turns taken, by outcome.",
    label: "outcome",
    known: &["reply", "silent", "failed"],
};

/// Bot-authored messages the loop guards kept from waking a bot, by reason.
pub static BOT_MESSAGE_REFUSALS: Counter = Counter {
    name: "baton_bot_message_refusals_total",
    help: "Bot-authored messages refused by the loop guards, by reason.",
    label: "reason",
    known: &["bot_not_allowed", "bot_reply_chain", "bot_pair_budget"],
};

/// Chat turns refused because their lane or session had its maximum of turns waiting, by
/// reason: `lane_queue_full`, `session_queue_full`.
pub static QUEUE_REFUSALS: Counter = Counter {
    name: "baton_queue_refusals_total",
    help: "Chat turns refused because too many turns were waiting, by reason.",
    label: "reason",
    known: &["lane_queue_full", "session_queue_full"],
};

/// Scheduled turns started, by job kind: `heartbeat`, `cron`.
pub static SCHEDULED_RUNS: Counter = Counter {
    name: "baton_scheduled_runs_total",
    help: "Scheduled turns started (heartbeats and cron entries), by kind.",
    label: "kind",
    known: &["heartbeat", "cron"],
};

/// Heartbeats that fell due and did not run, by reason (`quiet-hours`, `requests-in-flight`,
/// `empty`, ...).
pub static SCHEDULED_SKIPS: Counter = Counter {
    name: "baton_scheduled_skips_total",
    help: "Heartbeats skipped when due, by reason.",
    label: "reason",
    known: &[
        "quiet-hours",
        "requests-in-flight",
        "still-running",
        "empty",
        "prompt-unreadable",
        "paused",
    ],
};

/// Heartbeat replies not delivered, by reason: `heartbeat-ok`, `duplicate`.
pub static SCHEDULED_SUPPRESSED: Counter = Counter {
    name: "baton_scheduled_suppressed_total",
    help: "Heartbeat replies not delivered, by reason.",
    label: "reason",
    known: &["heartbeat-ok", "duplicate"],
};

/// Counts by (metric name, label value), each with its counter's description.
type Counts = BTreeMap<(&'static str, &'static str), (&'static Counter, u64)>;

/// The gateway's counters. One per gateway, in the engine's `Engine`.
#[derive(Default)]
pub struct Metrics {
    counts: Mutex<Counts>,
    turn_time: Mutex<(Duration, u64)>,
    /// Guard refusals of the last hour.
    pub recent: RecentRefusals,
}

impl Metrics {
    /// A guard (`guard`: `bot_messages`, `inbound_rate`, `sessions_send`, `chain`) refused
    /// something for `reason`, in `chat` (`<platform>:<chat>`) when there is one: kept an hour.
    pub fn refused(&self, guard: &'static str, reason: &'static str, chat: Option<ChatKey>) {
        self.recent.record(guard, reason, chat, Instant::now());
    }

    /// Add one to `counter{label = value}`.
    pub fn add(&self, counter: &'static Counter, value: &'static str) {
        let mut counts = self.counts.lock().expect("metrics poisoned");
        counts
            .entry((counter.name, value))
            .or_insert((counter, 0))
            .1 += 1;
    }

    /// The value of `counter{label = value}`.
    pub fn get(&self, counter: &'static Counter, value: &'static str) -> u64 {
        let counts = self.counts.lock().expect("metrics poisoned");
        counts.get(&(counter.name, value)).map_or(0, |(_, n)| *n)
    }

    /// Record how long a turn's backend took.
    pub fn turn_took(&self, elapsed: Duration) {
        let mut time = self.turn_time.lock().expect("metrics poisoned");
        time.0 += elapsed;
        time.1 += 1;
    }

    /// The counters in Prometheus text format, appended to `out`: every counter, each with its
    /// known label values (0 until counted) and any other value it was counted with.
    pub fn render(&self, out: &mut String) {
        let counts = self.counts.lock().expect("metrics poisoned");
        for counter in ALL {
            header(out, counter.name, counter.help, "counter");
            let seen = counts
                .range((counter.name, "")..)
                .take_while(|((name, _), _)| *name == counter.name)
                .map(|((_, value), _)| *value);
            let mut values: Vec<&str> = counter.known.iter().copied().chain(seen).collect();
            values.sort_unstable();
            values.dedup();
            for value in values {
                let n = counts.get(&(counter.name, value)).map_or(0, |(_, n)| *n);
                let _ = writeln!(out, "{}{{{}=\"{value}\"}} {n}", counter.name, counter.label);
            }
        }
        let (total, count) = *self.turn_time.lock().expect("metrics poisoned");
        header(
            out,
            "baton_turn_seconds",
            "Time turns spent in their backend.",
            "summary",
        );
        let _ = writeln!(out, "baton_turn_seconds_sum {}", total.as_secs_f64());
        let _ = writeln!(out, "baton_turn_seconds_count {count}");
    }
}

/// How long [`RecentRefusals`] keeps a refusal.
pub const RECENT_WINDOW: Duration = Duration::from_secs(3600);
/// At most this many refusals are kept; the oldest go first. A flood that fills it is shown as
/// what it is (thousands refused), so losing its oldest records loses nothing anyone reads.
const RECENT_CAPACITY: usize = 10_000;

/// One refusal, kept for [`RECENT_WINDOW`].
struct Refusal {
    at: Instant,
    guard: &'static str,
    reason: &'static str,
    chat: Option<ChatKey>,
}

/// Guard refusals of the last hour, by guard and reason, overall or in one chat.
#[derive(Default)]
pub struct RecentRefusals {
    kept: Mutex<VecDeque<Refusal>>,
}

/// How many times one guard refused for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusalCount {
    /// The guard.
    pub guard: &'static str,
    /// The reason.
    pub reason: &'static str,
    /// How many times, in the window.
    pub count: usize,
}

impl RecentRefusals {
    fn record(
        &self,
        guard: &'static str,
        reason: &'static str,
        chat: Option<ChatKey>,
        at: Instant,
    ) {
        let mut kept = self.kept.lock().expect("refusal log poisoned");
        prune(&mut kept, at);
        if kept.len() >= RECENT_CAPACITY {
            kept.pop_front();
        }
        kept.push_back(Refusal {
            at,
            guard,
            reason,
            chat,
        });
    }

    /// Refusals in the last hour (only those in `chat`, when given), most frequent first.
    pub fn last_hour(&self, chat: Option<&ChatKey>) -> Vec<RefusalCount> {
        self.counts_at(chat, Instant::now())
    }

    fn counts_at(&self, chat: Option<&ChatKey>, now: Instant) -> Vec<RefusalCount> {
        let mut kept = self.kept.lock().expect("refusal log poisoned");
        prune(&mut kept, now);
        let mut counts: BTreeMap<(&'static str, &'static str), usize> = BTreeMap::new();
        let here = kept
            .iter()
            .filter(|r| chat.is_none_or(|c| r.chat.as_ref() == Some(c)));
        for refusal in here {
            *counts.entry((refusal.guard, refusal.reason)).or_default() += 1;
        }
        let mut counts: Vec<RefusalCount> = counts
            .into_iter()
            .map(|((guard, reason), count)| RefusalCount {
                guard,
                reason,
                count,
            })
            .collect();
        counts.sort_by_key(|c| std::cmp::Reverse(c.count));
        counts
    }
}

fn prune(kept: &mut VecDeque<Refusal>, now: Instant) {
    while kept
        .front()
        .is_some_and(|r| now.saturating_duration_since(r.at) > RECENT_WINDOW)
    {
        kept.pop_front();
    }
}

/// `# HELP` and `# TYPE` lines.
pub fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_render_grouped_under_one_header() {
        let metrics = Metrics::default();
        metrics.add(&EVENTS_IN, "slack");
        metrics.add(&EVENTS_IN, "slack");
        metrics.add(&EVENTS_IN, "local");
        metrics.add(&TURNS, "silent");
        metrics.turn_took(Duration::from_millis(1500));
        assert_eq!(metrics.get(&EVENTS_IN, "slack"), 2);
        let mut out = String::new();
        metrics.render(&mut out);
        assert_eq!(
            out.matches("# TYPE baton_events_in_total counter").count(),
            1
        );
        assert!(
            out.contains("baton_events_in_total{platform=\"slack\"} 2\n"),
            "{out}"
        );
        assert!(out.contains("baton_events_in_total{platform=\"local\"} 1\n"));
        assert!(out.contains("baton_turns_total{outcome=\"silent\"} 1\n"));
        assert!(
            out.contains("baton_events_in_total{platform=\"discord\"} 0\n"),
            "known label values are shown before they are counted"
        );
        assert!(out.contains("# TYPE baton_scheduled_runs_total counter"));
        assert!(out.contains("baton_turn_seconds_sum 1.5\nbaton_turn_seconds_count 1\n"));
    }

    #[test]
    fn refusals_are_kept_an_hour_and_counted_per_chat() {
        let recent = RecentRefusals::default();
        let start = Instant::now();
        let local = |chat: &str| ChatKey::new(baton_contract::Platform::Local, &chat.into(), None);
        let room = || Some(local("room"));
        recent.record("bot_messages", "bot_reply_chain", room(), start);
        recent.record(
            "chain",
            "not-holder",
            room(),
            start + Duration::from_secs(1800),
        );
        recent.record(
            "chain",
            "not-holder",
            room(),
            start + Duration::from_secs(1801),
        );
        recent.record(
            "sessions_send",
            "pair-rate",
            None,
            start + Duration::from_secs(1802),
        );
        let later = start + Duration::from_secs(3700);
        let here = recent.counts_at(Some(&local("room")), later);
        assert_eq!(
            here,
            [RefusalCount {
                guard: "chain",
                reason: "not-holder",
                count: 2
            }],
            "the first is over an hour old"
        );
        assert_eq!(recent.counts_at(None, later).len(), 2);
        let much_later = start + Duration::from_secs(2 * 3600);
        assert!(recent.counts_at(None, much_later).is_empty());
    }
}
