//! The one writer: a dedicated thread that owns the write connection and commits in batches.
//!
//! SQLite allows one writer at a time, and a commit costs far more than a row (measured here:
//! ~24k rows/s committing each row, ~190k rows/s committing 1000 at once). So every write is a
//! job sent on a channel to this thread. It takes the first job, drains up to [`MAX_BATCH`] more
//! that are already queued, runs them all in one transaction and commits; only then does each
//! caller get its answer. A caller that got `Ok` knows its rows are committed, which is what lets
//! the pipeline acknowledge an event to the platform only after its dedupe record is saved.
//!
//! A job that fails (or panics) is rolled back alone and the others in the batch still commit.
//! Jobs run in the order they were sent, so a decision made inside a job (is this key new?) is
//! atomic with respect to every other writer. A batch first runs its jobs straight in its
//! transaction; only if one fails is the batch rolled back and run again with each job inside
//! a `SAVEPOINT` of its own, which can be undone alone. Jobs rarely fail, and a savepoint
//! around every job cost the writer a tenth of its instructions: two statements, and a copy
//! of every page a job touched kept in case it had to be undone (BENCHMARKS.md, issue 23).
//!
//! It is a std thread, not a tokio task, because both drivers block (rusqlite, and the store's
//! PostgreSQL connection, driven on the thread that waits on it: `sql/postgres.rs`): running it
//! on a tokio worker would stall every other task on that worker. On PostgreSQL it is the same
//! loop on one server connection: one transaction per batch, savepoints only once a job failed,
//! and every statement whose answer a job does not read pipelined with the next one that waits
//! (`BEGIN`, a savepoint, the jobs' inserts and deletes), so a batch costs a round trip per
//! statement whose result is read, plus the commit. There the writers of several instances run
//! side by side, and a batch that collided with another instance's (a deadlock, a serialization
//! failure) is rolled back whole and run again (`contention.rs`). Both are why a job is
//! `FnMut`.
//!
//! When the server closes the connection (it restarted, or went away), the writer connects
//! again (`writer_conn.rs`), at once and then with a pause that doubles up to [`MAX_PAUSE`].
//! A batch that met the closed connection before its `COMMIT` was sent committed nothing (the
//! server rolls an unfinished transaction back): it is run once more on the new connection, so
//! the first write after a restart that the writer slept through succeeds. One that lost the
//! connection waiting for its `COMMIT`'s answer may have committed: it is never run again, it
//! fails with the reason, as does a batch whose new connection could not be made. Until it is
//! connected, every job fails at once with [`StoreError::Disconnected`], and `/readyz` says so
//! (`write_health.rs`): nothing waits on a server that is not there, and nothing is told it was
//! saved.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::StoreError;
use super::checkpoint::WalBound;
use super::contention::Attempts;
use super::sql::{Conn, Db, DbError, Engine, PgUrl};
use super::write_health::WriteHealth;
use super::writer_conn;

/// Most jobs committed in one transaction (the first one plus those already waiting).
pub(crate) const MAX_BATCH: usize = 256;

/// How many jobs may wait for the writer before senders wait too (backpressure).
const QUEUE: usize = 4 * MAX_BATCH;

/// What the writer thread receives.
pub(crate) enum Message {
    /// Run this job in the next batch.
    Job(Box<dyn Job>),
    /// Commit what came before, truncate the WAL, then stop.
    Stop,
}

/// How a job runs within its batch's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// Straight in it: a job that fails spoils the batch, which is then run again
    /// [`Isolation::Savepoint`].
    Shared,
    /// Inside a savepoint of its own, rolled back alone if it fails.
    Savepoint,
}

/// How a job's run went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ran {
    /// Its work succeeded.
    Done,
    /// Its work failed (its caller gets the error).
    Failed,
    /// It failed because of another instance's writer: the batch is run again.
    Contended,
}

/// One unit of work, type-erased so that jobs with different results share a channel.
pub(crate) trait Job: Send {
    /// Runs the work inside the open batch transaction, again if the batch is run again; in
    /// a savepoint of its own, rolled back if it failed, when `isolation` says so.
    fn run(&mut self, db: Db<'_>, isolation: Isolation) -> Ran;
    /// Answers the caller once the batch's fate is known.
    fn finish(self: Box<Self>, committed: Result<(), &Unsaved>);
}

/// Why a batch was not committed, as its jobs' callers are told.
#[derive(Debug, Clone)]
pub(crate) enum Unsaved {
    /// Its transaction could not begin or commit, or was rolled back.
    Failed(String),
    /// The connection to the server is lost (or was never made again).
    Disconnected(String),
}

impl Unsaved {
    /// The error a caller gets.
    fn error(&self) -> StoreError {
        match self {
            Unsaved::Failed(msg) => StoreError::Commit(msg.clone()),
            Unsaved::Disconnected(reason) => StoreError::Disconnected {
                reason: reason.clone(),
            },
        }
    }
}

impl std::fmt::Display for Unsaved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsaved::Failed(msg) => f.write_str(msg),
            Unsaved::Disconnected(reason) => write!(f, "the connection is lost: {reason}"),
        }
    }
}

/// What runs on the writer thread after a job's batch commits, given the job's result.
pub(crate) type AfterCommit<T> = Box<dyn FnOnce(&T) + Send>;

/// What runs on the writer thread after a job's batch commits.
pub(crate) type Committed = Box<dyn FnOnce() + Send>;

/// A closure run once by the writer, plus what to do with its result.
struct Pending<T, F> {
    work: F,
    outcome: Option<Result<T, StoreError>>,
    after_commit: Option<AfterCommit<T>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

/// Run `work` once inside the open batch transaction, in a savepoint of its own when
/// `isolation` says so (rolled back alone if it fails).
fn run_work<T>(
    db: Db<'_>,
    isolation: Isolation,
    work: &mut dyn FnMut(Db<'_>) -> Result<T, DbError>,
) -> (Ran, Result<T, StoreError>) {
    let savepoint = isolation == Isolation::Savepoint;
    // Pipelined; its release waits, for it and for every statement the job pipelined, so a
    // failure is this job's.
    if savepoint && let Err(e) = db.execute_pipelined("SAVEPOINT job", &[]) {
        let ran = if e.is_contention() {
            Ran::Contended
        } else {
            Ran::Failed
        };
        return (ran, Err(e.into()));
    }
    let mut ran = Ran::Failed;
    let outcome = match catch_unwind(AssertUnwindSafe(|| work(db))) {
        Ok(Ok(value)) if savepoint => match db.execute("RELEASE job", &[]) {
            Ok(_) => Ok(value),
            Err(e) => Err(e.into()),
        },
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => {
            if e.is_contention() {
                ran = Ran::Contended;
            }
            Err(e.into())
        }
        Err(panic) => Err(StoreError::Internal(panic_message(&*panic))),
    };
    if outcome.is_ok() {
        ran = Ran::Done;
    } else if savepoint && db.in_transaction() {
        // Undo this job only; the rest of the batch stays.
        if let Err(e) = db.execute_batch("ROLLBACK TO job; RELEASE job") {
            tracing::warn!(error = %e, "could not roll back a failed store job");
        }
    }
    (ran, outcome)
}

impl<T, F> Job for Pending<T, F>
where
    T: Send + 'static,
    F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
{
    fn run(&mut self, db: Db<'_>, isolation: Isolation) -> Ran {
        let (ran, outcome) = run_work(db, isolation, &mut self.work);
        self.outcome = Some(outcome);
        ran
    }

    fn finish(mut self: Box<Self>, committed: Result<(), &Unsaved>) {
        let outcome = match (self.outcome.take(), committed) {
            // Whatever the job met, it met it because the connection went.
            (_, Err(lost @ Unsaved::Disconnected(_))) => Err(lost.error()),
            (Some(Ok(value)), Ok(())) => {
                if let Some(after) = self.after_commit.take() {
                    after(&value);
                }
                Ok(value)
            }
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(_)), Err(unsaved)) | (None, Err(unsaved)) => Err(unsaved.error()),
            (None, Ok(())) => Err(StoreError::Internal("a store job never ran".into())),
        };
        // The caller may have stopped waiting; its write is committed all the same.
        let _ = self.reply.send(outcome);
    }
}

/// A job whose caller takes its result as soon as it has run, before its batch commits, then
/// the commit's fate: for a caller whose next writes are queued after it (so they commit after
/// it, or not at all) and whose effects outside the store wait for one of those later commits.
/// A batch that fails on a job and runs again runs this one again on the same state, to the
/// same result; a commit that fails undoes what the caller was told, and the caller learns it
/// from the commit's answer. On PostgreSQL, where a batch another instance's writer collided
/// with runs again on a state that may have changed, the result is given at the commit.
struct Early<T, F> {
    work: F,
    /// The result of the latest run, until given.
    outcome: Option<Result<T, StoreError>>,
    ran: Option<oneshot::Sender<T>>,
    after_commit: Option<Committed>,
    reply: oneshot::Sender<Result<(), StoreError>>,
}

impl<T, F> Job for Early<T, F>
where
    T: Send + 'static,
    F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
{
    fn run(&mut self, db: Db<'_>, isolation: Isolation) -> Ran {
        let (ran, outcome) = run_work(db, isolation, &mut self.work);
        match outcome {
            Ok(value) if db.engine() == Engine::Sqlite && self.ran.is_some() => {
                if let Some(ran) = self.ran.take() {
                    // A caller gone has nothing to be told.
                    let _ = ran.send(value);
                }
                self.outcome = None;
            }
            outcome => self.outcome = Some(outcome),
        }
        ran
    }

    fn finish(mut self: Box<Self>, committed: Result<(), &Unsaved>) {
        let outcome = match (self.outcome.take(), committed) {
            (_, Err(lost @ Unsaved::Disconnected(_))) => Err(lost.error()),
            (Some(Err(e)), _) => Err(e),
            (_, Err(unsaved)) => Err(unsaved.error()),
            (Some(Ok(value)), Ok(())) => {
                if let Some(ran) = self.ran.take() {
                    let _ = ran.send(value);
                }
                Ok(())
            }
            (None, Ok(())) if self.ran.is_none() => Ok(()),
            (None, Ok(())) => Err(StoreError::Internal("a store job never ran".into())),
        };
        if let (Ok(()), Some(after)) = (&outcome, self.after_commit.take()) {
            after();
        }
        let _ = self.reply.send(outcome);
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        format!("a store job panicked: {s}")
    } else if let Some(s) = panic.downcast_ref::<String>() {
        format!("a store job panicked: {s}")
    } else {
        "a store job panicked".to_owned()
    }
}

/// A job in the writer's queue, its result to come.
#[must_use = "the job's result says whether it was committed"]
pub struct Queued<T>(oneshot::Receiver<Result<T, StoreError>>);

impl<T> Queued<T> {
    /// The job's result, once its batch is committed (or known lost).
    pub async fn answer(self) -> Result<T, StoreError> {
        // A dropped reply means the writer stopped before reaching the job.
        self.0.await.map_err(|_| StoreError::Closed)?
    }
}

/// A job answered early in the writer's queue: its result to come once it has run, then its
/// commit's.
#[must_use = "the job's result says whether it ran"]
pub struct QueuedEarly<T> {
    value: oneshot::Receiver<T>,
    committed: Queued<()>,
}

impl<T> QueuedEarly<T> {
    /// The job's result once it has run, and what its commit will answer. An error here is the
    /// job's or its batch's.
    pub async fn ran(self) -> Result<(T, Queued<()>), StoreError> {
        match self.value.await {
            Ok(value) => Ok((value, self.committed)),
            // Given no result: the job failed, or its batch did; the commit's answer says why.
            Err(_) => Err(self.committed.answer().await.err().unwrap_or_else(|| {
                StoreError::Internal("a store job ended without its result".into())
            })),
        }
    }
}

/// The sending side, held by every [`super::Store`] clone.
pub(crate) struct Writer {
    jobs: mpsc::Sender<Message>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    counts: Arc<Counts>,
}

/// What the writer has committed since it started: with the events a caller put through, they
/// show how many jobs an event costs and how well they batch (benchmarks, tests).
#[derive(Default)]
pub(crate) struct Counts {
    /// Batches committed.
    commits: AtomicU64,
    /// Jobs in those batches.
    jobs: AtomicU64,
    /// Times written work was undone: a batch rolled back (to run again, or lost), or a job
    /// rolled back to its savepoint. Moved before any later job runs, so a cache the jobs keep
    /// as they write (`tail_cache.rs`) can tell that what it holds may not be in the database.
    undone: Arc<AtomicU64>,
    /// The latest batch lost, for `/readyz` (`write_health.rs`).
    health: WriteHealth,
}

impl Writer {
    /// Starts the writer thread on `conn`, looking after `upkeep` between batches.
    pub(crate) fn spawn(conn: Conn, upkeep: Upkeep) -> std::io::Result<Self> {
        let (jobs, rx) = mpsc::channel(QUEUE);
        let counts = Arc::new(Counts::default());
        let counter = Arc::clone(&counts);
        let thread = std::thread::Builder::new()
            .name("baton-store-writer".into())
            .spawn(move || writer_loop(conn, rx, &counter, upkeep))?;
        Ok(Writer {
            jobs,
            thread: std::sync::Mutex::new(Some(thread)),
            counts,
        })
    }

    /// Runs `work` in the writer and returns its result once it is committed.
    /// `after_commit` runs on the writer thread right after the commit, in commit order (for
    /// in-memory caches that must never go backwards).
    pub(crate) async fn submit<T, F>(
        &self,
        work: F,
        after_commit: Option<AfterCommit<T>>,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
    {
        self.enqueue(work, after_commit).await?.answer().await
    }

    /// [`Writer::submit`], returning once the job has its place in the queue: every job
    /// submitted after runs after it, in its batch or a later one.
    pub(crate) async fn enqueue<T, F>(
        &self,
        work: F,
        after_commit: Option<AfterCommit<T>>,
    ) -> Result<Queued<T>, StoreError>
    where
        T: Send + 'static,
        F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Pending {
            work,
            outcome: None,
            after_commit,
            reply,
        };
        self.jobs
            .send(Message::Job(Box::new(job)))
            .await
            .map_err(|_| StoreError::Closed)?;
        Ok(Queued(answer))
    }

    /// Queues `work`, answered early (see [`Early`]); `after_commit` runs on the writer thread
    /// after the commit. Returns once the job has its place in the queue, as
    /// [`Writer::enqueue`] does.
    pub(crate) async fn enqueue_early<T, F>(
        &self,
        work: F,
        after_commit: Option<Committed>,
    ) -> Result<QueuedEarly<T>, StoreError>
    where
        T: Send + 'static,
        F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
    {
        let (ran, value) = oneshot::channel();
        let (reply, answer) = oneshot::channel();
        let job = Early {
            work,
            outcome: None,
            ran: Some(ran),
            after_commit,
            reply,
        };
        self.jobs
            .send(Message::Job(Box::new(job)))
            .await
            .map_err(|_| StoreError::Closed)?;
        Ok(QueuedEarly {
            value,
            committed: Queued(answer),
        })
    }

    /// Asks the thread to commit what is queued and stop, then waits for it.
    pub(crate) async fn stop(&self) -> Result<(), StoreError> {
        let handle = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(handle) = handle else {
            return Ok(()); // already closed
        };
        // If the thread is already gone the send fails; joining still tells us how it ended.
        let _ = self.jobs.send(Message::Stop).await;
        let joined = tokio::task::spawn_blocking(move || handle.join())
            .await
            .map_err(|e| StoreError::Internal(format!("waiting for the writer: {e}")))?;
        joined.map_err(|panic| StoreError::Internal(panic_message(&*panic)))
    }

    /// How many batches have been committed (counted before their callers are answered).
    pub(crate) fn commits(&self) -> u64 {
        self.counts.commits.load(Ordering::Relaxed)
    }

    /// How many jobs those batches held.
    pub(crate) fn jobs(&self) -> u64 {
        self.counts.jobs.load(Ordering::Relaxed)
    }

    /// Why writes are failing now: the connection is lost, or a batch was lost lately
    /// (`write_health.rs`).
    pub(crate) fn failing(&self) -> Option<StoreError> {
        self.counts.health.failing()
    }

    /// Why the writer has no connection to its server now, if it has none.
    pub(crate) fn down(&self) -> Option<String> {
        self.counts.health.down()
    }

    /// How many times the writer connected to its server again.
    pub(crate) fn reconnects(&self) -> u64 {
        self.counts.health.reconnects()
    }

    /// See [`WriteHealth::epoch`](super::write_health::WriteHealth::epoch).
    pub(crate) fn write_epoch(&self) -> u64 {
        self.counts.health.epoch()
    }

    /// The count of times written work was undone (see [`Counts`]), as it moves.
    pub(crate) fn undone(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.counts.undone)
    }
}

/// What the writer looks after between batches, besides running them.
pub(crate) enum Upkeep {
    /// Nothing (a memory database).
    Nothing,
    /// Keeping a file database's WAL under its bound after each commit.
    Wal(WalBound),
    /// Connecting again to this PostgreSQL server when it closed the connection
    /// (`writer_conn.rs`), with a growing pause.
    Reconnect(PgUrl),
}

/// How [`serve`] ended.
enum Served {
    /// Asked to stop, or every sender is gone.
    Stopped,
    /// The connection is closed: connect again before the next batch (and run the batch left
    /// in the writer's hands again, if any: [`Settled::AgainOnNewConnection`]).
    Lost,
}

/// What became of a batch [`run_batch`] ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    /// Committed or failed: every job has its answer.
    Answered,
    /// The connection closed before the commit was sent: nothing of it is committed, and it is
    /// to run once more on a new connection. Its jobs are not answered yet.
    AgainOnNewConnection,
}

/// Whether [`run_batch`] may leave a batch its connection was lost under to run again
/// ([`Settled::AgainOnNewConnection`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// Yes: the writer connects again and runs it first.
    OnNewConnection,
    /// No: it fails with the reason (it ran on a new connection already, or the writer is
    /// stopping, or cannot connect again).
    Spent,
}

fn writer_loop(
    mut conn: Conn,
    mut rx: mpsc::Receiver<Message>,
    counts: &Counts,
    mut upkeep: Upkeep,
) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH + 1);
    // Only a SQLite writer looks before it sleeps: a PostgreSQL server on the same machine
    // needs the CPU its writer would spend looking.
    let mut busy = matches!(conn, Conn::Sqlite(_)).then_some(false);
    loop {
        // One handle for the connection's life: its statements stay prepared (`sql/sqlite.rs`).
        let served = conn.with_db(|db| {
            serve(
                db,
                &conn,
                &mut rx,
                &mut batch,
                &mut busy,
                counts,
                &mut upkeep,
            )
        });
        if let Served::Stopped = served {
            tracing::debug!("store writer stopped");
            return;
        }
        let Upkeep::Reconnect(url) = &upkeep else {
            tracing::error!("the store writer's connection was closed; it stops");
            return;
        };
        match reconnect(url, &mut rx, &mut batch, counts) {
            Some(new) => conn = Conn::Postgres(new),
            None => return,
        }
    }
}

/// The first pause after a failed attempt to connect again; each failure doubles it.
const FIRST_PAUSE: Duration = Duration::from_millis(100);

/// The longest pause between two attempts to connect again.
pub(crate) const MAX_PAUSE: Duration = Duration::from_secs(5);

/// How often, while it waits to connect again, the writer answers the jobs that came.
const REFUSE_EVERY: Duration = Duration::from_millis(10);

/// Connects the writer to `url` again: at once, then after a pause that doubles up to
/// [`MAX_PAUSE`]. When the first attempt fails, the batch left to run again (`pending`) fails
/// with the reason, and so does every job that comes meanwhile. `None` when the writer is to
/// stop.
fn reconnect(
    url: &PgUrl,
    rx: &mut mpsc::Receiver<Message>,
    pending: &mut Vec<Box<dyn Job>>,
    counts: &Counts,
) -> Option<super::sql::PgConn> {
    let mut pause = FIRST_PAUSE;
    loop {
        match writer_conn::connect(url) {
            Ok(new) => {
                counts.health.reconnected();
                tracing::warn!("the store writer is connected to PostgreSQL again");
                return Some(new);
            }
            Err(e) => {
                let reason = match e {
                    // The driver's words; the advice is the disconnected error's own.
                    StoreError::Connect { reason, .. } => reason,
                    other => other.to_string(),
                };
                tracing::error!(error = %reason, retry_in = ?pause, "the store writer cannot connect to PostgreSQL again");
                counts.health.disconnected(&reason);
                let why = Unsaved::Disconnected(reason);
                answer(pending, Err(why.clone()), counts);
                refuse_for(pause, rx, &why)?;
                pause = (pause * 2).min(MAX_PAUSE);
            }
        }
    }
}

/// Fails every job that comes within `pause` with `why`; `None` when the writer is to stop.
fn refuse_for(pause: Duration, rx: &mut mpsc::Receiver<Message>, why: &Unsaved) -> Option<()> {
    let until = Instant::now() + pause;
    loop {
        match rx.try_recv() {
            Ok(Message::Job(job)) => job.finish(Err(why)),
            Ok(Message::Stop) | Err(mpsc::error::TryRecvError::Disconnected) => return None,
            Err(mpsc::error::TryRecvError::Empty) => {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Some(());
                }
                std::thread::sleep(left.min(REFUSE_EVERY));
            }
        }
    }
}

/// Runs batches on `db` (`conn`'s) until the writer is to stop, or the connection is closed.
fn serve(
    db: Db<'_>,
    conn: &Conn,
    rx: &mut mpsc::Receiver<Message>,
    batch: &mut Vec<Box<dyn Job>>,
    busy: &mut Option<bool>,
    counts: &Counts,
    upkeep: &mut Upkeep,
) -> Served {
    if !batch.is_empty() {
        // Left by the connection before this one, committed nowhere: its one more run.
        tracing::info!(
            jobs = batch.len(),
            "running again a store batch the lost connection had not committed"
        );
        run_batch(db, batch, counts, Retry::Spent);
        if !conn.is_usable() {
            return Served::Lost;
        }
    }
    loop {
        let mut stop = false;
        match next(rx, busy) {
            Some(Message::Job(job)) => batch.push(job),
            Some(Message::Stop) | None => stop = true,
        }
        while !stop && batch.len() <= MAX_BATCH {
            match rx.try_recv() {
                Ok(Message::Job(job)) => batch.push(job),
                Ok(Message::Stop) => stop = true,
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            // A stopping writer answers what it has and connects to nothing again.
            let retry = match upkeep {
                Upkeep::Reconnect(_) if !stop => Retry::OnNewConnection,
                _ => Retry::Spent,
            };
            if run_batch(db, batch, counts, retry) == Settled::AgainOnNewConnection {
                return Served::Lost;
            }
            if let (Upkeep::Wal(bound), Conn::Sqlite(conn)) = (&mut *upkeep, conn) {
                bound.keep(conn);
            }
        }
        if stop {
            // Only a store that wrote: a command that merely read must not wait on a
            // gateway writing beside it.
            if let (Upkeep::Wal(bound), Conn::Sqlite(conn)) = (&*upkeep, conn)
                && counts.commits.load(Ordering::Relaxed) > 0
            {
                bound.empty_at_stop(conn);
            }
            return Served::Stopped;
        }
        if !conn.is_usable() {
            return Served::Lost;
        }
    }
}

/// How long a busy writer looks for the next job before it sleeps until one comes.
const SPIN: Duration = Duration::from_micros(50);

/// The next message. While jobs come within [`SPIN`] of each other (`busy`), it is looked for
/// that long first: a sleep and its wake-up cost more than the look (BENCHMARKS.md, issue 23).
/// A writer whose jobs come further apart sleeps at once, and spends nothing looking; one with
/// no `busy` to keep never looks.
fn next(rx: &mut mpsc::Receiver<Message>, busy: &mut Option<bool>) -> Option<Message> {
    let since = Instant::now();
    while *busy == Some(true) && since.elapsed() < SPIN {
        match rx.try_recv() {
            Ok(message) => return Some(message),
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
            Err(mpsc::error::TryRecvError::Empty) => std::thread::yield_now(),
        }
    }
    let message = rx.blocking_recv();
    if let Some(busy) = busy {
        *busy = since.elapsed() < SPIN;
    }
    message
}

/// Runs `batch` in one transaction, commits, then answers every job. A batch in which a job
/// failed is rolled back and run again with each job in a savepoint; one that failed on
/// contention with another instance's writer is rolled back and run again, a few times. One
/// whose connection closed before its commit was sent is left unanswered, to run again on a
/// new connection, when `retry` allows.
fn run_batch(db: Db<'_>, batch: &mut Vec<Box<dyn Job>>, counts: &Counts, retry: Retry) -> Settled {
    let mut attempts = Attempts::new();
    let mut isolation = Isolation::Shared;
    let committed = loop {
        let failure = match try_batch(db, batch, isolation, &counts.undone) {
            Ok(()) => break Ok(()),
            Err(failure) => failure,
        };
        counts.undone.fetch_add(1, Ordering::Relaxed);
        if db.in_transaction() {
            // Release this batch's locks now: another writer may be waiting for them.
            let _ = db.execute_batch("ROLLBACK");
        }
        match failure {
            Failure::Job => isolation = Isolation::Savepoint,
            Failure::Contended(msg) if !attempts.again(batch.len()) => {
                break Err(Unsaved::Failed(msg));
            }
            Failure::Contended(_) => {}
            Failure::Closed(reason) if retry == Retry::OnNewConnection => {
                tracing::warn!(error = %reason, jobs = batch.len(), "the store writer's connection was closed before its batch committed; running the batch again on a new connection");
                return Settled::AgainOnNewConnection;
            }
            Failure::Closed(reason) => {
                counts.health.disconnected(&reason);
                break Err(Unsaved::Disconnected(reason));
            }
            Failure::Lost(unsaved) => {
                // Not a collision, which runs again: this store cannot take writes now.
                match &unsaved {
                    Unsaved::Failed(msg) => counts.health.lost(msg),
                    Unsaved::Disconnected(reason) => counts.health.disconnected(reason),
                }
                break Err(unsaved);
            }
        }
    };
    answer(batch, committed, counts);
    Settled::Answered
}

/// Answers every job of `batch` with its fate, and counts a commit.
fn answer(batch: &mut Vec<Box<dyn Job>>, committed: Result<(), Unsaved>, counts: &Counts) {
    if batch.is_empty() {
        return;
    }
    if committed.is_ok() {
        counts.jobs.fetch_add(batch.len() as u64, Ordering::Relaxed);
        counts.commits.fetch_add(1, Ordering::Relaxed);
    }
    if let Err(msg) = &committed {
        tracing::error!(error = %msg, jobs = batch.len(), "store batch not committed");
    }
    for job in batch.drain(..) {
        job.finish(committed.as_ref().map(|_| ()));
    }
}

/// Why an attempt at a batch did not commit.
#[derive(Debug)]
enum Failure {
    /// A job failed with its jobs run [`Isolation::Shared`]: run it again, each in a savepoint.
    Job,
    /// A job or the commit collided with another writer (`contention.rs`).
    Contended(String),
    /// The connection closed (why: the reason) before the commit was sent: the server rolled
    /// the transaction back, nothing of the batch is committed.
    Closed(String),
    /// The batch is lost: its transaction could not begin, commit, or was rolled back by the
    /// database, or the connection closed waiting for the commit's answer (it may have
    /// committed: never run again).
    Lost(Unsaved),
}

/// One attempt at `batch`: its jobs in one transaction, then the commit. Stops at the first job
/// that failed on contention, or that failed at all when the jobs share the transaction (the
/// transaction is then run again, see [`run_batch`]). A job undone to its savepoint moves
/// `undone` before the next one runs.
fn try_batch(
    db: Db<'_>,
    batch: &mut [Box<dyn Job>],
    isolation: Isolation,
    undone: &AtomicU64,
) -> Result<(), Failure> {
    let begin = match db.engine() {
        // Take the write lock now, not at the first write, so no job meets SQLITE_BUSY midway.
        Engine::Sqlite => "BEGIN IMMEDIATE",
        Engine::Postgres => "BEGIN",
    };
    // On PostgreSQL it goes out with the first job's first statement that waits.
    db.execute_pipelined(begin, &[])
        .map_err(|e| closed_or_lost(db, &e))?;
    for job in batch.iter_mut() {
        let ran = job.run(db, isolation);
        if let Some(reason) = db.lost() {
            // Whatever the job was told, its batch is gone with the connection.
            return Err(Failure::Closed(reason));
        }
        match ran {
            Ran::Done => {}
            Ran::Contended => {
                let collided = "the batch collided with another writer".to_owned();
                return Err(Failure::Contended(collided));
            }
            Ran::Failed if isolation == Isolation::Shared => return Err(Failure::Job),
            Ran::Failed => {
                undone.fetch_add(1, Ordering::Relaxed);
            }
        }
        if !db.in_transaction() {
            // SQLite rolled back the whole transaction (disk full, I/O error): the jobs that
            // ran so far are lost, and the rest must not run outside a transaction.
            let lost = "the transaction was rolled back by SQLite".to_owned();
            return Err(Failure::Lost(Unsaved::Failed(lost)));
        }
    }
    // The answers to the statements the last jobs pipelined: a failure among them is a job's,
    // not the commit's.
    if let Err(e) = db.flush() {
        return Err(match db.lost() {
            Some(reason) => Failure::Closed(reason),
            None if e.is_contention() => Failure::Contended(e.to_string()),
            None if isolation == Isolation::Shared => Failure::Job,
            // Each job's savepoint waited for its own: nothing was left to fail here.
            None => lost(db, &e),
        });
    }
    db.execute("COMMIT", &[]).map(drop).map_err(|e| {
        if e.is_contention() {
            Failure::Contended(e.to_string())
        } else {
            lost(db, &e)
        }
    })
}

/// The batch failed on `e` before its commit was sent: with the connection (nothing of it is
/// committed), or otherwise.
fn closed_or_lost(db: Db<'_>, e: &DbError) -> Failure {
    match db.lost() {
        Some(reason) => Failure::Closed(reason),
        None => lost(db, e),
    }
}

/// The batch lost on `e`: with the connection, or otherwise.
fn lost(db: Db<'_>, e: &DbError) -> Failure {
    Failure::Lost(match db.lost() {
        Some(reason) => Unsaved::Disconnected(reason),
        None => Unsaved::Failed(e.to_string()),
    })
}
