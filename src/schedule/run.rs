//! One scheduled turn, from the lane to the chat: the job's session waits for a slot on the
//! `cron` lane, the bot is given its prompt and (in a chat) the chat's history buffer, and its
//! reply is posted, aimed at a message when it used the reply directive.
//!
//! Heartbeat replies pass two more checks first: `HEARTBEAT_OK` means "nothing
//! needs attention" and is not delivered, and a reply identical to the heartbeat's last
//! delivered one within 24 hours is suppressed as a `duplicate`. Both are recorded in the
//! transcript as silent entries with their `reason`, and counted in `/metrics`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use baton_contract::{ChatId, MessageId};
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::json;

use super::SkipReason;
use super::jobs::{Job, What};
use super::monitor::{aim, history_section};
use crate::engine::{
    Attached, Caller, Engine, Heard, History, Recall, Seat, SessionTurn, TurnEnd, TurnPlan, journal,
};
use crate::lanes::Lane;
use crate::metrics;
use crate::outcome::{Outcome, heartbeat_reply};
use crate::post::Target;
use crate::roster::Account;
use crate::session::SessionKey;
use crate::store::{EntryKind, HistoryEntry, HistoryTake, LastDelivered, Origin};
use crate::timing::Place;

/// How long a delivered heartbeat reply suppresses an identical one.
const DUPLICATE_WINDOW: TimeDelta = TimeDelta::hours(24);

/// The speaker scheduled prompts are recorded under: the gateway, not a person.
const SPEAKER: &str = "baton";

/// Why a heartbeat reply was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Suppressed {
    /// The bot answered `HEARTBEAT_OK`.
    HeartbeatOk,
    /// The same text as the last delivered heartbeat, within 24 hours.
    Duplicate,
}

impl Suppressed {
    fn as_str(self) -> &'static str {
        match self {
            Suppressed::HeartbeatOk => "heartbeat-ok",
            Suppressed::Duplicate => "duplicate",
        }
    }
}

/// A job's session and the account that speaks in it.
pub(super) struct Spot<'a> {
    /// The session the job's turns and records go to.
    pub(super) key: SessionKey,
    /// The bot's account there (its local account for a private job).
    pub(super) account: &'a Account,
}

impl Spot<'_> {
    /// Where `job` runs, or `None` when the bot has no account on the target's platform
    /// (validation refuses such configs; logged if it happens anyway).
    pub(super) fn of<'a>(engine: &'a Engine, job: &Job) -> Option<Spot<'a>> {
        let bot = job.bot.id();
        let (platform, chat) = match &job.place {
            Place::Private => (baton_contract::Platform::Local, None),
            Place::Chat { platform, chat } => (*platform, Some(chat)),
        };
        let Some(account) = engine.roster().account_of_bot(platform, bot) else {
            tracing::error!(%bot, job = %job.id, %platform, "no account to run the scheduled job through");
            return None;
        };
        let key = match chat {
            None => SessionKey::scheduled(bot, account.id.clone(), &job.id),
            Some(chat) => SessionKey {
                bot: bot.to_owned(),
                platform,
                account: account.id.clone(),
                chat: ChatId::from(chat.as_str()),
                thread: None,
            },
        };
        Some(Spot { key, account })
    }
}

/// The run id of the occurrence of `job` due at `due`. It derives from the due time, so a
/// delivery replayed for the same occurrence reuses its idempotency keys and cannot post twice.
fn run_id(job: &Job, due: DateTime<Utc>) -> String {
    format!(
        "sched:{}:{}:{}",
        job.bot.id(),
        job.id,
        due.timestamp_millis()
    )
}

/// Record that the occurrence of `job` due at `due` was skipped, in its session's transcript
/// and in `/metrics`.
pub(super) async fn record_skip(
    engine: &Engine,
    job: &Job,
    due: DateTime<Utc>,
    reason: SkipReason,
    detail: &str,
) {
    engine
        .metrics()
        .add(&metrics::SCHEDULED_SKIPS, reason.as_str());
    tracing::info!(bot = %job.bot.id(), job = %job.id, reason = reason.as_str(), "scheduled turn skipped");
    let Some(spot) = Spot::of(engine, job) else {
        return;
    };
    let text = if detail.is_empty() {
        format!("{} skipped: {}", job.what.kind(), reason.as_str())
    } else {
        format!(
            "{} skipped: {} ({detail})",
            job.what.kind(),
            reason.as_str()
        )
    };
    journal(engine, &spot.key, run_id(job, due))
        .await
        .bot_did(
            EntryKind::Notice,
            &text,
            json!({
                "schedule": job.what.kind(),
                "job": job.id,
                "due": due.to_rfc3339(),
                "reason": reason.as_str(),
            }),
        )
        .await;
}

/// Clears a job's "running" flag when its turn ends, however it ends.
pub(super) struct Running(pub(super) Arc<AtomicBool>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// What one occurrence runs with.
pub(super) struct Occurrence {
    /// The job.
    pub(super) job: Arc<Job>,
    /// When it fell due.
    pub(super) due: DateTime<Utc>,
    /// The scheduler's time when it was started (the clock duplicates are measured on).
    pub(super) now: DateTime<Utc>,
    /// The prompt, before the history buffer is added.
    pub(super) prompt: String,
    /// Held until the turn ends.
    pub(super) running: Running,
}

/// Run one occurrence to the end: lane, turn, reply.
pub(super) async fn run(engine: Engine, occurrence: Occurrence) {
    let Occurrence {
        job,
        due,
        now,
        prompt,
        running: _running,
    } = occurrence;
    let Some(spot) = Spot::of(&engine, &job) else {
        return;
    };
    let seat = Seat {
        session: &spot.key,
        run_id: run_id(&job, due),
        lane: Lane::Cron,
    };
    let turn = SessionTurn::enter(&engine, seat).await;
    engine
        .metrics()
        .add(&metrics::SCHEDULED_RUNS, job.what.kind());
    let history = history(&engine, &job, &spot).await;
    let mut text = prompt;
    if let Place::Chat { .. } = &job.place
        && !history.is_empty()
    {
        text.push_str("\n\n");
        text.push_str(&history_section(&job.place.to_string(), &history));
    }
    let heard = Heard {
        attached: Attached::NONE,
        speaker: SPEAKER,
        name: SPEAKER,
        origin: Origin::Gateway,
        text: &text,
        message_id: None,
        meta: json!({
            "name": SPEAKER,
            "schedule": job.what.kind(),
            "job": job.id,
            "due": due.to_rfc3339(),
            "history": history.len(),
        }),
    };
    let caller = match &job.place {
        Place::Chat { .. } => Caller::from_chat(&spot.key),
        // Nobody to escalate to from a private session.
        Place::Private => Caller::external(&spot.key),
    };
    let plan = TurnPlan {
        bot: &job.bot,
        caller,
        history: History::NONE,
        heard,
        deadline: None,
        recall: Recall::SessionTail,
        delivery: None,
    };
    let TurnEnd::Reply { text, model, .. } = turn.take(plan).await else {
        return;
    };
    let reply = Reply {
        engine: &engine,
        job: &job,
        spot: &spot,
        turn: &turn,
        model: &model,
        now,
    };
    reply.handle(&text, &history).await;
}

/// The chat's history buffer for a job in a chat (taken: cleared for the bot, as any turn
/// takes it); nothing for a private job.
async fn history(engine: &Engine, job: &Job, spot: &Spot<'_>) -> Vec<HistoryEntry> {
    let Place::Chat { platform, chat } = &job.place else {
        return Vec::new();
    };
    let chat_key = spot.key.chat_key();
    let me = spot.account.adapter.self_id();
    let limit = engine.chat_rules().resolve(*platform, chat).history_limit;
    engine
        .store()
        .history_take(HistoryTake {
            chat_key: &chat_key,
            bot: job.bot.id(),
            skip_sender: me.as_ref().map(|m| m.as_str()),
            skip_message: None,
            limit,
        })
        .await
        .unwrap_or_else(|err| {
            tracing::error!(%err, "could not read the history buffer; running without it");
            Vec::new()
        })
}

/// A scheduled turn's reply on its way out.
struct Reply<'a> {
    engine: &'a Engine,
    job: &'a Job,
    spot: &'a Spot<'a>,
    turn: &'a SessionTurn<'a>,
    model: &'a str,
    now: DateTime<Utc>,
}

impl Reply<'_> {
    async fn handle(&self, said: &str, history: &[HistoryEntry]) {
        let heartbeat = matches!(self.job.what, What::Heartbeat { .. });
        let text = if heartbeat {
            match heartbeat_reply(said) {
                Outcome::Silent => return self.suppress(Suppressed::HeartbeatOk, said).await,
                Outcome::Reply(text) => text,
            }
        } else {
            said.to_owned()
        };
        let Place::Chat { .. } = &self.job.place else {
            // A private job: kept in its transcript, never posted.
            self.turn
                .journal()
                .bot_did(
                    EntryKind::Answer,
                    &text,
                    json!({"model": self.model, "posted": false, "schedule": self.job.what.kind()}),
                )
                .await;
            return;
        };
        if heartbeat && self.repeats_last(&text).await {
            return self.suppress(Suppressed::Duplicate, &text).await;
        }
        let aimed = aim(&text, history);
        if aimed.text.is_empty() {
            self.turn
                .journal()
                .bot_did(
                    EntryKind::Silent,
                    "",
                    json!({"model": self.model, "schedule": self.job.what.kind()}),
                )
                .await;
            return;
        }
        let target = Target {
            chat: self.spot.key.chat.clone(),
            thread: None,
            reply_to: aimed.reply_to.map(MessageId),
            ephemeral: None,
        };
        // A failure is recorded by the post.
        let posted = self
            .turn
            .post(self.spot.account, &target, &aimed.text)
            .await;
        if heartbeat && posted.is_ok() {
            let delivered = LastDelivered {
                text,
                at_ms: self.now.timestamp_millis(),
            };
            let store = self.engine.store();
            if let Err(err) = store
                .schedule_delivered(self.job.bot.id(), &self.job.id, delivered)
                .await
            {
                tracing::error!(%err, "could not remember the delivered heartbeat");
            }
        }
    }

    /// Whether `text` is what this heartbeat last delivered, less than 24 hours ago.
    async fn repeats_last(&self, text: &str) -> bool {
        let last = self
            .engine
            .store()
            .schedule_last_delivered(self.job.bot.id(), &self.job.id)
            .await
            .unwrap_or_else(|err| {
                tracing::error!(%err, "could not read the last heartbeat; delivering");
                None
            });
        last.is_some_and(|last| {
            let age = self.now.timestamp_millis() - last.at_ms;
            last.text == text && age < DUPLICATE_WINDOW.num_milliseconds()
        })
    }

    async fn suppress(&self, why: Suppressed, said: &str) {
        self.engine
            .metrics()
            .add(&metrics::SCHEDULED_SUPPRESSED, why.as_str());
        self.turn
            .journal()
            .bot_did(
                EntryKind::Silent,
                "",
                json!({
                    "model": self.model,
                    "schedule": self.job.what.kind(),
                    "reason": why.as_str(),
                    "said": said.trim(),
                }),
            )
            .await;
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::gateway::testing::{echo_config, parts};

    /// A skipped occurrence is recorded as a notice in the job's own session, under the
    /// occurrence's run id (the same for the same due time, so a replay cannot record twice).
    #[tokio::test]
    async fn a_skipped_occurrence_is_recorded_in_the_jobs_session_with_why() {
        let heartbeat = "heartbeat = { every = \"30m\", target = \"none\" }\n";
        let gw = parts(&echo_config(&["hb"], heartbeat)).await;
        let job = gw.scheduler.jobs[0].clone();
        let due = Utc.with_ymd_and_hms(2025, 3, 3, 9, 0, 0).unwrap();
        assert_eq!(run_id(&job, due), run_id(&job, due));
        assert_ne!(
            run_id(&job, due),
            run_id(&job, due + TimeDelta::minutes(30))
        );

        record_skip(&gw.engine, &job, due, SkipReason::Empty, "").await;
        let spot = Spot::of(&gw.engine, &job).expect("a private job runs on the local account");
        assert_eq!(
            spot.key,
            SessionKey::scheduled(job.bot.id(), spot.account.id.clone(), &job.id)
        );
        let store = gw.engine.store();
        let recorded = store
            .run_entries(&spot.key, &run_id(&job, due))
            .await
            .unwrap();
        let [entry] = recorded.as_slice() else {
            panic!("one entry for one skip: {recorded:?}");
        };
        assert_eq!(entry.kind, EntryKind::Notice);
        assert_eq!(
            entry.text,
            format!("heartbeat skipped: {}", SkipReason::Empty.as_str())
        );
        assert_eq!(entry.meta["reason"], SkipReason::Empty.as_str());
    }
}
