//! The PostgreSQL side of the layer: [`PgConn`] (a connection with its prepared statements) and
//! [`PgUrl`] (where the server is; it holds a password, so it never reaches a log or an error).
//!
//! The synchronous `postgres` client is a thin wrapper over `tokio-postgres` that drives each
//! connection on a small runtime of its own. That keeps the store's thread model identical on
//! both engines: the writer thread and reads in `spawn_blocking` block on their connection,
//! never a tokio worker. (Blocking on it from inside an async task would panic; both places the
//! store uses it are outside any.)

use std::cell::{RefCell, RefMut};
use std::collections::HashMap;
use std::fmt;

use postgres::fallible_iterator::FallibleIterator;
use postgres::types::ToSql;
use postgres::{Client, Statement};

use super::tls::SslSettings;
use super::{DbError, Value};
use crate::store::StoreError;

/// A PostgreSQL connection URL (`postgres://user:password@host/db`, or the key=value form),
/// with its TLS settings (`sslmode`, `sslrootcert`: `tls.rs`). Debug and [`PgUrl::display`]
/// leave the password out.
#[derive(Clone)]
pub struct PgUrl {
    config: Box<postgres::Config>,
    password: Option<String>,
    ssl: SslSettings,
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

impl PgUrl {
    /// Parses `url`; the error never repeats the URL (it may hold a password).
    pub fn parse(url: &str) -> Result<PgUrl, String> {
        let (ssl, url) = SslSettings::take_from(url)?;
        let mut config = url.parse::<postgres::Config>().map(Box::new).map_err(|e| {
            format!(
                "is not a PostgreSQL URL ({}); write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE",
                scrub(&e.to_string(), None)
            )
        })?;
        config.ssl_mode(ssl.driver_mode());
        let password = config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        Ok(PgUrl {
            config,
            password,
            ssl,
        })
    }

    /// Where it points, for messages: `postgres://user@host:port/db?sslmode=...`, with no
    /// password (the port is the default 5432 when the URL names none).
    pub fn display(&self) -> String {
        let user = self.config.get_user().unwrap_or("?");
        let hosts: Vec<String> = self
            .config
            .get_hosts()
            .iter()
            .map(|h| match h {
                postgres::config::Host::Tcp(name) => name.clone(),
                postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .collect();
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        let db = self.config.get_dbname().unwrap_or(user);
        format!(
            "postgres://{user}@{}:{port}/{db}?sslmode={}",
            hosts.join(","),
            self.ssl.mode().as_str()
        )
    }

    /// A bare client connected to the server (the listening connection of `notices.rs`, and
    /// every [`PgConn`]). Blocking: call it off the async workers.
    pub(crate) fn client(&self) -> Result<Client, StoreError> {
        self.config
            .connect(self.ssl.connector())
            .map_err(|e| StoreError::Connect {
                target: self.display(),
                reason: self.scrub(&DbError::from(e).to_string()),
            })
    }

    /// `message` with this URL's password replaced, should a driver message ever echo it.
    pub(crate) fn scrub(&self, message: &str) -> String {
        scrub(message, self.password.as_deref())
    }
}

fn scrub(message: &str, password: Option<&str>) -> String {
    match password {
        Some(p) if !p.is_empty() => message.replace(p, "***"),
        _ => message.to_owned(),
    }
}

/// One connection to the server, with a prepared statement per SQL text run on it.
pub(crate) struct PgConn {
    /// Always `Some` until dropped (`Drop` takes it). Boxed: a client is large, and
    /// connections of both engines share an enum (`Conn`).
    client: Option<Box<RefCell<Client>>>,
    statements: RefCell<HashMap<String, Statement>>,
}

/// A client closes its connection by blocking on its own runtime, which panics on a tokio
/// worker; and the last store handle (with the reader pool) is usually dropped on one. So the
/// client is closed on a thread of its own.
impl Drop for PgConn {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let closing = std::thread::Builder::new()
                .name("baton-store-close".into())
                .spawn(move || drop(client));
            if let Err(e) = closing {
                tracing::warn!(error = %e, "cannot close a PostgreSQL connection cleanly");
            }
        }
    }
}

impl PgConn {
    /// Connects to `url`. Blocking: call it off the async workers.
    pub(crate) fn connect(url: &PgUrl) -> Result<PgConn, StoreError> {
        let client = url.client()?;
        Ok(PgConn {
            client: Some(Box::new(RefCell::new(client))),
            statements: RefCell::new(HashMap::new()),
        })
    }

    fn client(&self) -> RefMut<'_, Client> {
        self.client
            .as_ref()
            .expect("a connection is open until dropped")
            .borrow_mut()
    }

    /// The prepared statement for `sql`, preparing it (with `?N` rewritten to `$N`) on first
    /// use.
    fn statement(&self, sql: &str) -> Result<Statement, DbError> {
        if let Some(stmt) = self.statements.borrow().get(sql) {
            return Ok(stmt.clone());
        }
        let stmt = self.client().prepare(&placeholders(sql))?;
        self.statements
            .borrow_mut()
            .insert(sql.to_owned(), stmt.clone());
        Ok(stmt)
    }

    pub(super) fn execute(&self, sql: &str, args: &[Value<'_>]) -> Result<usize, DbError> {
        let stmt = self.statement(sql)?;
        let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a as _).collect();
        let changed = self.client().execute(&stmt, &params)?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    pub(super) fn is_closed(&self) -> bool {
        self.client().is_closed()
    }

    pub(super) fn execute_batch(&self, sql: &str) -> Result<(), DbError> {
        Ok(self.client().batch_execute(sql)?)
    }

    pub(super) fn query_each(
        &self,
        sql: &str,
        args: &[Value<'_>],
        limit: usize,
        mut each: impl FnMut(&postgres::Row) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let stmt = self.statement(sql)?;
        let mut client = self.client();
        let mut rows = client.query_raw(&stmt, args.iter().map(|a| a as &dyn ToSql))?;
        let mut seen = 0;
        while seen < limit
            && let Some(row) = rows.next()?
        {
            each(&row)?;
            seen += 1;
        }
        Ok(())
    }
}

/// `sql` with SQLite's `?N` placeholders written PostgreSQL's way, `$N`; string literals and
/// quoted names are left alone.
pub(crate) fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut quote = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '?') if chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push('$');
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_rewritten_outside_quotes_only() {
        assert_eq!(
            placeholders("SELECT ?1, '?2', \"a?3\" WHERE x = ?12 AND y = ?"),
            "SELECT $1, '?2', \"a?3\" WHERE x = $12 AND y = ?"
        );
    }

    #[test]
    fn a_url_shows_no_password() {
        let url = PgUrl::parse("postgres://baton:s3cret-pw@db.example:5433/baton").unwrap();
        assert_eq!(
            url.display(),
            "postgres://baton@db.example:5433/baton?sslmode=prefer"
        );
        assert!(!format!("{url:?}").contains("s3cret-pw"));
        assert_eq!(
            url.scrub("auth failed for s3cret-pw"),
            "auth failed for ***"
        );
        let err = PgUrl::parse("postgres://baton:s3cret-pw@db.example:notaport/baton").unwrap_err();
        assert!(!err.contains("s3cret-pw"), "{err}");
        assert!(err.contains("postgres://USER:PASSWORD@HOST"), "{err}");
    }
}
