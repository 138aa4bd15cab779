//! Which database the store is: the SQLite file of `gateway.database`, or, when
//! `gateway.database_url_env` is set, the PostgreSQL database whose URL that variable holds.
//! `baton run` and `baton migrate` both open it here, so they never disagree.

use crate::config::Config;
use crate::store::{PgUrl, Store, StoreOptions};

use super::StartError;

/// Where the store is, as configured.
#[derive(Debug)]
pub enum Database {
    /// A SQLite file (or `":memory:"`).
    Sqlite(String),
    /// A PostgreSQL database.
    Postgres(PgUrl),
}

impl Database {
    /// The configured database, reading the URL from `env` when `gateway.database_url_env` is
    /// set. The URL is never repeated in an error (it holds a password).
    pub fn configured(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Database, StartError> {
        let Some(name) = &config.gateway.database_url_env else {
            return Ok(Database::Sqlite(config.gateway.database.clone()));
        };
        let url = env(name).filter(|url| !url.is_empty()).ok_or_else(|| {
            StartError::DatabaseUrl(format!(
                "environment variable `{name}` is not set or is empty; export it with the \
                 PostgreSQL URL, or remove the key to use the SQLite file of `gateway.database`"
            ))
        })?;
        let url = PgUrl::parse(&url).map_err(|why| {
            StartError::DatabaseUrl(format!("environment variable `{name}` {why}"))
        })?;
        Ok(Database::Postgres(url))
    }

    /// Where it is, for messages (a URL without its password).
    pub fn display(&self) -> String {
        match self {
            Database::Sqlite(path) => path.clone(),
            Database::Postgres(url) => url.display(),
        }
    }

    /// Opens the store on it, migrating its schema to this build's.
    pub async fn open(self, options: StoreOptions) -> Result<Store, StartError> {
        Ok(match self {
            Database::Sqlite(path) => Store::open_with(&path, options).await?,
            Database::Postgres(url) => Store::open_postgres(url).await?,
        })
    }
}
