//! A real PostgreSQL for the tests where PostgreSQL is the subject (several instances on one
//! database): the same throwaway cluster the store's own tests use, started once per test
//! process from Debian's server binaries, each test on a database of its own.
//!
//! Without the binaries a test fails, saying how to install them: CI always has them.

#[path = "../../src/store/testing/cluster.rs"]
mod cluster;

/// The environment variable the test configs name in `[gateway] database_url_env`.
pub const URL_ENV: &str = "BATON_DATABASE_URL";

/// A fresh, empty database: the connection settings to put in [`URL_ENV`].
pub async fn database() -> String {
    tokio::task::spawn_blocking(|| {
        let cluster = cluster::cluster();
        cluster.url(&cluster.create_database())
    })
    .await
    .expect("creating a test database")
}

/// A PostgreSQL server of the caller's own, which it may restart.
pub struct OwnServer(cluster::Cluster);

impl OwnServer {
    /// Started, with one fresh database: the server and that database's connection settings.
    pub async fn start() -> (OwnServer, String) {
        tokio::task::spawn_blocking(|| {
            let cluster = cluster::Cluster::own();
            let url = cluster.url(&cluster.create_database());
            (OwnServer(cluster), url)
        })
        .await
        .expect("starting a PostgreSQL server")
    }

    /// `pg_ctl restart -m fast`: every connection is dropped; back when this returns.
    pub async fn restart(&self) {
        let cluster = self.0.clone();
        tokio::task::spawn_blocking(move || cluster.restart())
            .await
            .expect("restarting PostgreSQL");
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.0.remove();
    }
}
