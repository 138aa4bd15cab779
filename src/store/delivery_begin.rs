//! A send's row written: the earlier run of the same request found, or the new one queued, in
//! one atomic step on the writer ([`Store::delivery_begin`]); a refused send kept on record.
//!
//! A retry must not make the target work twice: the same idempotency key, or without one the
//! same text to the same session within the window, finds the first run. What takes work to
//! prepare (session keys rendered, JSON, the text's hash) is done before the job, off the one
//! writer thread that every event waits for, and the begun delivery is built from what was
//! written rather than read back (BENCHMARKS.md, issue 23).

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::deliveries::{SELECT, from_row, settled_with_lineage};
use super::notices::Topic;
use super::sql::{Db, DbError, OptionalRow, args};
use super::writer::Queued;
use super::{Delivery, DeliveryState, Notify, SendMode, Store, StoreError};
use crate::bot_id::BotId;
use crate::session::SessionKey;

/// A send about to start, as written by [`Store::delivery_begin`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewDelivery {
    /// Correlates the target's turn, its reply and every transcript entry of the run.
    pub run_id: String,
    /// Sending bot.
    pub sender: BotId,
    /// The sender's session, where a late reply lands.
    pub sender_session: SessionKey,
    /// Target bot.
    pub target: BotId,
    /// The session the target's turn runs in.
    pub target_session: SessionKey,
    /// The message as the sender wrote it.
    pub message: String,
    /// The sender's key for "the same request".
    pub idempotency_key: Option<String>,
    /// Bots in the chain including the target (see `engine::Caller::depth`).
    pub depth: u32,
    /// The human-facing session the chain started from.
    pub origin: Option<SessionKey>,
    /// The trigger the target's model calls are charged to (the sender's).
    pub trigger: Option<String>,
    /// The W3C `traceparent` of the sender's `sessions_send` span: the target's turn joins
    /// that trace (none when traces are off).
    pub trace_parent: Option<String>,
    /// Wait or fire-and-forget.
    pub mode: SendMode,
    /// The artifacts the sender handed over with the message.
    pub artifacts_in: Vec<String>,
    /// The JSON Schema the target's answer must match, if the sender gave one.
    pub expect: Option<Value>,
    /// When, in milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// What [`Store::delivery_begin`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begun {
    /// No earlier run matched: this row was written, queued.
    New(Delivery),
    /// An earlier run of the same request: no row was written. With its lineage when it is
    /// settled (the sender is answered from it).
    Existing(Delivery),
}

/// A new delivery's row as it is written: what takes work to render (session keys, JSON, the
/// text's hash) rendered before the job, off the one writer thread that every event waits for.
struct NewRow {
    new: NewDelivery,
    sender_session: String,
    target_session: String,
    origin: Option<String>,
    artifacts_in: String,
    expect: Option<String>,
    /// See [`text_hash`]; only for a send without an idempotency key.
    message_hash: Option<i64>,
}

impl NewRow {
    fn of(new: NewDelivery) -> Self {
        NewRow {
            sender_session: new.sender_session.render(),
            target_session: new.target_session.render(),
            origin: new.origin.as_ref().map(SessionKey::render),
            artifacts_in: Value::from(new.artifacts_in.clone()).to_string(),
            expect: new.expect.as_ref().map(Value::to_string),
            message_hash: new
                .idempotency_key
                .is_none()
                .then(|| text_hash(&new.message)),
            new,
        }
    }

    /// Whether the sender waits: otherwise the outcome is to be pushed.
    fn notify(&self) -> Notify {
        match self.new.mode {
            SendMode::Wait => Notify::None,
            SendMode::Fire => Notify::Pending,
        }
    }

    /// The delivery as its row reads once written queued, claimed by `runner`.
    fn queued(&self, runner: Option<String>) -> Delivery {
        let new = self.new.clone();
        Delivery {
            run_id: new.run_id,
            sender: new.sender,
            sender_session: new.sender_session,
            target: new.target,
            target_session: new.target_session,
            message: new.message,
            idempotency_key: new.idempotency_key,
            depth: new.depth,
            origin: new.origin,
            trigger: new.trigger,
            trace_parent: new.trace_parent,
            mode: new.mode,
            state: DeliveryState::Queued,
            reason: None,
            reply: None,
            model: None,
            notify: self.notify(),
            artifacts_in: new.artifacts_in,
            expect: new.expect,
            result: None,
            progress: Vec::new(),
            artifacts_out: Vec::new(),
            created_ms: new.created_ms,
            started_ms: None,
            finished_ms: None,
            runner,
        }
    }
}

fn insert(
    db: Db<'_>,
    row: &NewRow,
    state: DeliveryState,
    reason: Option<&str>,
    runner: Option<&str>,
) -> Result<(), DbError> {
    let new = &row.new;
    db.execute(
        "INSERT INTO deliveries (run_id, sender, sender_session, target, target_session, message,
            idempotency_key, depth, origin, mode, state, reason, notify, created_ms, artifacts_in,
            expect, runner, message_hash, trigger_id, trace_parent)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,
            ?19, ?20)",
        args![
            &new.run_id,
            &new.sender,
            &row.sender_session,
            &new.target,
            &row.target_session,
            &new.message,
            &new.idempotency_key,
            new.depth,
            &row.origin,
            new.mode.as_str(),
            state.as_str(),
            reason,
            row.notify().as_str(),
            new.created_ms,
            &row.artifacts_in,
            &row.expect,
            runner,
            row.message_hash,
            &new.trigger,
            &new.trace_parent,
        ],
    )?;
    Ok(())
}

/// The first 8 bytes of `message`'s SHA-256: what "the same request" without an idempotency key
/// is looked up by (an index), before the texts themselves are compared.
fn text_hash(message: &str) -> i64 {
    let digest = Sha256::digest(message.as_bytes());
    let mut first = [0; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// The earlier run of the same request: same key, or (without a key) the same text since
/// `since_ms`. Refused sends never count: nothing ran.
fn same_request(db: Db<'_>, row: &NewRow, since_ms: i64) -> Result<Option<Delivery>, DbError> {
    let new = &row.new;
    match &new.idempotency_key {
        Some(key) => db
            .query_row(
                &format!(
                    "{SELECT} WHERE sender = ?1 AND target_session = ?2 AND idempotency_key = ?3
                       AND state <> 'refused'"
                ),
                args![&new.sender, &row.target_session, key],
                from_row,
            )
            .optional(),
        None => db
            .query_row(
                &format!("{SELECT} {SAME_TEXT}"),
                args![
                    &new.sender,
                    &row.target_session,
                    since_ms,
                    &new.message,
                    row.message_hash
                ],
                from_row,
            )
            .optional(),
    }
}

/// The earlier send of the same text without a key: by the text's hash (`deliveries_same_text`,
/// an index look-up), then the text itself.
const SAME_TEXT: &str = "WHERE sender = ?1 AND target_session = ?2 AND message_hash = ?5
       AND idempotency_key IS NULL AND created_ms >= ?3 AND message = ?4
       AND state <> 'refused'
     ORDER BY created_ms DESC LIMIT 1";

impl Store {
    /// Find the earlier run of the same request (same key; or, without a key, the same text
    /// since `since_ms`), or write `new` as queued, claimed by `runner` when the caller's
    /// instance runs it (unclaimed: another instance is to claim it, announced).
    /// Atomic: two identical sends racing each other start one run. Returns once committed.
    pub async fn delivery_begin(
        &self,
        new: NewDelivery,
        since_ms: i64,
        runner: Option<&str>,
    ) -> Result<Begun, StoreError> {
        let (begun, committed) = self.delivery_begin_early(new, since_ms, runner).await?;
        committed.answer().await?;
        Ok(begun)
    }

    /// [`Store::delivery_begin`], returning as soon as the writer has run it, with what its
    /// commit answers. A sender starting the run here need not wait for the commit: the run's
    /// turn marks the row running in a job queued after this one and waits for that commit
    /// before its model is called, so nothing runs on a row that is not on record. A round trip
    /// between bots waited one commit less (BENCHMARKS.md, issue 23). A commit that fails undoes
    /// the row; the sender learns it from the answer.
    pub async fn delivery_begin_early(
        &self,
        new: NewDelivery,
        since_ms: i64,
        runner: Option<&str>,
    ) -> Result<(Begun, Queued<()>), StoreError> {
        let runner = runner.map(str::to_owned);
        let run_id = new.run_id.clone();
        let row = NewRow::of(new);
        // What the row reads once written: built here, not read back on the writer.
        let queued = row.queued(runner.clone());
        // Another instance sharing the database may be starting the same request: the
        // lookup and the insert are one step for this sender and target there too.
        let lock = format!("deliveries:{}:{}", row.new.sender, row.target_session);
        let (earlier, committed) = self
            .queue_early_announcing(Topic::Delivery, &run_id, move |db| {
                db.exclusive(&lock)?;
                if let Some(earlier) = same_request(db, &row, since_ms)? {
                    return Ok(Some(settled_with_lineage(db, earlier)?));
                }
                insert(db, &row, DeliveryState::Queued, None, runner.as_deref())?;
                Ok(None)
            })
            .await?
            .ran()
            .await?;
        let begun = match earlier {
            Some(earlier) => Begun::Existing(earlier),
            None => Begun::New(queued),
        };
        Ok((begun, committed))
    }

    /// Record a send the guards refused before anything was written for it.
    pub async fn delivery_refused(&self, new: NewDelivery, reason: &str) -> Result<(), StoreError> {
        let reason = reason.to_owned();
        let row = NewRow::of(new);
        self.write(move |db| insert(db, &row, DeliveryState::Refused, Some(&reason), None))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::deliveries::tests::send;
    use crate::store::testing;

    /// The same text is looked up by its hash's index, not by scanning the sender's sends to
    /// the target in the window (what it cost: BENCHMARKS.md, issue 23).
    #[tokio::test]
    async fn the_same_text_is_an_index_look_up() {
        let db = testing::TestDb::sqlite();
        let store = db.open().await;
        let plan = store
            .sqlite_read(|c| {
                let sql = format!("EXPLAIN QUERY PLAN {SELECT} {SAME_TEXT}");
                let mut stmt = c.prepare(&sql)?;
                let rows = stmt.query_map(["a", "s", "0", "hi", "1"], |r| r.get::<_, String>(3))?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await
            .unwrap()
            .join("; ");
        assert!(
            plan.contains(
                "USING INDEX deliveries_same_text (sender=? AND target_session=? AND \
                 message_hash=? AND created_ms>?)"
            ),
            "{plan}"
        );
    }

    /// What a begun send returns is built, not read back: it must be the row as written.
    #[tokio::test]
    async fn a_begun_send_is_its_row_as_written() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let waited = NewDelivery {
                origin: Some("bot:snark:slack:T1:C1".parse().unwrap()),
                artifacts_in: vec!["art_1".into()],
                expect: Some(serde_json::json!({"type": "object"})),
                ..send("r1", Some("k"), "hi", 1_000)
            };
            let fired = NewDelivery {
                mode: SendMode::Fire,
                ..send("r2", None, "bye", 1_000)
            };
            for (new, runner) in [(waited, Some("here")), (fired, None)] {
                let run = new.run_id.clone();
                let Begun::New(begun) = store.delivery_begin(new, 0, runner).await.unwrap() else {
                    panic!("{engine}: a new send");
                };
                let stored = store.delivery(&run).await.unwrap();
                assert_eq!(Some(begun), stored, "{engine}");
            }
        }
    }

    #[tokio::test]
    async fn the_same_request_finds_the_first_run() {
        for db in testing::engines().await {
            let store = db.open().await;
            let first = store
                .delivery_begin(send("r1", None, "hi", 1_000), 0, None)
                .await
                .unwrap();
            assert!(matches!(first, Begun::New(ref d) if d.state == DeliveryState::Queued));
            let again = store
                .delivery_begin(send("r2", None, "hi", 2_000), 0, None)
                .await
                .unwrap();
            assert!(matches!(again, Begun::Existing(ref d) if d.run_id == "r1"));
            let later = store
                .delivery_begin(send("r3", None, "hi", 700_000), 100_000, None)
                .await
                .unwrap();
            assert!(
                matches!(later, Begun::New(_)),
                "outside the window is a new request"
            );
            let keyed = store
                .delivery_begin(send("k1", Some("x"), "a", 1), 0, None)
                .await
                .unwrap();
            assert!(matches!(keyed, Begun::New(_)));
            let keyed = store
                .delivery_begin(send("k2", Some("x"), "b", 9_000_000), 9_000_000, None)
                .await
                .unwrap();
            assert!(
                matches!(keyed, Begun::Existing(ref d) if d.run_id == "k1"),
                "a key never expires"
            );
        }
    }

    #[tokio::test]
    async fn refused_sends_are_kept_but_never_matched() {
        for db in testing::engines().await {
            let store = db.open().await;
            store
                .delivery_refused(send("r1", Some("k"), "hi", 1), "pair-rate")
                .await
                .unwrap();
            let begun = store
                .delivery_begin(send("r2", Some("k"), "hi", 2), 0, None)
                .await
                .unwrap();
            assert!(matches!(begun, Begun::New(_)));
            let refused = store.delivery("r1").await.unwrap().unwrap();
            assert_eq!(refused.state, DeliveryState::Refused);
            assert_eq!(refused.reason.as_deref(), Some("pair-rate"));
        }
    }

    /// Two instances on one PostgreSQL: the same send reaching both at once starts one run.
    #[tokio::test]
    async fn the_same_request_on_two_instances_starts_one_run() {
        let db = testing::TestDb::postgres().await;
        let (one, two) = (db.open().await, db.open().await);
        for round in 0..10 {
            let text = format!("hi {round}");
            let (a, b) = tokio::join!(
                one.delivery_begin(send(&format!("a{round}"), None, &text, 1_000), 0, None),
                two.delivery_begin(send(&format!("b{round}"), None, &text, 1_000), 0, None),
            );
            let new = [a.unwrap(), b.unwrap()]
                .iter()
                .filter(|begun| matches!(begun, Begun::New(_)))
                .count();
            assert_eq!(new, 1, "round {round}: {new} runs started");
        }
    }
}
