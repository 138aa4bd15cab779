//! Notices: "this row changed, look again", announced with the write that changed it, heard by
//! every instance sharing the database. They wake what waits on another instance's work (a
//! delivery's reply, a session lock let go) without anyone polling the store.
//!
//! A notice is only a hint; the store stays the truth. A listener re-reads the rows it cares
//! about on every notice of its topic and whenever it hears [`Notice::Missed`]: the listening
//! connection was lost and may have dropped some, or a subscriber fell too far behind.
//!
//! PostgreSQL: the write's job runs `pg_notify` in its own transaction, so the notice goes out
//! at commit and never before the rows it announces are visible (and never for a write rolled
//! back). Each instance keeps ONE listening connection (`LISTEN baton`) on a thread of its own,
//! blocked on the driver's notifications, and fans them out in-process on a broadcast channel.
//! If that connection drops, the thread reconnects with a growing pause and then tells every
//! subscriber [`Notice::Missed`]. SQLite: one process, so the same channel is fed on the writer
//! thread right after the commit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;
use tokio::sync::broadcast;

use super::sql::{Db, DbError, Engine, PgUrl, args};
use super::writer::{AfterCommit, Committed, Queued, QueuedEarly};
use super::{Store, StoreError};

/// The PostgreSQL channel every instance listens on.
const CHANNEL: &str = "baton";

/// How many notices a subscriber may fall behind before it is told it missed some.
const BACKLOG: usize = 1024;

/// How long the listening thread blocks between looks at whether the store was closed.
const WAKE: Duration = Duration::from_secs(1);

/// The longest pause between two attempts to reconnect the listening connection.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

stored_name! {
    /// What kind of row a notice is about; its key says which.
    Topic, "notice topic" {
        /// A delivery (key: its run id) moved: running, or settled.
        Delivery = "delivery",
        /// A delivery (key: its run id) was queued for the target's home instance to claim.
        Handed = "handed",
        /// A session's lock (key: the lock's name) was let go.
        SessionFree = "session_free",
        /// A chat's settings (key: its chat key) were changed by an admin command.
        ChatSettings = "chat_settings",
        /// A message for a session of a bot (key: the bot's id) was handed to its home instance.
        Wake = "wake",
        /// A bot asked a question in a chat (key: `<platform>:<chat>`): its messages may answer.
        Escalation = "escalation",
    }
}

/// What a subscriber hears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// `key`'s row of `topic` changed: read it again.
    Changed {
        /// The kind of row.
        topic: Topic,
        /// Which row.
        key: String,
    },
    /// Some notices may have been lost (the listening connection dropped, or this subscriber
    /// fell behind): read again whatever is being waited for.
    Missed,
}

impl Notice {
    /// Whether this notice may concern `key` of `topic` (a [`Notice::Missed`] may concern
    /// anything).
    pub fn touches(&self, topic: Topic, key: &str) -> bool {
        match self {
            Notice::Changed { topic: t, key: k } => *t == topic && k == key,
            Notice::Missed => true,
        }
    }

    fn payload(topic: Topic, key: &str) -> String {
        format!("{}:{key}", topic.as_str())
    }

    fn parse(payload: &str) -> Option<Notice> {
        let (topic, key) = payload.split_once(':')?;
        Some(Notice::Changed {
            topic: topic.parse().ok()?,
            key: key.to_owned(),
        })
    }
}

/// One subscription: every notice published after it was made.
pub struct Notices {
    rx: broadcast::Receiver<Notice>,
}

impl Notices {
    /// The next notice; [`Notice::Missed`] when this subscriber fell behind. Pends forever once
    /// the store is gone (callers wait on it beside a deadline or a shutdown).
    pub async fn next(&mut self) -> Notice {
        match self.rx.recv().await {
            Ok(notice) => notice,
            Err(broadcast::error::RecvError::Lagged(_)) => Notice::Missed,
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }

    /// Waits for a notice that may concern `key` of `topic`.
    pub async fn touching(&mut self, topic: Topic, key: &str) {
        while !self.next().await.touches(topic, key) {}
    }
}

/// The in-process side of the notices, and for PostgreSQL the listening thread feeding it.
pub(super) struct Bus {
    tx: broadcast::Sender<Notice>,
    engine: Engine,
    /// Set when the store goes: the listening thread stops.
    closed: Arc<AtomicBool>,
}

impl Drop for Bus {
    fn drop(&mut self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}

impl Bus {
    /// The bus of a SQLite store: in-process only.
    pub(super) fn local() -> Bus {
        Bus {
            tx: broadcast::channel(BACKLOG).0,
            engine: Engine::Sqlite,
            closed: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The bus of a PostgreSQL store, with its listening connection made now (so a server that
    /// refuses it fails the open, with the reason) and kept on its own thread.
    pub(super) fn listening(url: PgUrl) -> Result<Bus, StoreError> {
        let client = listen(&url)?;
        let bus = Bus {
            tx: broadcast::channel(BACKLOG).0,
            engine: Engine::Postgres,
            closed: Arc::new(AtomicBool::new(false)),
        };
        let (tx, closed) = (bus.tx.clone(), Arc::clone(&bus.closed));
        std::thread::Builder::new()
            .name("baton-store-listen".into())
            .spawn(move || listen_loop(url, client, &tx, &closed))
            .map_err(|e| StoreError::Internal(format!("cannot start the listening thread: {e}")))?;
        Ok(bus)
    }

    /// The engine of the store it belongs to.
    pub(super) fn engine(&self) -> Engine {
        self.engine
    }

    fn subscribe(&self) -> Notices {
        Notices {
            rx: self.tx.subscribe(),
        }
    }
}

/// Connects and listens on [`CHANNEL`].
fn listen(url: &PgUrl) -> Result<postgres::Client, StoreError> {
    let mut client = url.client()?;
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .map_err(|e| StoreError::Connect {
            target: url.display(),
            reason: url.scrub(&DbError::from(e).to_string()),
        })?;
    Ok(client)
}

/// Hands every notification to the subscribers until the store closes; reconnects when the
/// connection drops, then tells them they may have missed some.
fn listen_loop(
    url: PgUrl,
    mut client: postgres::Client,
    tx: &broadcast::Sender<Notice>,
    closed: &AtomicBool,
) {
    while !closed.load(Ordering::Relaxed) {
        let lost = {
            let mut heard = client.notifications();
            let mut iter = heard.timeout_iter(WAKE);
            loop {
                match iter.next() {
                    Ok(Some(n)) => {
                        if let Some(notice) = Notice::parse(n.payload()) {
                            // No subscriber yet is not an error: nobody waits for anything.
                            let _ = tx.send(notice);
                        }
                    }
                    Ok(None) => break false,
                    Err(err) => {
                        tracing::warn!(err = %url.scrub(&err.to_string()), "the store's listening connection failed; reconnecting");
                        break true;
                    }
                }
            }
        };
        if !lost && !client.is_closed() {
            continue;
        }
        let mut pause = Duration::from_millis(100);
        client = loop {
            if closed.load(Ordering::Relaxed) {
                return;
            }
            std::thread::sleep(pause);
            match listen(&url) {
                Ok(client) => break client,
                Err(err) => {
                    tracing::warn!(%err, "cannot reconnect the store's listening connection; trying again");
                    pause = (pause * 2).min(MAX_BACKOFF);
                }
            }
        };
        tracing::info!("the store's listening connection is back; waiters read the store again");
        let _ = tx.send(Notice::Missed);
    }
}

/// Announces `topic`/`key` from inside a write job: on PostgreSQL it leaves at the job's commit.
/// On SQLite the caller's [`Store::write_announcing`] sends it after the commit.
pub(super) fn announce_in(db: Db<'_>, topic: Topic, key: &str) -> Result<(), DbError> {
    match db.engine() {
        Engine::Sqlite => Ok(()),
        Engine::Postgres => db.execute_pipelined(
            "SELECT pg_notify(?1, ?2)",
            args![CHANNEL, Notice::payload(topic, key).as_str()],
        ),
    }
}

impl Store {
    /// Every notice published from now on, by any instance sharing the database.
    pub fn subscribe(&self) -> Notices {
        self.inner.bus.subscribe()
    }

    /// [`Store::write`], announcing `topic`/`key` to every instance once it is committed.
    pub(crate) async fn write_announcing<T, F>(
        &self,
        topic: Topic,
        key: &str,
        work: F,
    ) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
    {
        self.queue_announcing(topic, key, work)
            .await?
            .answer()
            .await
    }

    /// [`Store::write_announcing`], returning once the job has its place in the writer's
    /// queue (see [`Queued`]).
    pub(crate) async fn queue_announcing<T, F>(
        &self,
        topic: Topic,
        key: &str,
        work: F,
    ) -> Result<Queued<T>, StoreError>
    where
        T: Send + 'static,
        F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
    {
        let (job, sent) = self.announcing(topic, key, work);
        let sent = sent.map(|sent| -> AfterCommit<T> { Box::new(move |_| sent()) });
        self.inner.writer.enqueue(job, sent).await
    }

    /// [`Store::queue_announcing`], answered early: its result once it has run, then its
    /// commit's (see [`Writer::enqueue_early`]).
    ///
    /// [`Writer::enqueue_early`]: super::writer::Writer::enqueue_early
    pub(crate) async fn queue_early_announcing<T, F>(
        &self,
        topic: Topic,
        key: &str,
        work: F,
    ) -> Result<QueuedEarly<T>, StoreError>
    where
        T: Send + 'static,
        F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
    {
        let (job, sent) = self.announcing(topic, key, work);
        self.queue_early(job, sent).await
    }

    /// `work` announcing `topic`/`key` when it commits: on PostgreSQL from inside the job (the
    /// `NOTIFY` leaves at the commit), on SQLite by what is returned beside it, run once the
    /// job's batch has committed.
    fn announcing<T, F>(
        &self,
        topic: Topic,
        key: &str,
        mut work: F,
    ) -> (
        impl FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
        Option<Committed>,
    )
    where
        T: Send + 'static,
        F: FnMut(Db<'_>) -> Result<T, DbError> + Send + 'static,
    {
        let key = key.to_owned();
        let announced = key.clone();
        let job = move |db: Db<'_>| {
            let done = work(db)?;
            announce_in(db, topic, &announced)?;
            Ok(done)
        };
        let sent = match self.inner.bus.engine() {
            Engine::Postgres => None,
            Engine::Sqlite => {
                let tx = self.inner.bus.tx.clone();
                let sent: Committed = Box::new(move || {
                    let _ = tx.send(Notice::Changed { topic, key });
                });
                Some(sent)
            }
        };
        (job, sent)
    }

    /// Announces `topic`/`key` with no write of its own (what it announces is committed).
    pub async fn announce(&self, topic: Topic, key: &str) -> Result<(), StoreError> {
        self.write_announcing(topic, key, |_| Ok(())).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::engines;

    #[test]
    fn a_payload_reads_back_and_junk_is_ignored() {
        let payload = Notice::payload(Topic::Delivery, "run_1:x");
        assert_eq!(
            Notice::parse(&payload),
            Some(Notice::Changed {
                topic: Topic::Delivery,
                key: "run_1:x".into()
            })
        );
        assert_eq!(Notice::parse("nope"), None);
        assert_eq!(Notice::parse("other:k"), None);
    }

    /// A notice reaches the subscribers of another store handle on the same database (another
    /// instance; on SQLite there is only ever one), after the write it announces is committed.
    #[tokio::test]
    async fn a_notice_reaches_every_instance_after_its_write() {
        for db in engines().await {
            let a = db.open().await;
            let b = match db.url() {
                Some(_) => db.open().await,
                None => a.clone(),
            };
            let mut heard = b.subscribe();
            let mut own = a.subscribe();
            a.write_announcing(Topic::Delivery, "run_7", |db| {
                db.execute(
                    "INSERT INTO instances (id, started_ms, renewed_ms, version)
                     VALUES ('x', 1, 1, 'v')",
                    &[],
                )
                .map(drop)
            })
            .await
            .unwrap();
            for subscriber in [&mut heard, &mut own] {
                let notice = tokio::time::timeout(Duration::from_secs(10), subscriber.next())
                    .await
                    .unwrap_or_else(|_| panic!("no notice within 10 s on {}", db.engine()));
                let expected = Notice::Changed {
                    topic: Topic::Delivery,
                    key: "run_7".into(),
                };
                assert_eq!(notice, expected, "{}", db.engine());
            }
            let rows: i64 = b
                .read(|db| db.query_row("SELECT COUNT(*) FROM instances", &[], |r| r.get(0)))
                .await
                .unwrap();
            assert_eq!(rows, 1, "the notice came after the write was visible");
        }
    }
}
