//! What a delivery's run records when its turn has answered, in one store job: the answer in
//! the target's transcript, and the delivery settled with it.
//!
//! They were two jobs, the entry while the target's session was held and the outcome after it,
//! and the target's turns are taken one at a time: every commit in that stretch is paid once
//! per round trip between two bots (BENCHMARKS.md, issue 23). Together they also cannot be
//! separated by a stop: an answer in the transcript is never left with its delivery open.

use serde_json::Value;

use super::deliveries::settle_in;
use super::notices::Topic;
use super::transcript::{insert_entry, meta_json};
use super::{DeliveryChange, NewEntry, Notify, QueuedEarly, Store, StoreError};

/// What [`Store::delivery_answered`] recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    /// The answer's entry in the target's transcript.
    pub entry: i64,
    /// The delivery's notify state after the move, as [`Store::delivery_settle`] returns it
    /// (`None`: it had settled before, and its first outcome stands).
    pub notify: Option<Notify>,
}

impl Store {
    /// Append `answer` to the target's transcript and settle the delivery (`change`) in one
    /// job, announced like [`Store::delivery_settle`]. The entry is kept even when the delivery
    /// had settled before: the bot did say it.
    ///
    /// Returns once the job is queued: the target's session can be let go then, since the
    /// writer runs whatever its next turn records after this job. Its turns, taken one at a
    /// time, then wait for one commit each, not two. What it recorded comes once the job has
    /// run, before its commit (see `Writer::enqueue_early`): a sender handed the answer then
    /// writes whatever it does with it after this job.
    pub async fn delivery_answered(
        &self,
        change: DeliveryChange,
        answer: NewEntry,
    ) -> Result<QueuedEarly<Answered>, StoreError> {
        let meta = meta_json(&answer)?;
        let result = change.result.as_ref().map(Value::to_string);
        let run_id = change.run_id.clone();
        let tails = self.tails();
        self.queue_early_announcing(Topic::Delivery, &run_id, move |db| {
            let entry = insert_entry(db, &answer, &meta, tails.as_deref())?;
            let notify = settle_in(db, &change, result.as_deref())?;
            Ok(Answered { entry, notify })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::deliveries::tests::send;
    use crate::store::{DeliveryState, EntryKind, Origin, TranscriptQuery, testing};

    /// What the job recorded, once committed.
    async fn committed(queued: QueuedEarly<Answered>) -> Answered {
        let (answered, commit) = queued.ran().await.unwrap();
        commit.answer().await.unwrap();
        answered
    }

    fn answer(run: &str, text: &str) -> NewEntry {
        NewEntry {
            session: "bot:caid:local:caid:a2a:snark".parse().unwrap(),
            ts_ms: 9,
            kind: EntryKind::Answer,
            speaker: "caid".into(),
            origin: Origin::Bot,
            text: text.into(),
            platform_message_id: None,
            run_id: Some(run.into()),
            idempotency_key: None,
            meta: serde_json::json!({"to": "snark"}),
        }
    }

    /// One job: the answer is in the transcript and the delivery is settled with its report;
    /// a second outcome keeps its entry but not its state.
    #[tokio::test]
    async fn the_answer_and_the_outcome_are_one_job() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            store
                .delivery_begin(send("r1", None, "hi", 1), 0, None)
                .await
                .unwrap();
            let before = store.jobs();
            let done = DeliveryChange {
                reply: Some("pong".into()),
                result: Some(serde_json::json!({"tool_calls": 2})),
                ..DeliveryChange::to("r1", DeliveryState::Delivered, 9)
            };
            let queued = store.delivery_answered(done, answer("r1", "pong")).await;
            let answered = committed(queued.unwrap()).await;
            assert_eq!(store.jobs() - before, 1, "{engine}: one job");
            assert_eq!(answered.notify, Some(Notify::None), "{engine}");
            let row = store.delivery("r1").await.unwrap().unwrap();
            assert_eq!(
                (row.state, row.reply.as_deref(), row.finished_ms),
                (DeliveryState::Delivered, Some("pong"), Some(9)),
                "{engine}"
            );
            assert_eq!(
                row.result,
                Some(serde_json::json!({"tool_calls": 2})),
                "{engine}"
            );
            let late = DeliveryChange::to("r1", DeliveryState::Failed, 10);
            let queued = store.delivery_answered(late, answer("r1", "late")).await;
            let again = committed(queued.unwrap()).await;
            assert_eq!(again.notify, None, "{engine}: settled stays settled");
            let session = "bot:caid:local:caid:a2a:snark".parse().unwrap();
            let entries = store
                .transcript(TranscriptQuery::session(session))
                .await
                .unwrap();
            let said: Vec<_> = entries.iter().map(|e| (e.id, e.text.as_str())).collect();
            assert_eq!(
                said,
                [(answered.entry, "pong"), (again.entry, "late")],
                "{engine}"
            );
            let row = store.delivery("r1").await.unwrap().unwrap();
            assert_eq!(row.state, DeliveryState::Delivered, "{engine}");
        }
    }

    /// The target's session can be let go once its answer is queued: the next turn's start,
    /// written after it, is given the answer in its tail, though nobody waited for its commit.
    #[tokio::test]
    async fn the_next_turn_is_given_an_answer_only_queued() {
        use crate::store::TurnStart;
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            store
                .delivery_begin(send("r1", None, "hi", 1), 0, None)
                .await
                .unwrap();
            let done = DeliveryChange::to("r1", DeliveryState::Delivered, 9);
            let queued = store
                .delivery_answered(done, answer("r1", "pong"))
                .await
                .unwrap();
            let session = "bot:caid:local:caid:a2a:snark".parse().unwrap();
            let started = store
                .turn_start(TurnStart {
                    session: &session,
                    now_ms: 10,
                    history: None,
                    heard: None,
                    tail: Some(40),
                    delivery: None,
                })
                .await
                .unwrap();
            let tail: Vec<_> = started.tail.iter().map(|e| e.text.as_str()).collect();
            assert_eq!(tail, ["pong"], "{engine}");
            let answered = committed(queued).await;
            assert_eq!(answered.notify, Some(Notify::None), "{engine}");
        }
    }
}
