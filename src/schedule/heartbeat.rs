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

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::super::tests::{monday, scheduler, until_idle};
    use super::*;
    use crate::gateway::testing::{Parts, echo_config, parts};
    use crate::schedule::{HEARTBEAT_JOB, Ticked};
    use crate::session::SessionKey;
    use crate::store::{EntryKind, TranscriptQuery};

    /// A tick's report of hb's heartbeat.
    fn heartbeat(outcome: TickOutcome) -> Vec<Ticked> {
        vec![Ticked {
            bot: "hb".parse().unwrap(),
            job: HEARTBEAT_JOB.into(),
            outcome,
        }]
    }

    /// Bot hb's heartbeat every 30 minutes, into no chat, with `more` keys.
    fn every_30m(more: &str) -> String {
        echo_config(
            &["hb"],
            &format!("heartbeat = {{ every = \"30m\", target = \"none\"{more} }}\n"),
        )
    }

    /// hb's heartbeat with checklist `text`, in `HEARTBEAT.md` of the directory returned.
    async fn with_checklist(text: &str) -> (tempfile::TempDir, Parts) {
        let dir = tempfile::tempdir().unwrap();
        let checklist = dir.path().join("HEARTBEAT.md");
        std::fs::write(&checklist, text).unwrap();
        let file = format!(", prompt_file = {:?}", checklist.display().to_string());
        (dir, parts(&every_30m(&file)).await)
    }

    /// Skipped in quiet hours, a heartbeat is due again when they end, not at its next
    /// interval inside them.
    #[tokio::test]
    async fn a_heartbeat_in_quiet_hours_is_due_again_when_they_end() {
        let config = every_30m(", quiet_hours = \"22:00-07:00\"").replace(
            "database = \":memory:\"",
            "database = \":memory:\"\ntimezone = \"UTC\"",
        );
        let gw = parts(&config).await;
        let scheduler = scheduler(&gw);
        assert_eq!(
            scheduler.tick(monday(21, 45)).await,
            vec![],
            "the first tick arms"
        );
        assert_eq!(
            scheduler.tick(monday(22, 15)).await,
            heartbeat(TickOutcome::Skipped(SkipReason::QuietHours))
        );
        let next: Vec<_> = scheduler.next_due().into_iter().map(|d| d.at).collect();
        assert_eq!(next, [monday(7, 0) + TimeDelta::days(1)]);
        assert_eq!(
            scheduler.tick(monday(23, 45)).await,
            vec![],
            "not due inside them"
        );
    }

    /// A heartbeat due while its previous one still waits for its lane is not started twice:
    /// it waits, and starts on the first tick after the previous one ended.
    #[tokio::test]
    async fn a_heartbeat_waits_for_its_previous_one() {
        let gw = parts(&every_30m("")).await;
        let scheduler = scheduler(&gw);
        let session = SessionKey::scheduled(&"hb".parse().unwrap(), "hb".into(), HEARTBEAT_JOB);
        assert_eq!(
            scheduler.tick(monday(9, 0)).await,
            vec![],
            "the first tick arms"
        );
        let held = gw.engine.lanes().enter(Lane::Cron, &session).await;
        assert_eq!(
            scheduler.tick(monday(9, 30)).await,
            heartbeat(TickOutcome::Started)
        );
        assert_eq!(
            scheduler.tick(monday(10, 0)).await,
            heartbeat(TickOutcome::Waiting(SkipReason::StillRunning))
        );
        drop(held);
        until_idle(&scheduler).await;
        assert_eq!(
            scheduler.tick(monday(10, 1)).await,
            heartbeat(TickOutcome::Started)
        );
    }

    /// A checklist that cannot be read skips the heartbeat, and the skip names the file and
    /// why; a checklist with work in it is the turn's prompt.
    #[tokio::test]
    async fn a_checklist_is_the_prompt_and_an_unreadable_one_skips() {
        let (dir, gw) = with_checklist("- [ ] feed the cat\n").await;
        let checklist = dir.path().join("HEARTBEAT.md");
        let scheduler = scheduler(&gw);
        assert_eq!(
            scheduler.tick(monday(9, 0)).await,
            vec![],
            "the first tick arms"
        );
        // Gone since the config was checked.
        std::fs::remove_file(&checklist).unwrap();
        assert_eq!(
            scheduler.tick(monday(9, 30)).await,
            heartbeat(TickOutcome::Skipped(SkipReason::PromptUnreadable))
        );
        std::fs::write(&checklist, "- [ ] water the plants\n").unwrap();
        assert_eq!(
            scheduler.tick(monday(10, 0)).await,
            heartbeat(TickOutcome::Started)
        );
        until_idle(&scheduler).await;

        let session = SessionKey::scheduled(&"hb".parse().unwrap(), "hb".into(), HEARTBEAT_JOB);
        let transcript = gw
            .engine
            .store()
            .transcript(TranscriptQuery::session(session))
            .await
            .unwrap();
        let skip = transcript.iter().find(|e| e.kind == EntryKind::Notice);
        let skip = skip.expect("the skip on record");
        assert_eq!(skip.meta["reason"], "prompt-unreadable");
        let path = checklist.display().to_string();
        assert!(skip.text.contains(&path), "{skip:?}");
        let heard = transcript.iter().find(|e| e.kind == EntryKind::Inbound);
        let heard = heard.expect("the heartbeat's prompt on record");
        assert!(heard.text.contains("water the plants"), "{heard:?}");
    }

    /// A heartbeat due while its bot has a turn on the main lane waits for it, noted once on
    /// record however many ticks it waits, and starts on the first tick after the turn ends.
    #[tokio::test]
    async fn a_due_heartbeat_waits_while_its_bot_is_busy_noted_once() {
        let gw = parts(&every_30m("")).await;
        let s = &gw.engine;
        let scheduler = scheduler(&gw);
        assert_eq!(
            scheduler.tick(monday(9, 0)).await,
            vec![],
            "the first tick arms"
        );

        let busy = s
            .lanes()
            .enter(Lane::Main, &"bot:hb:local:hb:room".parse().unwrap())
            .await;
        let waiting = heartbeat(TickOutcome::Waiting(SkipReason::RequestsInFlight));
        assert_eq!(scheduler.tick(monday(9, 30)).await, waiting);
        assert_eq!(scheduler.tick(monday(9, 31)).await, waiting);
        let skips = s
            .metrics()
            .get(&crate::metrics::SCHEDULED_SKIPS, "requests-in-flight");
        assert_eq!(skips, 1, "the wait is noted once");

        drop(busy);
        assert_eq!(
            scheduler.tick(monday(9, 32)).await,
            heartbeat(TickOutcome::Started)
        );
    }

    /// A checklist of headings and empty boxes is no work: the heartbeat is skipped, no turn.
    #[tokio::test]
    async fn a_heartbeat_with_an_empty_checklist_is_skipped() {
        let (_dir, gw) = with_checklist("# Checks\n\n- [ ]\n").await;
        let scheduler = scheduler(&gw);
        assert_eq!(
            scheduler.tick(monday(9, 0)).await,
            vec![],
            "the first tick arms"
        );
        assert_eq!(
            scheduler.tick(monday(9, 30)).await,
            heartbeat(TickOutcome::Skipped(SkipReason::Empty))
        );
    }
}
