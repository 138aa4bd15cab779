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

/// A PostgreSQL server of the test's own, which it stops and starts again (a server that goes
/// away mid-run), with one fresh database: the server, and the connection settings to put in
/// [`URL_ENV`].
pub async fn own_server(name: &'static str) -> (Server, String) {
    tokio::task::spawn_blocking(move || {
        let cluster = cluster::own_cluster(name);
        let url = cluster.url(&cluster.create_database());
        (Server(cluster), url)
    })
    .await
    .expect("starting a PostgreSQL server of the test's own")
}

/// A server of a test's own ([`own_server`]).
pub struct Server(cluster::Cluster);

impl Server {
    /// Stops it as an operator's restart does (`pg_ctl stop -m fast`: every connection ended).
    pub async fn stop(&self) {
        let cluster = &self.0;
        tokio::task::block_in_place(|| cluster.stop());
    }

    /// Starts it again on the same data.
    pub async fn start(&self) {
        let cluster = &self.0;
        tokio::task::block_in_place(|| cluster.start_again());
    }

    /// `pg_ctl restart -m fast`: every connection is dropped; back when this returns.
    pub async fn restart(&self) {
        let cluster = &self.0;
        tokio::task::block_in_place(|| cluster.restart());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.0.remove();
    }
}
