//! The store: everything baton remembers between events and across restarts, in a SQLite file
//! (the default) or a PostgreSQL database (`gateway.database_url_env`; in progress, issue 22).
//!
//! [`Store`] is a cheap clonable handle (an `Arc` inside), like mini-redis's `Db`. Behind it:
//!
//! - one **writer** thread (`writer.rs`) owning the only write connection; writes are batched
//!   into transactions, and every `async fn` that writes returns only once its rows are
//!   committed;
//! - a small pool of **reader** connections (`readers.rs`), used inside `spawn_blocking` so
//!   a blocking driver never blocks a tokio worker;
//! - queries written once for both engines (`sql/`: [`sql::Db`], parameters, rows);
//! - schema **migrations** by version, one SQL file per step and engine (`migrate.rs`);
//! - SQLite connection setup, WAL and `":memory:"` (`connect.rs`);
//! - on PostgreSQL, a batch that deadlocked with another instance's is run again
//!   (`contention.rs`).
//!
//! Then one file per thing kept, each adding its methods to [`Store`]: `notices.rs` ([`Store::subscribe`]: "look
//! again" between instances), `dedupe.rs`
//! ([`Store::claim`]), `deliveries.rs` ([`Store::delivery_begin`]), `transcript.rs` ([`Store::append`]), `sessions.rs`
//! ([`Store::touch_session`]), `history.rs` ([`Store::history_push`]), `chat_settings.rs`
//! ([`Store::chat_settings`]), `audit.rs` ([`Store::audit`]), `pairing.rs` ([`Store::pairing`]),
//! `chains.rs` ([`Store::chain_post`]), `schedule.rs` ([`Store::schedule_jobs`]), `inbox.rs`
//! ([`Store::accept`]: events not yet fully handled), `sends.rs` ([`Store::send_begin`]: posts
//! begun, so a replay never posts twice), `health.rs` ([`Store::probe`]: can it still commit?, with `write_health.rs`),
//! `prune.rs` ([`Store::prune`]: retention), `typing.rs` ([`Store::typing_opened`]: typing
//! indicators that are up, so a crash cannot leave one up), `artifacts.rs`
//! ([`Store::artifact_put`]: blobs bots hand each other), `progress.rs` ([`Store::progress_add`]:
//! how far a delivery's run has got), `reply_files.rs` ([`Store::reply_attach`]: the files a
//! run attached to its reply), `leases.rs` ([`Store::lease_round`]: which instance may connect
//! each socket account), `session_locks.rs` ([`Store::session_lock`]: one turn at a time per
//! session across instances), `turn_start.rs` ([`Store::turn_start`]: what a turn records
//! before its backend runs, in one job), `decisions.rs` ([`Store::decisions`]: what the
//! pipeline made of each event, for `baton why`). `lock.rs` ([`DatabaseLock`]) keeps a second
//! gateway off the same file; `checkpoint.rs` keeps the WAL under its bound, and
//! `log_ahead.rs` its next pages in memory.
//!
//! Writes that must decide something atomically (is this event new? which history entries has
//! this bot not seen?) run entirely inside the writer, so concurrent callers cannot race.

#[macro_use]
mod stored_name;

mod a2a_tasks;
mod artifacts;
mod audit;
mod bot_column;
mod chains;
mod chat_settings;
mod checkpoint;
mod connect;
mod contention;
mod decisions;
mod dedupe;
mod deliveries;
mod delivery_answer;
mod delivery_begin;
mod delivery_wait;
mod entry_kind;
mod error;
mod escalations;
mod health;
mod history;
mod inbox;
mod inbox_row;
#[macro_use]
mod leases;
mod local_rooms;
mod lock;
mod log_ahead;
mod migrate;
mod notices;
mod pairing;
mod progress;
mod prune;
mod readers;
mod reply_files;
mod room_export;
mod schedule;
mod sends;
mod session_locks;
mod session_wakes;
mod sessions;
mod sql;
mod sweep;
mod tail_cache;
#[cfg(test)]
pub(crate) mod testing;
mod transcript;
mod trigger_deliveries;
mod turn_start;
mod typing;
mod usage;
mod write_health;
mod writer;
mod writer_conn;

use std::sync::{Arc, Mutex};

use rusqlite::Connection;

pub use a2a_tasks::{TaskCursor, TaskPage, TaskQuery};
pub use artifacts::{Artifact, ArtifactQuery, NewArtifact, Put, content_path, sha256_hex};
pub use audit::{AuditRecord, NewAudit};
pub use chains::{
    BATON, Chain, ChainClose, ChainEntry, ChainEntryKind, ChainError, ChainOrigin, ChainQuery,
    ChainState, ChainStep, Handed, Handoff, Holder, LeftChain, NewChain, Posted, turn_run_id,
    turn_runs,
};
pub use chat_settings::{Activation, ChatSettings};
pub use decisions::{
    Decision, DecisionOutcome, DecisionQuery, DecisionStep, Explained, NewDecision, Said,
};
pub use dedupe::{Claim, DEDUPE_TTL_MS, dedupe_key, dedupe_scope};
pub use deliveries::{Delivery, DeliveryChange, DeliveryQuery, DeliveryState, Notify, SendMode};
pub use delivery_answer::Answered;
pub use delivery_begin::{Begun, NewDelivery};
pub use entry_kind::{EntryKind, Origin};
pub use error::StoreError;
pub use escalations::{
    AnswerCandidate, AnswerMatch, Escalation, EscalationKind, EscalationQuery, EscalationState,
    NewEscalation,
};
pub use history::{HistoryEntry, HistoryTake};
pub use inbox::{Filing, InboxId, Unfinished};
pub use inbox_row::InboxRowError;
pub use leases::{ClusterStatus, HeldLease, InstanceStatus, LeaseKey, LeaseRound, Registered};
pub use local_rooms::{NewRoomMessage, RoomBounds, RoomMessage, RoomWrite};
pub use lock::{DatabaseLock, LockError};
pub use migrate::{Migrated, SCHEMA_VERSION};
pub use notices::{Notice, Notices, Topic};
pub use pairing::{
    CODE_LEN, CODE_TTL_MS, MAX_PENDING_PER_ACCOUNT, Pairing, PairingApproval, PairingRecord,
};
pub use progress::ProgressLine;
pub use prune::{MIN_AGE_MS, PruneTable};
pub use reply_files::Attached;
pub use room_export::{RoomCursor, RoomLine, RoomLineKind, RoomQuery};
pub use schedule::{Advanced, LastDelivered, NEVER_DUE_MS, ScheduleRow};
pub use sends::SendStart;
pub use session_locks::Locked;
pub use session_wakes::LeftWake;
pub use sessions::SessionRecord;
pub use sql::{DbError, PgUrl};
pub use tail_cache::TailEntry;
pub use transcript::{Entry, NewEntry, TranscriptQuery};
pub use turn_start::{TurnStart, TurnStarted};
pub use typing::OpenTyping;
pub use usage::{
    Charged, LimitOverride, NewUsage, SpendQuery, Spent, UsageGroup, UsageRow, UsageSeen,
    UsageTally,
};
pub use writer::{Queued, QueuedEarly};

use chat_settings::SettingsCache;
use checkpoint::{Checkpointer, OneCheckpoint, ReadGate, WalBound};
use connect::Location;
use escalations::EscalationChats;
use notices::Bus;
use readers::{Readers, Source};
use sql::{Conn, Db, Sqlite};
use tail_cache::TailCache;
use writer::{Committed, Upkeep, Writer};

/// A handle to baton's database. Clone it freely: every clone talks to the same writer thread
/// and reader pool. Dropping the last clone stops the writer after it commits what is queued;
/// call [`Store::close`] to wait for that.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    migrated: Migrated,
    /// The instance this handle files events for (`leases.rs`, [`Store::instance_register`]);
    /// empty until one registers: nobody's, as far as other instances are concerned.
    instance: std::sync::RwLock<Arc<str>>,
    writer: Writer,
    readers: Readers,
    settings: Arc<SettingsCache>,
    escalation_chats: Arc<EscalationChats>,
    /// Copies of session tails for turns' starts (`tail_cache.rs`): SQLite only.
    tails: Option<Arc<TailCache>>,
    /// Which history pushes trim their chat's buffer (`history.rs`).
    history_trims: history::Trims,
    /// The sessions this process's touches wrote lately (`sessions.rs`).
    touched: Arc<sessions::Touched>,
    /// Notices between instances (`notices.rs`).
    bus: Bus,
    /// For a memory database: one connection held for the store's lifetime, since the
    /// database disappears when its last connection closes.
    _keeper: Option<Mutex<Connection>>,
    /// For a file database: WAL checkpoints, off the writer's path (`checkpoint.rs`).
    _checkpointer: Option<Checkpointer>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

/// The write-ahead log's default bound, in MiB (`store.wal_limit_mb`). The writer restarts the
/// log once it passes half of this, and holds still meanwhile: 1–15 ms of syncs on the VM of
/// `BENCHMARKS.md`. At 1,000 events/s the log grows about 25 MB/s, so a 64 MiB bound meant a
/// restart every 1.3 s, and those holds were the reply latency's p99. At 256 MiB the same rate
/// restarts it every ~5 s; the file stays at about 128 MiB under load, and a start after a crash reads it
/// once (~0.1–0.2 s).
pub const DEFAULT_WAL_LIMIT_MB: u64 = 256;

/// How a store is run, beyond where its file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreOptions {
    /// The size in bytes the WAL file is kept under (`store.wal_limit_mb`): the writer empties
    /// it once it passes half of this (`checkpoint.rs`).
    pub wal_limit: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            wal_limit: DEFAULT_WAL_LIMIT_MB * 1024 * 1024,
        }
    }
}

impl Store {
    /// Opens (creating if needed) the database at `path`, or a private in-memory one for
    /// `":memory:"`, brings its schema up to date and starts the writer thread.
    pub async fn open(path: &str) -> Result<Store, StoreError> {
        Store::open_with(path, StoreOptions::default()).await
    }

    /// [`Store::open`] with `options` in place of the defaults.
    pub async fn open_with(path: &str, options: StoreOptions) -> Result<Store, StoreError> {
        let location = Location::parse(path);
        tokio::task::spawn_blocking(move || Store::open_blocking(location, options))
            .await
            .map_err(|e| StoreError::Internal(format!("opening the store: {e}")))?
    }

    fn open_blocking(location: Location, options: StoreOptions) -> Result<Store, StoreError> {
        let conn = location.open_writer(options.wal_limit)?;
        let (migrated, settings, escalation_chats) =
            Sqlite::with(&conn, |db| -> Result<_, StoreError> {
                let migrated = migrate::run_migrations(db)?;
                let settings = Arc::new(SettingsCache::load(db)?);
                let escalation_chats = Arc::new(EscalationChats::load(db)?);
                Ok((migrated, settings, escalation_chats))
            })?;
        let gate = ReadGate::default();
        let (keeper, checkpointer, upkeep) = match &location {
            Location::Memory(_) => (
                Some(Mutex::new(location.open_reader()?)),
                None,
                Upkeep::Nothing,
            ),
            Location::File(path) => {
                let conn = location.open_checkpointer()?;
                let one = OneCheckpoint::default();
                let (checkpointer, copies) =
                    Checkpointer::spawn(conn, Arc::clone(&one)).map_err(|e| {
                        StoreError::Internal(format!("cannot start the checkpoint thread: {e}"))
                    })?;
                let file = format!("{path}-wal").into();
                let bound = WalBound::new(file, options.wal_limit, one, copies, Arc::clone(&gate));
                (None, Some(checkpointer), Upkeep::Wal(bound))
            }
        };
        let writer = Writer::spawn(Conn::Sqlite(conn), upkeep).map_err(|e| {
            StoreError::Internal(format!("cannot start the store writer thread: {e}"))
        })?;
        let first_reader = Conn::Sqlite(location.open_reader()?);
        let tails = TailCache::new(tail_cache::BUDGET_BYTES, writer.undone());
        tracing::debug!(database = location.display(), "store opened");
        Ok(Store {
            inner: Arc::new(Inner {
                migrated,
                instance: std::sync::RwLock::new(Arc::from("")),
                writer,
                readers: Readers::new(Source::Sqlite(location), first_reader, gate),
                settings,
                escalation_chats,
                tails: Some(Arc::new(tails)),
                history_trims: history::Trims::default(),
                touched: Arc::default(),
                bus: Bus::local(),
                _keeper: keeper,
                _checkpointer: checkpointer,
            }),
        })
    }

    /// Connects to the PostgreSQL database at `url`, brings its schema up to date and starts
    /// the writer thread.
    pub async fn open_postgres(url: PgUrl) -> Result<Store, StoreError> {
        tokio::task::spawn_blocking(move || Store::open_postgres_blocking(url))
            .await
            .map_err(|e| StoreError::Internal(format!("opening the store: {e}")))?
    }

    fn open_postgres_blocking(url: PgUrl) -> Result<Store, StoreError> {
        let conn = writer_conn::connect(&url)?;
        let migrated = migrate::run_migrations(Db::Postgres(&conn))?;
        let settings = Arc::new(SettingsCache::load(Db::Postgres(&conn))?);
        let escalation_chats = Arc::new(EscalationChats::load(Db::Postgres(&conn))?);
        let writer =
            Writer::spawn(Conn::Postgres(conn), Upkeep::Reconnect(url.clone())).map_err(|e| {
                StoreError::Internal(format!("cannot start the store writer thread: {e}"))
            })?;
        tracing::debug!(database = %url.display(), "store opened");
        let bus = Bus::listening(url.clone())?;
        let source = Source::Postgres(url);
        let first_reader = source.open_reader()?;
        Ok(Store {
            inner: Arc::new(Inner {
                migrated,
                instance: std::sync::RwLock::new(Arc::from("")),
                writer,
                readers: Readers::new(source, first_reader, ReadGate::default()),
                settings,
                escalation_chats,
                tails: None,
                history_trims: history::Trims::default(),
                touched: Arc::default(),
                bus,
                _keeper: None,
                _checkpointer: None,
            }),
        })
    }

    /// The instance this handle files events for ('' before one registers).
    fn instance(&self) -> Arc<str> {
        Arc::clone(
            &*self
                .inner
                .instance
                .read()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// From now on, events are filed as `id`'s.
    fn set_instance(&self, id: &str) {
        *self
            .inner
            .instance
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Arc::from(id);
    }

    /// Which history pushes trim their chat's buffer (`history.rs`).
    fn history_trims(&self) -> &history::Trims {
        &self.inner.history_trims
    }

    /// The sessions this process's touches wrote lately (`sessions.rs`).
    fn touched(&self) -> &Arc<sessions::Touched> {
        &self.inner.touched
    }

    /// The copies of session tails the writer keeps, where it keeps them (`tail_cache.rs`).
    fn tails(&self) -> Option<Arc<TailCache>> {
        self.inner.tails.clone()
    }

    /// The engine behind this store.
    pub(crate) fn engine(&self) -> sql::Engine {
        self.inner.bus.engine()
    }

    /// The schema versions the open found and left (what `baton migrate` reports).
    pub fn migrated(&self) -> Migrated {
        self.inner.migrated
    }

    /// Resolves once every write submitted before the call is committed.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.write(|_| Ok(())).await
    }

    /// Flush, stop the writer thread and wait for it. Later writes fail with
    /// [`StoreError::Closed`]; reads keep working. Closing twice is fine.
    pub async fn close(&self) -> Result<(), StoreError> {
        self.inner.writer.stop().await
    }

    /// Runs `work` on the writer thread; returns once it is committed. `work` may run more
    /// than once: on PostgreSQL a batch another instance's writer deadlocked with is rolled
    /// back and run again (`contention.rs`), so it must do nothing outside its transaction.
    pub(crate) async fn write<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
    {
        self.inner.writer.submit(work, None).await
    }

    /// [`Store::write`], returning once the job has its place in the writer's queue (see
    /// [`Queued`]).
    pub(crate) async fn queue<T, F>(&self, work: F) -> Result<Queued<T>, StoreError>
    where
        T: Send + 'static,
        F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
    {
        self.inner.writer.enqueue(work, None).await
    }

    /// [`Store::queue`], answered early: the job's result once it has run, then its commit's
    /// (see [`QueuedEarly`]); `after_commit` runs on the writer thread after the commit.
    pub(crate) async fn queue_early<T, F>(
        &self,
        work: F,
        after_commit: Option<Committed>,
    ) -> Result<QueuedEarly<T>, StoreError>
    where
        T: Send + 'static,
        F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
    {
        self.inner.writer.enqueue_early(work, after_commit).await
    }

    /// Like [`Store::write`], then runs `after_commit` on the writer thread, in commit order.
    pub(crate) async fn write_then<T, F>(
        &self,
        work: F,
        after_commit: impl FnOnce(&T) + Send + 'static,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
    {
        self.inner
            .writer
            .submit(work, Some(Box::new(after_commit)))
            .await
    }

    /// Runs `read` on a reader connection, off the async workers; again on a new connection
    /// when a pooled one turns out closed (`readers.rs`), hence `FnMut`.
    pub(crate) async fn read<T, F>(&self, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        match tokio::task::spawn_blocking(move || inner.readers.with(read)).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => {
                Err(StoreError::Internal(format!("a store read panicked: {e}")))
            }
            Err(_) => Err(StoreError::Closed),
        }
    }

    /// SQLite's own connection, for tests that read its pragmas.
    #[cfg(test)]
    pub(crate) async fn sqlite_read<T, F>(&self, mut read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.read(move |db| Ok(read(db.sqlite())?)).await
    }

    /// The writer's SQLite connection, for tests that read its pragmas.
    #[cfg(test)]
    pub(crate) async fn sqlite_write<T, F>(&self, mut work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.write(move |db| Ok(work(db.sqlite())?)).await
    }

    /// How many batches the writer has committed since open: with the number of writes, it
    /// shows how well writes are being batched (for metrics and tests).
    pub fn commits(&self) -> u64 {
        self.inner.writer.commits()
    }

    /// How many writes (writer jobs) those commits held.
    pub fn jobs(&self) -> u64 {
        self.inner.writer.jobs()
    }

    /// Why the writer has no connection to PostgreSQL now (it is connecting again), if it
    /// has none; always `None` on SQLite. For `/metrics` and `/readyz`.
    pub fn disconnected(&self) -> Option<String> {
        self.inner.writer.down()
    }

    /// How many times the writer connected to PostgreSQL again after losing its connection.
    pub fn reconnects(&self) -> u64 {
        self.inner.writer.reconnects()
    }

    /// Where the store's write troubles stand now: two epochs that differ mean some write may
    /// have been refused in between (a batch lost, the connection lost or found again).
    pub fn write_epoch(&self) -> WriteEpoch {
        WriteEpoch(self.inner.writer.write_epoch())
    }
}

/// A point in the store's write troubles ([`Store::write_epoch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteEpoch(u64);

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn opens_a_file_with_wal_and_reopens_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let path = path.to_str().unwrap();
        let store = Store::open(path).await.unwrap();
        let mode: String = store
            .sqlite_read(|c| c.pragma_query_value(None, "journal_mode", |r| r.get(0)))
            .await
            .unwrap();
        assert_eq!(mode, "wal");
        store.close().await.unwrap();
        store.close().await.unwrap();
        let again = Store::open(path).await.unwrap();
        assert_eq!(
            again.read(migrate::user_version).await.unwrap(),
            migrate::SCHEMA_VERSION
        );
    }

    #[tokio::test]
    async fn page_caches_and_sqlite_memory_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("baton.db").to_str().unwrap())
            .await
            .unwrap();
        let pragma = |name: &'static str| {
            move |c: &Connection| -> rusqlite::Result<i64> {
                c.pragma_query_value(None, name, |r| r.get(0))
            }
        };
        assert_eq!(store.sqlite_read(pragma("cache_size")).await.unwrap(), -256);
        assert_eq!(
            store.sqlite_write(pragma("cache_size")).await.unwrap(),
            -2048
        );
        assert_eq!(
            store.sqlite_read(pragma("soft_heap_limit")).await.unwrap(),
            8 * 1024 * 1024
        );
        // Every reader of the pool, the ones opened beyond it included.
        let reads: Vec<_> = (0..8)
            .map(|_| store.sqlite_read(pragma("cache_size")))
            .collect();
        for size in futures::future::join_all(reads).await {
            assert_eq!(size.unwrap(), -256);
        }
    }

    #[tokio::test]
    async fn open_reports_the_path_and_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no/such/dir/baton.db");
        let err = Store::open(path.to_str().unwrap()).await.unwrap_err();
        assert!(matches!(err, StoreError::Open { .. }), "{err}");
        let msg = err.to_string();
        assert!(msg.contains("no/such/dir/baton.db"), "{msg}");
        assert!(msg.contains("--database"), "{msg}");
    }

    #[tokio::test]
    async fn writes_after_close_fail_with_closed() {
        let store = Store::open(":memory:").await.unwrap();
        store.close().await.unwrap();
        let err = store.flush().await.unwrap_err();
        assert!(matches!(err, StoreError::Closed), "{err}");
    }

    /// A job answered early gives its result once it has run, while its batch is still open
    /// (a reader does not see its row yet), and its commit after. On PostgreSQL, where a
    /// collided batch runs again on a state that may have changed, it is given at the commit.
    #[tokio::test]
    async fn an_early_job_gives_its_result_before_its_commit() {
        for db in testing::engines().await {
            let (store, engine) = (db.open().await, db.engine());
            store
                .write(|db| db.execute_batch("CREATE TABLE t (x BIGINT NOT NULL)"))
                .await
                .unwrap();
            // Held, so that the early job and the one after it share the next batch.
            let first = testing::hold(&store).await.running().await;
            let early = store.queue_early(|db| db.execute("INSERT INTO t VALUES (1)", &[]), None);
            let early = early.await.unwrap().ran();
            let mut early = std::pin::pin!(early);
            assert!(futures::poll!(&mut early).is_pending(), "{engine}");
            let after = testing::hold(&store).await;
            first.let_go();
            let count =
                || store.read(|db| db.query_row("SELECT count(*) FROM t", &[], |row| row.get(0)));
            let committed = if engine == "sqlite" {
                let given = tokio::time::timeout(std::time::Duration::from_secs(10), early).await;
                let (inserted, committed) =
                    given.expect("the result waited for the commit").unwrap();
                assert_eq!(inserted, 1);
                let seen: i64 = count().await.unwrap();
                assert_eq!(seen, 0, "given before its batch committed");
                after.let_go();
                committed
            } else {
                after.let_go();
                early.await.unwrap().1
            };
            committed.answer().await.unwrap();
            first.committed().await;
            after.committed().await;
            let seen: i64 = count().await.unwrap();
            assert_eq!(seen, 1, "{engine}");
        }
    }

    #[tokio::test]
    async fn a_failing_job_does_not_poison_its_batch() {
        for db in testing::engines().await {
            a_failing_job_does_not_poison_its_batch_on(db.open().await, db.engine()).await;
        }
    }

    async fn a_failing_job_does_not_poison_its_batch_on(store: Store, engine: &str) {
        store
            .write(|db| db.execute_batch("CREATE TABLE t (x BIGINT NOT NULL)"))
            .await
            .unwrap();
        // Hold the writer busy so the next four jobs queue up and run as one batch.
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let blocker = tokio::spawn({
            let store = store.clone();
            async move {
                store
                    .write(move |_| {
                        started_tx.send(()).unwrap();
                        std::thread::sleep(std::time::Duration::from_millis(200));
                        Ok(())
                    })
                    .await
            }
        });
        tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
            .await
            .unwrap();
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let good = |x: i64| {
            let (store, runs) = (store.clone(), Arc::clone(&runs));
            async move {
                store
                    .write(move |db| {
                        runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        db.execute("INSERT INTO t VALUES (?1)", sql::args![x])
                    })
                    .await
            }
        };
        let bad = store.write(|db| {
            db.execute("INSERT INTO t VALUES (99)", &[])?;
            db.execute("INSERT INTO t VALUES (NULL)", &[])
        });
        let panics = store.write(|db| -> Result<(), DbError> {
            db.execute("INSERT INTO t VALUES (98)", &[])?;
            panic!("boom")
        });
        let before = store.commits();
        let (one, bad, panics, two) = tokio::join!(good(1), bad, panics, good(2));
        blocker.await.unwrap().unwrap();
        one.unwrap();
        two.unwrap();
        assert!(
            matches!(bad, Err(StoreError::Sqlite(_) | StoreError::Query(_))),
            "{engine}: {bad:?}"
        );
        assert!(
            matches!(panics, Err(StoreError::Internal(_))),
            "{engine}: {panics:?}"
        );
        assert_eq!(
            store.commits() - before,
            2,
            "{engine}: blocker, then one batch of four"
        );
        let rows: Vec<i64> = store
            .read(|db| db.query_map("SELECT x FROM t ORDER BY x", &[], |r| r.get(0)))
            .await
            .unwrap();
        assert_eq!(
            rows,
            vec![1, 2],
            "{engine}: the failed jobs left nothing behind"
        );
        // Straight in the batch's transaction up to the first failure (`one`), then again,
        // each job in a savepoint (`one` and `two`).
        assert_eq!(
            runs.load(std::sync::atomic::Ordering::Relaxed),
            3,
            "{engine}"
        );
        good(3).await.unwrap();
        assert_eq!(
            runs.load(std::sync::atomic::Ordering::Relaxed),
            4,
            "{engine}: a batch in which no job fails runs each once"
        );
    }

    #[tokio::test]
    async fn memory_stores_are_private_and_readers_see_writes() {
        let a = Store::open(":memory:").await.unwrap();
        let b = Store::open(":memory:").await.unwrap();
        a.sqlite_write(|c| c.execute_batch("CREATE TABLE only_a (x)"))
            .await
            .unwrap();
        let count = |s: &Store| {
            let s = s.clone();
            async move {
                s.sqlite_read(|c| {
                    c.query_row(
                        "SELECT count(*) FROM sqlite_schema WHERE name = 'only_a'",
                        [],
                        |r| r.get::<_, i64>(0),
                    )
                })
                .await
                .unwrap()
            }
        };
        assert_eq!(count(&a).await, 1);
        assert_eq!(count(&b).await, 0);
    }
}
