//! What a turn records before its backend runs, in one store job: its session touched, the
//! chat's history buffer taken for the bot (its cursor moved), the line that woke it, and the
//! delivery it runs for marked running; and what it reads, the session's tail, in the same job.
//!
//! They were three jobs, each waiting for a commit before the next could start, on the path
//! from a mention to its reply (BENCHMARKS.md, issue 23). Committed together they also cannot
//! be separated by a stop: a history buffer is never passed over without the inbound entry of
//! the turn that took it, and a replay takes it again. The tail was a read of its own, a hop to
//! a reader thread whose pages the writer had just changed; the writer reads it from warm pages.
//! On SQLite the writer keeps a copy of each tail it read, and reads only what came after it
//! (`tail_cache.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::deliveries::move_in;
use super::history::{OwnedTake, take_in};
use super::sessions::{reset_point, touch_unless_fresh};
use super::sql::Db;
use super::tail_cache::data_version;
use super::transcript::{insert_entry, tail_in, tail_since};
use super::writer::Queued;
use super::{
    DeliveryChange, DeliveryState, HistoryEntry, HistoryTake, NewEntry, Store, StoreError,
    TailEntry,
};
use crate::session::SessionKey;

/// A turn's start, as [`Store::turn_start`] records it.
#[derive(Debug)]
pub struct TurnStart<'a> {
    /// The session, created or its last activity moved.
    pub session: &'a SessionKey,
    /// When.
    pub now_ms: i64,
    /// The chat's history to take for the bot, for a turn woken in a chat.
    pub history: Option<HistoryTake<'a>>,
    /// The line that woke the bot (`None`: a replayed run that recorded it already). When
    /// history is taken, its meta (an object) gains `history`: how many entries were taken.
    pub heard: Option<NewEntry>,
    /// How many of the session's newest entries (since its last reset) to give the turn, read
    /// before `heard` is added; `None` for a turn given none (or a line that starts no turn).
    pub tail: Option<usize>,
    /// The delivery this turn runs for (its run id), marked running: a delivery is then never
    /// running without its turn on record, and the target's session, whose turns are taken one
    /// at a time, waits for one commit less.
    pub delivery: Option<&'a str>,
}

/// What [`Store::turn_start`] recorded and read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnStarted {
    /// The history taken, oldest first (empty when none was asked for).
    pub history: Vec<HistoryEntry>,
    /// The inbound entry's id.
    pub entry: Option<i64>,
    /// The session's tail, oldest first, without `heard` (empty when none was asked for);
    /// shared with the copy the writer keeps of it.
    pub tail: Vec<Arc<TailEntry>>,
    /// The session's reset point (0 before its first reset): which conversation of the session
    /// the turn is in, so that a reset gives the turn a new `session_id`.
    pub conversation: i64,
    /// The delivery the turn runs for was settled before the turn began (canceled, or failed
    /// on record): nothing the turn could say would change its outcome.
    pub delivery_settled: bool,
}

impl Store {
    /// Touch the session, take the history, read the tail and append the inbound entry, in one
    /// job; returns once it is committed.
    pub async fn turn_start(&self, start: TurnStart<'_>) -> Result<TurnStarted, StoreError> {
        let (started, committed) = self.turn_start_early(start).await?;
        committed.answer().await?;
        Ok(started)
    }

    /// [`Store::turn_start`], returning as soon as the writer has run it, with what its commit
    /// answers. For a turn whose start being on record first protects nothing: a platform
    /// event's, which is run again from the inbox after any stop however far it got, and
    /// whose posts each wait for a later commit (BENCHMARKS.md, issue 23). A commit that fails
    /// undoes the start; the caller learns it from the answer.
    pub async fn turn_start_early(
        &self,
        start: TurnStart<'_>,
    ) -> Result<(TurnStarted, Queued<()>), StoreError> {
        let session = start.session.clone();
        let take = start.history.map(OwnedTake::of);
        let (now_ms, mut heard, last) = (start.now_ms, start.heard, start.tail);
        let running = start
            .delivery
            .map(|run| DeliveryChange::to(run, DeliveryState::Running, now_ms));
        let rendered = session.render();
        let tails = self.tails();
        let touched = Arc::clone(self.touched());
        // Whether the job's touch wrote the row, for the note taken once it is committed.
        let wrote = Arc::new(AtomicBool::new(false));
        let note = (Arc::clone(&touched), rendered.clone(), Arc::clone(&wrote));
        let (started, committed) = self
            .queue_early(
                move |db: Db<'_>| {
                    let ran = touch_unless_fresh(db, &touched, &session, &rendered, now_ms)?;
                    wrote.store(ran, Ordering::Relaxed);
                    let delivery_settled = match &running {
                        Some(running) => !move_in(db, running, None)?,
                        None => false,
                    };
                    let (tail, conversation) = match (last, &tails) {
                        (Some(last), Some(tails)) => {
                            let kept = tails.get(&rendered, data_version(db)?);
                            let read = tail_since(db, &rendered, last, kept)?;
                            let tail = read.newest_entries(last);
                            let conversation = read.reset_after;
                            tails.keep(&rendered, read);
                            (tail, conversation)
                        }
                        (Some(last), None) => {
                            (tail_in(db, &rendered, last)?, reset_point(db, &rendered)?)
                        }
                        (None, _) => (Vec::new(), reset_point(db, &rendered)?),
                    };
                    let history = match &take {
                        Some(take) => take_in(db, take)?,
                        None => Vec::new(),
                    };
                    let entry = match &mut heard {
                        Some(heard) => {
                            if let (Some(_), Some(meta)) = (&take, heard.meta.as_object_mut()) {
                                meta.insert("history".to_owned(), history.len().into());
                            }
                            // A `Value` always renders as JSON.
                            let meta = heard.meta.to_string();
                            Some(insert_entry(db, heard, &meta, tails.as_deref())?)
                        }
                        None => None,
                    };
                    let started = TurnStarted {
                        history,
                        entry,
                        tail,
                        conversation,
                        delivery_settled,
                    };
                    Ok(started)
                },
                // A touch is noted only once its row is there.
                Some(Box::new(move || {
                    let (touched, session, wrote) = &note;
                    if wrote.load(Ordering::Relaxed) {
                        touched.note(session, now_ms);
                    }
                })),
            )
            .await?
            .ran()
            .await?;
        Ok((started, committed))
    }
}

#[cfg(test)]
mod tests {
    use baton_contract::ChatKey;
    use serde_json::json;

    use super::*;
    use crate::store::{EntryKind, Origin, TranscriptQuery, testing};

    fn heard(session: &SessionKey, meta: serde_json::Value) -> NewEntry {
        NewEntry {
            session: session.clone(),
            ts_ms: 5,
            kind: EntryKind::Inbound,
            speaker: "U1".into(),
            origin: Origin::Human,
            text: "@snark hi".into(),
            platform_message_id: Some("m9".into()),
            run_id: Some("in:m9".into()),
            idempotency_key: None,
            meta,
        }
    }

    /// One job records all three: the session, the history cursor and the inbound entry, with
    /// the number of history entries taken in its meta.
    #[tokio::test]
    async fn a_turn_start_is_one_job_with_session_history_and_entry() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let session: SessionKey = "bot:snark:slack:a:C1".parse().unwrap();
            let chat = ChatKey::new(baton_contract::Platform::Slack, &"C1".into(), None);
            let said = |id: &str| HistoryEntry {
                message_id: id.into(),
                sender_id: "U2".into(),
                speaker: "ann".into(),
                text: format!("text of {id}"),
                ts_ms: 1,
            };
            store.history_push(&chat, said("m1"), 10).await.unwrap();
            store.history_push(&chat, said("m2"), 10).await.unwrap();
            let bot = "snark".parse().unwrap();
            let take = HistoryTake {
                chat_key: &chat,
                bot: &bot,
                skip_sender: None,
                skip_message: Some("m9"),
                limit: 10,
            };
            let before = store.jobs();
            let started = store
                .turn_start(TurnStart {
                    session: &session,
                    now_ms: 7,
                    history: Some(take),
                    heard: Some(heard(&session, json!({"name": "ann"}))),
                    tail: Some(40),
                    delivery: None,
                })
                .await
                .unwrap();
            assert_eq!(store.jobs() - before, 1, "{engine}: one job");
            assert!(
                started.tail.is_empty(),
                "{engine}: its own line is not in its tail"
            );
            let texts: Vec<_> = started
                .history
                .iter()
                .map(|h| h.message_id.as_str())
                .collect();
            assert_eq!(texts, ["m1", "m2"], "{engine}");
            let record = store.session(&session).await.unwrap().expect("touched");
            assert_eq!(record.updated_ms, 7, "{engine}");
            let entries = store
                .transcript(TranscriptQuery::session(session.clone()))
                .await
                .unwrap();
            assert_eq!(entries.len(), 1, "{engine}");
            assert_eq!(Some(entries[0].id), started.entry, "{engine}");
            assert_eq!(
                entries[0].meta,
                json!({"name": "ann", "history": 2}),
                "{engine}"
            );
            // The cursor moved with it: the bot is not given the same history twice.
            let again = store.history_take(take).await.unwrap();
            assert!(again.is_empty(), "{engine}: {again:?}");
        }
    }

    /// The delivery a turn runs for is marked running in the turn's start job, with the line
    /// that woke its target; a delivery that settled meanwhile stays settled, and the turn is
    /// told so.
    #[tokio::test]
    async fn a_delivery_is_marked_running_with_its_turn() {
        use crate::store::deliveries::tests::send;
        use crate::store::{DeliveryChange, DeliveryState};
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            for run in ["r1", "r2"] {
                store
                    .delivery_begin(send(run, None, run, 1), 0, None)
                    .await
                    .unwrap();
            }
            let timed_out = DeliveryChange::to("r2", DeliveryState::TimedOut, 3);
            store.delivery_settle(timed_out).await.unwrap();
            let session: SessionKey = "bot:caid:local:caid:a2a:snark".parse().unwrap();
            for run in ["r1", "r2"] {
                let before = store.jobs();
                let mut line = heard(&session, json!({}));
                line.run_id = Some(run.into());
                line.platform_message_id = None;
                let started = store
                    .turn_start(TurnStart {
                        session: &session,
                        now_ms: 7,
                        history: None,
                        heard: Some(line),
                        tail: Some(40),
                        delivery: Some(run),
                    })
                    .await
                    .unwrap();
                assert_eq!(store.jobs() - before, 1, "{engine}: one job");
                assert_eq!(started.delivery_settled, run == "r2", "{engine}: {run}");
            }
            let r1 = store.delivery("r1").await.unwrap().unwrap();
            assert_eq!(
                (r1.state, r1.started_ms),
                (DeliveryState::Running, Some(7)),
                "{engine}"
            );
            let r2 = store.delivery("r2").await.unwrap().unwrap();
            assert_eq!(r2.state, DeliveryState::TimedOut, "{engine}");
            let entries = store
                .transcript(TranscriptQuery::session(session.clone()))
                .await
                .unwrap();
            assert_eq!(entries.len(), 2, "{engine}: both turns are on record");
        }
    }
}
