//! Test support: the same store test on both engines.
//!
//! `for db in engines().await { let store = db.open().await; ... }` runs a test's body on a
//! fresh SQLite file and on a fresh PostgreSQL database (of this process's throwaway cluster,
//! `cluster.rs`). [`TestDb::open`] may be called again to reopen the same database, as a restart
//! would.

mod cluster;

pub(crate) use cluster::tls_cluster;

use super::sql::{Conn, PgConn};
use super::{PgUrl, Store};

/// One fresh database of either engine.
pub(crate) struct TestDb {
    kind: Kind,
}

enum Kind {
    Sqlite {
        _dir: tempfile::TempDir,
        path: String,
    },
    Postgres {
        url: String,
    },
}

impl TestDb {
    /// A new SQLite file in a temporary directory.
    pub(crate) fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("baton.db").to_str().unwrap().to_owned();
        TestDb {
            kind: Kind::Sqlite { _dir: dir, path },
        }
    }

    /// A new database in this process's PostgreSQL cluster.
    pub(crate) async fn postgres() -> TestDb {
        let url = tokio::task::spawn_blocking(|| {
            let cluster = cluster::cluster();
            cluster.url(&cluster.create_database())
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        TestDb {
            kind: Kind::Postgres { url },
        }
    }

    /// The engine's name, for assertion messages.
    pub(crate) fn engine(&self) -> &'static str {
        match self.kind {
            Kind::Sqlite { .. } => "sqlite",
            Kind::Postgres { .. } => "postgres",
        }
    }

    /// The PostgreSQL database's connection settings (`None` for SQLite).
    pub(crate) fn url(&self) -> Option<&str> {
        match &self.kind {
            Kind::Sqlite { .. } => None,
            Kind::Postgres { url } => Some(url),
        }
    }

    /// Opens (or reopens) the store on this database.
    pub(crate) async fn open(&self) -> Store {
        // Shown with a failing test's output: which engine it failed on.
        eprintln!("store test on {}", self.engine());
        match &self.kind {
            Kind::Sqlite { path, .. } => Store::open(path).await,
            Kind::Postgres { url } => Store::open_postgres(PgUrl::parse(url).unwrap()).await,
        }
        .unwrap_or_else(|e| panic!("opening the {} test store: {e}", self.engine()))
    }
}

impl TestDb {
    /// A bare connection to the database (no migrations run). Blocking: call it, and use the
    /// connection, inside `spawn_blocking`.
    pub(crate) fn connect(&self) -> Conn {
        match &self.kind {
            Kind::Sqlite { path, .. } => Conn::Sqlite(rusqlite::Connection::open(path).unwrap()),
            Kind::Postgres { url } => {
                Conn::Postgres(PgConn::connect(&PgUrl::parse(url).unwrap()).unwrap())
            }
        }
    }
}

/// A job holding `store`'s writer until let go ([`Held::let_go`]), queued by [`hold`].
pub(crate) struct Held {
    release: std::sync::mpsc::Sender<()>,
    running: std::sync::mpsc::Receiver<()>,
    job: super::Queued<()>,
}

/// Queue a job that holds the writer until released: jobs queued meanwhile wait behind it.
pub(crate) async fn hold(store: &Store) -> Held {
    let (release, held) = std::sync::mpsc::channel();
    let (started, running) = std::sync::mpsc::channel();
    let job = store.queue(move |_| {
        let _ = started.send(());
        let _ = held.recv();
        Ok(())
    });
    Held {
        release,
        running,
        job: job.await.expect("the writer is running"),
    }
}

impl Held {
    /// Once the writer runs the held job: a job queued from then on goes into a later batch.
    pub(crate) async fn running(self) -> Self {
        tokio::task::spawn_blocking(move || {
            self.running.recv().expect("the held job runs");
            self
        })
        .await
        .expect("waiting for the held job")
    }

    /// Let the writer go on.
    pub(crate) fn let_go(&self) {
        self.release.send(()).expect("the held job waits");
    }

    /// Once the held job (let go) has committed.
    pub(crate) async fn committed(self) {
        self.job.answer().await.expect("the held job commits");
    }
}

/// A fresh database of each engine: SQLite, then PostgreSQL.
pub(crate) async fn engines() -> [TestDb; 2] {
    [TestDb::sqlite(), TestDb::postgres().await]
}
