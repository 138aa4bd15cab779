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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::gateway::testing::echo_config;
    use crate::gateway::{Gateway, StartOptions};
    use crate::store::testing::TestDb;

    fn config_naming(variable: &str) -> Config {
        let mut config = Config::from_toml(&echo_config(&["snark"], ""), Path::new("."), &|_| None)
            .expect("a valid config");
        config.gateway.database_url_env = Some(variable.to_owned());
        config
    }

    #[test]
    fn an_unset_or_bad_url_is_refused_naming_the_variable_never_the_url() {
        let config = config_naming("BATON_DATABASE_URL");
        let unset = Database::configured(&config, &|_| None)
            .unwrap_err()
            .to_string();
        assert!(unset.contains("`BATON_DATABASE_URL` is not set"), "{unset}");
        let bad = |_: &str| Some("postgres://baton:pw-s3cret@db:port/baton".to_owned());
        let bad = Database::configured(&config, &bad).unwrap_err().to_string();
        assert!(bad.contains("is not a PostgreSQL URL"), "{bad}");
        assert!(!bad.contains("pw-s3cret"), "{bad}");
        let good = |_: &str| Some("postgres://baton:pw-s3cret@db:5433/baton".to_owned());
        let good = Database::configured(&config, &good).unwrap();
        assert_eq!(
            good.display(),
            "postgres://baton@db:5433/baton?sslmode=prefer"
        );
    }

    #[tokio::test]
    async fn a_gateway_starts_on_postgres_and_keeps_what_it_writes_there() {
        let db = TestDb::postgres().await;
        let url = db.url().expect("a PostgreSQL test database").to_owned();
        let env = move |name: &str| (name == "BATON_DATABASE_URL").then(|| url.clone());
        let config = config_naming("BATON_DATABASE_URL");
        let gateway = Gateway::start_with_env(config, StartOptions::default(), &env)
            .await
            .expect("a gateway on a complete PostgreSQL store starts");
        gateway
            .store()
            .probe(1)
            .await
            .expect("it commits on PostgreSQL");
        assert!(gateway.shutdown().await, "it stops cleanly");
        let reopened = db.open().await;
        reopened
            .probe(2)
            .await
            .expect("the same database, reopened");
    }
}
