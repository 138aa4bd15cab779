//! Deliveries: one row per `sessions_send`, from the guards' verdict to the target's reply.
//!
//! The row is what makes a send safe to retry and impossible to lose. It is written before the
//! target's turn starts, so a retry finds it ([`Store::delivery_begin`] is one atomic
//! find-or-insert on the writer thread) and a restart finds it too
//! ([`Store::deliveries_unsettled`]). The `notify` column remembers that a reply still has to be
//! pushed to the sender's session because nobody is waiting for it any more.
//!
//! A send's row is written in `delivery_begin.rs`; the target's answer is kept with the outcome
//! in `delivery_answer.rs`; the sender's wait is in `delivery_wait.rs`. Here: the record
//! itself, how it moves, and how it is read.

use serde::Serialize;
use serde_json::Value;

use super::artifacts::{Artifact, made_by};
use super::leases::{LIVE_IDS, sql};
use super::notices::Topic;
use super::progress::{ProgressLine, progress_of};
use super::reply_files::attached_to;
use super::sessions::{optional_session_column, session_column};
use super::sql::{Db, DbError, OptionalRow, Row, args};
use super::stored_name::parse_column;
use super::{Queued, Store, StoreError};
use crate::bot_id::BotId;
use crate::session::SessionKey;

stored_name! {
    /// Where a delivery is in its life.
    DeliveryState, "delivery state" {
        /// Written; the target's turn waits for its lane.
        Queued = "queued",
        /// The target's turn is running.
        Running = "running",
        /// The target answered (a reply, or silence).
        Delivered = "delivered",
        /// The target's turn failed, or a restart interrupted it.
        Failed = "failed",
        /// The target's turn ran past the bound for a delivery and was stopped.
        TimedOut = "timed_out",
        /// The target's answer did not match the sender's `expect` schema, twice.
        InvalidOutput = "invalid_output",
        /// A guard refused the send; no turn ran.
        Refused = "refused",
        /// Its sender (an A2A agent) canceled it: the turn was stopped, nothing of it posted.
        Canceled = "canceled",
    }
}

impl DeliveryState {
    /// Whether the state is final.
    pub fn is_settled(self) -> bool {
        !matches!(self, DeliveryState::Queued | DeliveryState::Running)
    }
}

stored_name! {
    /// Whether the sender waits for the reply.
    SendMode, "send mode" {
        /// The sender waits up to its timeout.
        Wait = "wait",
        /// Fire-and-forget (`timeout_seconds = 0`): the reply goes to the sender's session.
        Fire = "fire",
    }
}

stored_name! {
    /// Whether the outcome still has to be pushed to the sender's session.
    Notify, "notify state" {
        /// Nobody needs telling: the sender got the result in its tool call.
        None = "none",
        /// The sender is not waiting: push the outcome to its session when it is known.
        Pending = "pending",
        /// Pushed.
        Done = "done",
    }
}

/// A stored delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Delivery {
    /// Run id.
    pub run_id: String,
    /// Sending bot.
    pub sender: BotId,
    /// The sender's session.
    pub sender_session: SessionKey,
    /// Target bot.
    pub target: BotId,
    /// The target's session.
    pub target_session: SessionKey,
    /// The message.
    pub message: String,
    /// The sender's idempotency key.
    pub idempotency_key: Option<String>,
    /// Bots in the chain including the target.
    pub depth: u32,
    /// The human-facing session the chain started from.
    pub origin: Option<SessionKey>,
    /// The trigger the target's model calls are charged to.
    pub trigger: Option<String>,
    /// The W3C `traceparent` of the sender's `sessions_send` span, if traces were on.
    pub trace_parent: Option<String>,
    /// Wait or fire-and-forget.
    pub mode: SendMode,
    /// Where it is.
    pub state: DeliveryState,
    /// Why it was refused or failed.
    pub reason: Option<String>,
    /// The target's reply (empty for a silent answer).
    pub reply: Option<String>,
    /// The model that answered.
    pub model: Option<String>,
    /// Whether the outcome still has to reach the sender's session.
    pub notify: Notify,
    /// The artifacts the sender handed over with the message.
    pub artifacts_in: Vec<String>,
    /// The JSON Schema the target's answer had to match.
    pub expect: Option<Value>,
    /// What the run produced besides its text (`output`, `errors`, `usage`, `tool_calls`),
    /// once it ended.
    pub result: Option<Value>,
    /// What the target reported with `progress` while it worked, oldest first (filled by
    /// [`Store::deliveries`] and [`Store::delivery`]).
    pub progress: Vec<ProgressLine>,
    /// The artifacts the target's run made or attached to its reply (its lineage's output;
    /// filled like `progress`).
    pub artifacts_out: Vec<Artifact>,
    /// Created, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// The target's turn started.
    pub started_ms: Option<i64>,
    /// Settled.
    pub finished_ms: Option<i64>,
    /// The instance that claimed the run (`cluster.instance_id`); none until one does.
    pub runner: Option<String>,
    /// The instance whose sender waits in its tool call for the outcome; none once it got it or
    /// gave up, or when nobody waits (see [`Store::delivery_waited`]).
    pub waiter: Option<String>,
}

/// Which deliveries to list.
#[derive(Debug, Clone, Default)]
pub struct DeliveryQuery {
    /// Only those sent from or to this session.
    pub session: Option<SessionKey>,
    /// Only queued or running ones.
    pub open_only: bool,
    /// At most this many, newest first (0 = 100).
    pub limit: usize,
}

pub(super) const SELECT: &str =
    "SELECT run_id, sender, sender_session, target, target_session, message,
        idempotency_key, depth, origin, mode, state, reason, reply, model, notify, created_ms,
        started_ms, finished_ms, artifacts_in, expect, result, runner, trigger_id,
        trace_parent, waiter
    FROM deliveries";

pub(super) fn from_row(row: &Row<'_>) -> Result<Delivery, DbError> {
    Ok(Delivery {
        run_id: row.get(0)?,
        sender: row.get(1)?,
        sender_session: session_column(row, 2)?,
        target: row.get(3)?,
        target_session: session_column(row, 4)?,
        message: row.get(5)?,
        idempotency_key: row.get(6)?,
        depth: row.get(7)?,
        origin: optional_session_column(row, 8)?,
        mode: parse_column(row, 9)?,
        state: parse_column(row, 10)?,
        reason: row.get(11)?,
        reply: row.get(12)?,
        model: row.get(13)?,
        notify: parse_column(row, 14)?,
        created_ms: row.get(15)?,
        started_ms: row.get(16)?,
        finished_ms: row.get(17)?,
        artifacts_in: json_column::<Vec<String>>(row, 18)?.unwrap_or_default(),
        expect: json_column(row, 19)?,
        result: json_column(row, 20)?,
        progress: Vec::new(),
        artifacts_out: Vec::new(),
        runner: row.get(21)?,
        trigger: row.get(22)?,
        trace_parent: row.get(23)?,
        waiter: row.get(24)?,
    })
}

/// Each delivery with its progress lines and its artifacts out: those its run made, then those
/// it attached to its reply (made earlier, or by another bot).
pub(super) fn with_lineage(db: Db<'_>, found: &mut [Delivery]) -> Result<(), DbError> {
    let runs: Vec<&str> = found.iter().map(|d| d.run_id.as_str()).collect();
    let mut lines = progress_of(db, &runs)?;
    for d in found {
        d.progress = lines.remove(&d.run_id).unwrap_or_default();
        let mut out = made_by(db, &d.run_id)?;
        for attached in attached_to(db, &d.run_id)? {
            if !out.iter().any(|a| a.id == attached.id) {
                out.push(attached);
            }
        }
        d.artifacts_out = out;
    }
    Ok(())
}

/// `d` with its lineage when it is settled; as it is while its run is under way. Where one
/// delivery is read, it is for its outcome: a waiter looks at the open row until it settles
/// (on a round trip between bots that was two lineage reads for nothing), and the finished
/// row it gets is the sender's report, artifacts and all, read once (BENCHMARKS.md, issue 23).
pub(super) fn settled_with_lineage(db: Db<'_>, d: Delivery) -> Result<Delivery, DbError> {
    if !d.state.is_settled() {
        return Ok(d);
    }
    let mut found = [d];
    with_lineage(db, &mut found)?;
    let [d] = found;
    Ok(d)
}

/// A column holding JSON text (or NULL), parsed.
fn json_column<T: serde::de::DeserializeOwned>(
    row: &Row<'_>,
    index: usize,
) -> Result<Option<T>, DbError> {
    let Some(text) = row.get::<Option<String>>(index)? else {
        return Ok(None);
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| row.column_error(index, e.to_string()))
}

pub(super) fn by_run(db: Db<'_>, run_id: &str) -> Result<Option<Delivery>, DbError> {
    db.query_row(
        &format!("{SELECT} WHERE run_id = ?1"),
        args![run_id],
        from_row,
    )
    .optional()
}

impl Store {
    /// Move a delivery to `state`. `reply`, `model` and `reason` are kept when given; a settled
    /// state stamps `finished_ms`, `Running` stamps `started_ms`. A settled delivery never moves
    /// again: the first outcome wins (but for an A2A task its caller answers,
    /// [`Store::delivery_resume`]). The run's `result` (its report) is kept either way, in the
    /// same job. Returns the row's notify state after the move (`None`: it had settled before). Settling is announced, so a sender waiting on any instance reads it; the move to
    /// `Running` is not.
    ///
    /// This and [`Store::delivery_give_up`] are the one decision that must not race: each moves
    /// only a row still open, in one statement, so of a run finishing and its waiter giving up,
    /// exactly one comes first. `Pending` after the move: nobody waits, push the outcome.
    pub async fn delivery_settle(
        &self,
        change: DeliveryChange,
    ) -> Result<Option<Notify>, StoreError> {
        let run_id = change.run_id.clone();
        let settles = change.state.is_settled();
        let result = change.result.as_ref().map(Value::to_string);
        let work = move |db: Db<'_>| settle_in(db, &change, result.as_deref());
        // Only a settled row is news to a waiter; told of the run starting, it read the row
        // for nothing (one read in three of a round trip between bots, BENCHMARKS.md).
        if settles {
            self.write_announcing(Topic::Delivery, &run_id, work).await
        } else {
            self.write(work).await
        }
    }

    /// [`Store::delivery_settle`] of a run's outcome (`change` settles it), returning as soon as
    /// the writer has run it, with what its commit answers: for a run whose sender waits here
    /// and is handed the outcome at once, its own next writes queued after this one (see
    /// `relay/waiters.rs`). A send to an A2A peer waited a commit more than one to a bot.
    pub async fn delivery_settle_early(
        &self,
        change: DeliveryChange,
    ) -> Result<(Option<Notify>, Queued<()>), StoreError> {
        debug_assert!(change.state.is_settled(), "only a settle is announced");
        let run_id = change.run_id.clone();
        let result = change.result.as_ref().map(Value::to_string);
        self.queue_early_announcing(Topic::Delivery, &run_id, move |db| {
            settle_in(db, &change, result.as_deref())
        })
        .await?
        .ran()
        .await
    }

    /// Open a delivered A2A task again for the turn its caller's answer to the bot's question
    /// wakes (`relay::resume_task`): running, without its earlier reply, until that turn
    /// settles it. The reopened row; `None` when nothing was reopened: no such delivery, or
    /// one running still or ended any other way, which is left as it is.
    pub async fn delivery_resume(
        &self,
        run_id: &str,
        now_ms: i64,
    ) -> Result<Option<Delivery>, StoreError> {
        let run_id = run_id.to_owned();
        self.write(move |db| {
            let moved = db.execute(
                "UPDATE deliveries SET state = 'running', reply = NULL, model = NULL,
                    finished_ms = NULL, started_ms = ?2
                 WHERE run_id = ?1 AND state = 'delivered'",
                args![&run_id, now_ms],
            )?;
            if moved == 0 {
                return Ok(None);
            }
            by_run(db, &run_id)
        })
        .await
    }

    /// Claim `run_id` for instance `runner` (its run, or pushing its outcome), if its runner is
    /// still `from` (none: never claimed, or handed on; or an instance that is gone). `runner`
    /// none hands it on, for whoever it is announced to. One conditional update: of instances
    /// racing for it, exactly one gets `true`.
    pub async fn delivery_claim(
        &self,
        run_id: &str,
        from: Option<&str>,
        runner: Option<&str>,
    ) -> Result<bool, StoreError> {
        let (run_id, from, runner) = (
            run_id.to_owned(),
            from.map(str::to_owned),
            runner.map(str::to_owned),
        );
        self.write(move |db| {
            let moved = db.execute(
                "UPDATE deliveries SET runner = ?3
                 WHERE run_id = ?1 AND coalesce(runner, '') = coalesce(CAST(?2 AS TEXT), '')",
                args![&run_id, &from, &runner],
            )?;
            Ok(moved == 1)
        })
        .await
    }

    /// Set whether the outcome still has to reach the sender's session.
    pub async fn delivery_notify(&self, run_id: &str, notify: Notify) -> Result<(), StoreError> {
        let run_id = run_id.to_owned();
        self.write(move |db| {
            db.execute(
                "UPDATE deliveries SET notify = ?2 WHERE run_id = ?1",
                args![&run_id, notify.as_str()],
            )?;
            Ok(())
        })
        .await
    }

    /// One delivery by run id; its progress lines and artifacts out only once it is settled
    /// (see [`settled_with_lineage`]).
    pub async fn delivery(&self, run_id: &str) -> Result<Option<Delivery>, StoreError> {
        let run_id = run_id.to_owned();
        self.read(move |db| {
            by_run(db, &run_id)?
                .map(|d| settled_with_lineage(db, d))
                .transpose()
        })
        .await
    }

    /// Deliveries, newest first.
    pub async fn deliveries(&self, query: DeliveryQuery) -> Result<Vec<Delivery>, StoreError> {
        self.read(move |db| {
            let limit = if query.limit == 0 { 100 } else { query.limit };
            let session = query.session.as_ref().map(SessionKey::render);
            // The first `limit` rows are taken here rather than with `LIMIT ?` (`query_take`).
            let mut found = db.query_take(
                &format!(
                    "{SELECT} WHERE (CAST(?1 AS TEXT) IS NULL
                            OR sender_session = ?1 OR target_session = ?1)
                       AND (NOT ?2 OR state IN ('queued', 'running'))
                     ORDER BY created_ms DESC, run_id DESC"
                ),
                args![&session, query.open_only],
                limit,
                from_row,
            )?;
            with_lineage(db, &mut found)?;
            Ok(found)
        })
        .await
    }

    /// What nobody else will pick up: deliveries still queued or running, and settled ones
    /// whose outcome has not reached the sender's session yet, whose runner is none, `me` (only
    /// when `mine`: a restart under the same id), or an instance not renewed within `lease_ms`
    /// (gone). Oldest first.
    pub async fn deliveries_unsettled(
        &self,
        me: &str,
        mine: bool,
        lease_ms: i64,
    ) -> Result<Vec<Delivery>, StoreError> {
        let me = me.to_owned();
        self.read(move |db| {
            let live = sql(db, LIVE_IDS);
            db.query_map(
                &format!(
                    "{SELECT} WHERE (state IN ('queued', 'running') OR notify = 'pending')
                       AND (runner IS NULL OR (runner = ?1 AND ?2)
                            OR (runner <> ?1 AND runner NOT IN ({live})))
                     ORDER BY created_ms, run_id"
                ),
                args![&me, mine, lease_ms],
                from_row,
            )
        })
        .await
    }
}

/// [`Store::delivery_settle`] inside a writer job (`result`: the change's report, rendered):
/// shared with the answer kept together with its delivery's outcome (`delivery_answer.rs`).
pub(super) fn settle_in(
    db: Db<'_>,
    change: &DeliveryChange,
    result: Option<&str>,
) -> Result<Option<Notify>, DbError> {
    if !move_in(db, change, result)? {
        return Ok(None);
    }
    match change.notify {
        Some(notify) => Ok(Some(notify)),
        None => db
            .query_row(
                "SELECT notify FROM deliveries WHERE run_id = ?1",
                args![&change.run_id],
                |row| parse_column(row, 0),
            )
            .map(Some),
    }
}

/// Move a delivery still open as `change` says, keeping `result` either way; whether it moved.
/// Shared with the turn's start, which marks its delivery running and has no use for the
/// notify state [`settle_in`] reads after.
///
/// One statement for the move and its result, and no `RETURNING`: SQLite runs that through a
/// table of its own, opened and closed for each statement, and the two moves of every
/// delivery took 101k instructions of the writer's 712k a round trip between bots
/// (BENCHMARKS.md, issue 23). The notify state after a move is the change's, or the row's
/// unchanged, so it needs no reading back when the change names it. On PostgreSQL the moved
/// row stays locked until the job commits, so nothing changes it between the two.
pub(super) fn move_in(
    db: Db<'_>,
    change: &DeliveryChange,
    result: Option<&str>,
) -> Result<bool, DbError> {
    let moved = db.execute(
        "UPDATE deliveries SET state = ?2,
            reason = coalesce(?3, reason), reply = coalesce(?4, reply),
            model = coalesce(?5, model), notify = coalesce(?7, notify),
            result = coalesce(?8, result),
            started_ms = CASE WHEN ?2 = 'running' THEN ?6 ELSE started_ms END,
            finished_ms = CASE WHEN ?2 IN ('queued', 'running') THEN finished_ms
                          ELSE ?6 END
         WHERE run_id = ?1 AND state IN ('queued', 'running')",
        args![
            &change.run_id,
            change.state.as_str(),
            &change.reason,
            &change.reply,
            &change.model,
            change.at_ms,
            change.notify.map(Notify::as_str),
            result,
        ],
    )?;
    if moved == 0
        && let Some(result) = result
    {
        db.execute(
            "UPDATE deliveries SET result = ?2 WHERE run_id = ?1",
            args![&change.run_id, result],
        )?;
    }
    Ok(moved > 0)
}

/// A state change for [`Store::delivery_settle`].
#[derive(Debug, Clone)]
pub struct DeliveryChange {
    /// Which delivery.
    pub run_id: String,
    /// The new state.
    pub state: DeliveryState,
    /// Why (refusal, failure).
    pub reason: Option<String>,
    /// The reply.
    pub reply: Option<String>,
    /// The model that answered.
    pub model: Option<String>,
    /// Whether the outcome must still reach the sender's session, when that changes.
    pub notify: Option<Notify>,
    /// What the run produced besides its text (see [`Delivery::result`]): kept with the
    /// outcome, so a sender woken by it reads it.
    pub result: Option<Value>,
    /// When.
    pub at_ms: i64,
}

impl DeliveryChange {
    /// A change to `state` with nothing else to say.
    pub fn to(run_id: &str, state: DeliveryState, at_ms: i64) -> Self {
        Self {
            run_id: run_id.to_owned(),
            state,
            reason: None,
            reply: None,
            model: None,
            notify: None,
            result: None,
            at_ms,
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::store::{NewDelivery, testing};

    /// A waited-for send from snark to caid.
    pub(in crate::store) fn send(run: &str, key: Option<&str>, text: &str, at: i64) -> NewDelivery {
        NewDelivery {
            run_id: run.into(),
            sender: "snark".parse().unwrap(),
            sender_session: "bot:snark:local:snark:room".parse().unwrap(),
            target: "caid".parse().unwrap(),
            target_session: "bot:caid:local:caid:a2a:snark".parse().unwrap(),
            message: text.into(),
            idempotency_key: key.map(str::to_owned),
            depth: 2,
            origin: None,
            trigger: Some(format!("trigger_of_{run}")),
            trace_parent: Some(format!("00-{:032x}-{:016x}-01", at + 1, at + 1)),
            mode: SendMode::Wait,
            artifacts_in: Vec::new(),
            expect: None,
            created_ms: at,
            waiter: None,
        }
    }

    #[tokio::test]
    async fn artifacts_out_are_those_the_run_made_then_those_it_attached() {
        use crate::store::{NewArtifact, Put};
        let store = Store::open(":memory:").await.unwrap();
        store
            .delivery_begin(send("r1", None, "hi", 1_000), 0, None)
            .await
            .unwrap();
        let mut ids = Vec::new();
        for (name, run) in [("made.json", "r1"), ("earlier.json", "r0")] {
            let new = NewArtifact {
                name: name.into(),
                media_type: "application/json".into(),
                content: name.as_bytes().to_vec(),
                bot: "caid".parse().unwrap(),
                session: "bot:caid:local:caid:a2a:snark".parse().unwrap(),
                run_id: Some(run.into()),
                inputs: Vec::new(),
                created_ms: 1,
            };
            let Put::Stored(a) = store.artifact_put(new).await.unwrap() else {
                panic!("stored")
            };
            ids.push(a.id);
        }
        // The run attaches what it made (listed once) and an artifact made before it.
        store.reply_attach("r1", ids.clone(), 2).await.unwrap();
        let open = store.delivery("r1").await.unwrap().unwrap();
        assert!(open.artifacts_out.is_empty(), "read for a settled run only");
        let done = DeliveryChange::to("r1", DeliveryState::Delivered, 3);
        store.delivery_settle(done).await.unwrap();
        let d = store.delivery("r1").await.unwrap().unwrap();
        let out: Vec<&str> = d.artifacts_out.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(out, ["made.json", "earlier.json"]);
    }

    /// A waiter is told when the run settles, not when it starts: that notice only made it read
    /// an open row again. (SQLite: its notices are sent before the write returns.)
    #[tokio::test]
    async fn only_settling_is_announced() {
        use futures::FutureExt;
        let store = Store::open(":memory:").await.unwrap();
        store
            .delivery_begin(send("r1", None, "a", 1), 0, None)
            .await
            .unwrap();
        let mut notices = store.subscribe();
        let running = DeliveryChange::to("r1", DeliveryState::Running, 5);
        store.delivery_settle(running).await.unwrap();
        assert_eq!(
            notices.next().now_or_never(),
            None,
            "no notice of the start"
        );
        let done = DeliveryChange::to("r1", DeliveryState::Delivered, 9);
        store.delivery_settle(done).await.unwrap();
        let heard = notices.next().now_or_never();
        assert!(
            heard
                .as_ref()
                .is_some_and(|n| n.touches(Topic::Delivery, "r1")),
            "{heard:?}"
        );
    }

    #[tokio::test]
    async fn a_delivered_task_resumes_running_without_its_reply_and_settles_again() {
        for db in testing::engines().await {
            let store = db.open().await;
            for run in ["r1", "r2"] {
                store
                    .delivery_begin(send(run, None, run, 1), 0, None)
                    .await
                    .unwrap();
            }
            let asked = DeliveryChange {
                reply: Some("I asked.".into()),
                ..DeliveryChange::to("r1", DeliveryState::Delivered, 5)
            };
            store.delivery_settle(asked).await.unwrap();
            let failed = DeliveryChange::to("r2", DeliveryState::Failed, 5);
            store.delivery_settle(failed).await.unwrap();

            let resumed = store.delivery_resume("r1", 7).await.unwrap().unwrap();
            assert_eq!(resumed.state, DeliveryState::Running);
            assert_eq!((resumed.reply, resumed.finished_ms), (None, None));
            assert_eq!(store.delivery_resume("r1", 8).await.unwrap(), None, "once");
            assert_eq!(
                store.delivery_resume("r2", 8).await.unwrap(),
                None,
                "failed stays"
            );
            let done = DeliveryChange {
                reply: Some("Deployed.".into()),
                ..DeliveryChange::to("r1", DeliveryState::Delivered, 9)
            };
            assert!(store.delivery_settle(done).await.unwrap().is_some());
            let d = store.delivery("r1").await.unwrap().unwrap();
            assert_eq!(d.reply.as_deref(), Some("Deployed."));
            assert_eq!(d.finished_ms, Some(9));
        }
    }

    /// An early settle answers what a settle does once the writer has run it, and its commit
    /// after: the row is settled then, announced, and settled once.
    #[tokio::test]
    async fn an_early_settle_answers_once_run_and_settles_once_committed() {
        for db in testing::engines().await {
            let store = db.open().await;
            store
                .delivery_begin(send("r1", None, "a", 1), 0, None)
                .await
                .unwrap();
            let mut notices = store.subscribe();
            let done = DeliveryChange {
                reply: Some("pong".into()),
                ..DeliveryChange::to("r1", DeliveryState::Delivered, 9)
            };
            let (notify, committed) = store.delivery_settle_early(done.clone()).await.unwrap();
            assert_eq!(
                notify,
                Some(Notify::None),
                "a waited-for run: handed, not pushed"
            );
            committed.answer().await.unwrap();
            let r1 = store.delivery("r1").await.unwrap().unwrap();
            assert_eq!(
                (r1.state, r1.reply.as_deref(), r1.finished_ms),
                (DeliveryState::Delivered, Some("pong"), Some(9))
            );
            tokio::time::timeout(
                std::time::Duration::from_secs(10),
                notices.touching(Topic::Delivery, "r1"),
            )
            .await
            .expect("the settle is announced");
            let again = DeliveryChange::to("r1", DeliveryState::Failed, 10);
            let (notify, committed) = store.delivery_settle_early(again).await.unwrap();
            committed.answer().await.unwrap();
            assert_eq!(notify, None, "settled stays settled");
        }
    }

    #[tokio::test]
    async fn settling_is_once_and_unsettled_ones_are_found() {
        for db in testing::engines().await {
            let store = db.open().await;
            store
                .delivery_begin(send("r1", None, "a", 1), 0, None)
                .await
                .unwrap();
            store
                .delivery_begin(send("r2", None, "b", 2), 0, None)
                .await
                .unwrap();
            assert!(
                store
                    .delivery_settle(DeliveryChange::to("r1", DeliveryState::Running, 5))
                    .await
                    .unwrap()
                    .is_some()
            );
            let done = DeliveryChange {
                reply: Some("ok".into()),
                ..DeliveryChange::to("r1", DeliveryState::Delivered, 9)
            };
            assert_eq!(
                store.delivery_settle(done.clone()).await.unwrap(),
                Some(Notify::None),
                "a waited-for run: the waiter reads it"
            );
            let failed = DeliveryChange::to("r1", DeliveryState::Failed, 10);
            assert_eq!(
                store.delivery_settle(failed).await.unwrap(),
                None,
                "settled stays settled"
            );
            let r1 = store.delivery("r1").await.unwrap().unwrap();
            assert_eq!(
                (r1.state, r1.reply.as_deref(), r1.started_ms, r1.finished_ms),
                (DeliveryState::Delivered, Some("ok"), Some(5), Some(9))
            );
            assert_eq!(
                r1.trigger.as_deref(),
                Some("trigger_of_r1"),
                "the trigger travels"
            );
            assert!(
                r1.trace_parent
                    .as_deref()
                    .is_some_and(|t| t.starts_with("00-")),
                "the trace travels: {:?}",
                r1.trace_parent
            );
            store.delivery_notify("r1", Notify::Pending).await.unwrap();
            let open: Vec<String> = store
                .deliveries_unsettled("me", true, 60_000)
                .await
                .unwrap()
                .into_iter()
                .map(|d| d.run_id)
                .collect();
            assert_eq!(open, ["r1", "r2"]);
            let listed = store
                .deliveries(DeliveryQuery {
                    open_only: true,
                    ..DeliveryQuery::default()
                })
                .await
                .unwrap();
            assert_eq!(listed.len(), 1);
            assert_eq!(listed[0].run_id, "r2");
        }
    }

    /// Sessions are parsed on read, so a row whose key is not one is an error that names the
    /// row and the column, never a delivery quietly missing from the list.
    #[tokio::test]
    async fn a_row_whose_session_is_not_a_key_is_an_error_naming_it() {
        for db in testing::engines().await {
            let store = db.open().await;
            store
                .delivery_begin(send("r1", None, "a", 1), 0, None)
                .await
                .unwrap();
            store
                .write(|db| {
                    db.execute(
                        "UPDATE deliveries SET target_session = 'caid' WHERE run_id = 'r1'",
                        &[],
                    )
                })
                .await
                .unwrap();
            let err = store
                .deliveries(DeliveryQuery::default())
                .await
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("row `r1`, column `target_session`: `caid` is not a session key"),
                "{err}"
            );
        }
    }

    /// A run is claimed once; a runner that is gone leaves its deliveries to the others, a
    /// live one keeps them.
    #[tokio::test]
    async fn a_run_is_claimed_once_and_a_gone_runner_hands_it_on() {
        for db in testing::engines().await {
            let store = db.open().await;
            for id in ["live", "x", "y"] {
                store.instance_register(id, "0.1", 60_000).await.unwrap();
            }
            store
                .delivery_begin(send("r1", None, "a", 1), 0, None)
                .await
                .unwrap();
            store
                .delivery_begin(send("r2", None, "b", 2), 0, Some("live"))
                .await
                .unwrap();
            store
                .delivery_begin(send("r3", None, "c", 3), 0, Some("gone"))
                .await
                .unwrap();
            let (one, two) = tokio::join!(
                store.delivery_claim("r1", None, Some("x")),
                store.delivery_claim("r1", None, Some("y")),
            );
            assert!(one.unwrap() != two.unwrap(), "{}", db.engine());
            let open: Vec<String> = store
                .deliveries_unsettled("me", false, 60_000)
                .await
                .unwrap()
                .into_iter()
                .map(|d| d.run_id)
                .collect();
            assert_eq!(open, ["r3"], "{}: r1 and r2 have live runners", db.engine());
            assert!(
                store
                    .delivery_claim("r3", Some("gone"), Some("me"))
                    .await
                    .unwrap()
            );
            assert!(
                !store
                    .delivery_claim("r3", Some("gone"), Some("other"))
                    .await
                    .unwrap()
            );
            let r3 = store.delivery("r3").await.unwrap().unwrap();
            assert_eq!(r3.runner.as_deref(), Some("me"), "{}", db.engine());
        }
    }
}
