//! The PostgreSQL side of the layer: [`PgConn`] (a connection with its prepared statements) and
//! [`PgUrl`] (where the server is; it holds a password, so it never reaches a log or an error).
//!
//! A [`PgConn`] is a `tokio-postgres` client whose connection is driven on the calling thread,
//! on a small runtime of its own, only while a call waits for an answer (as the synchronous
//! `postgres` client does). That keeps the store's thread model identical on both engines: the
//! writer thread and reads in `spawn_blocking` block on their connection, never a tokio worker.
//!
//! What the synchronous client cannot do is pipeline. A statement whose answer its job does
//! not read ([`PgConn::send`]: an insert, a delete, a notice) is only queued: it goes out with
//! the next statement that waits, in the same write to the socket, and its answer is read in
//! order before that one's. A batch of writer jobs then costs about one round trip per
//! statement whose result a job needs (a claim's count, a new row's id, a read), plus the
//! commit, instead of one per statement. A queued statement's error is reported by the next
//! call that waits ([`PgConn::flush`] at the latest), which the writer does before a job's
//! savepoint is released and before the commit (`writer.rs`).

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures::StreamExt;
use postgres::types::ToSql;
use tokio_postgres::{Client, Statement};

use super::tls::SslSettings;
use super::value::OwnedValue;
use super::{DbError, Value};
use crate::store::StoreError;

/// A PostgreSQL connection URL (`postgres://user:password@host/db`, or the key=value form),
/// with its TLS settings (`sslmode`, `sslrootcert`: `tls.rs`). Debug and [`PgUrl::display`]
/// leave the password out.
#[derive(Clone)]
pub struct PgUrl {
    config: Box<tokio_postgres::Config>,
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
        let mut config = url.parse::<tokio_postgres::Config>().map(Box::new).map_err(|e| {
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
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
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

    /// A bare synchronous client connected to the server (the listening connection of
    /// `notices.rs`). Blocking: call it off the async workers.
    pub(crate) fn client(&self) -> Result<postgres::Client, StoreError> {
        postgres::Config::from((*self.config).clone())
            .connect(self.ssl.connector())
            .map_err(|e| self.connect_error(e))
    }

    fn connect_error(&self, e: tokio_postgres::Error) -> StoreError {
        StoreError::Connect {
            target: self.display(),
            reason: self.scrub(&DbError::from(e).to_string()),
        }
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

/// A statement sent, its answer not read yet.
type Sent = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send>>;

/// The server connection's own future: reads and writes the socket while it is polled.
type Driver = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send>>;

/// One connection to the server, with a prepared statement per SQL text run on it.
pub(crate) struct PgConn {
    client: Arc<Client>,
    link: RefCell<Link>,
    statements: RefCell<HashMap<String, Statement>>,
}

/// What drives the connection: polled on the calling thread while a call waits.
struct Link {
    /// Always `Some` until dropped (`Drop` takes it).
    runtime: Option<tokio::runtime::Runtime>,
    /// `None` once the connection ended.
    driver: Option<Driver>,
    /// Why the connection ended, when it ended on an error.
    ended: Option<String>,
    /// Statements sent without waiting ([`PgConn::send`]), in order, their answers not read.
    sent: VecDeque<Sent>,
    /// The first error among the answers read for them, not reported yet.
    failed: Option<tokio_postgres::Error>,
}

/// A runtime blocks on its own work when dropped, which panics on a tokio worker; and the last
/// store handle (with the reader pool) is usually dropped on one. So the connection is closed
/// (the client's goodbye written, the connection's end awaited for up to a second) on a thread
/// of its own.
impl Drop for PgConn {
    fn drop(&mut self) {
        let link = self.link.get_mut();
        let (Some(runtime), driver) = (link.runtime.take(), link.driver.take()) else {
            return;
        };
        link.sent.clear();
        let client = Arc::clone(&self.client);
        let closing = std::thread::Builder::new()
            .name("baton-store-close".into())
            .spawn(move || {
                // The last client handle dropped: the connection says goodbye and ends.
                drop(client);
                if let Some(driver) = driver {
                    runtime.block_on(async {
                        let _ = tokio::time::timeout(Duration::from_secs(1), driver).await;
                    });
                }
            });
        if let Err(e) = closing {
            tracing::warn!(error = %e, "cannot close a PostgreSQL connection cleanly");
        }
    }
}

impl PgConn {
    /// Connects to `url`. Blocking: call it off the async workers.
    pub(crate) fn connect(url: &PgUrl) -> Result<PgConn, StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Internal(format!("a PostgreSQL connection's runtime: {e}")))?;
        let (client, connection) = runtime
            .block_on(url.config.connect(url.ssl.connector()))
            .map_err(|e| url.connect_error(e))?;
        Ok(PgConn {
            client: Arc::new(client),
            link: RefCell::new(Link {
                runtime: Some(runtime),
                driver: Some(Box::pin(connection)),
                ended: None,
                sent: VecDeque::new(),
                failed: None,
            }),
            statements: RefCell::new(HashMap::new()),
        })
    }

    /// Runs `call` to its end, driving the connection meanwhile, after every statement sent
    /// before it has been answered. An error among those answers is reported here, in place
    /// of `call`'s result (which, in a transaction that error aborted, is only that).
    fn wait<T>(&self, call: impl Future<Output = Result<T, DbError>>) -> Result<T, DbError> {
        let mut link = self.link.borrow_mut();
        let link: &mut Link = &mut link;
        let runtime = link
            .runtime
            .as_ref()
            .expect("a connection is open until dropped");
        let (driver, ended, sent, failed) = (
            &mut link.driver,
            &mut link.ended,
            &mut link.sent,
            &mut link.failed,
        );
        let mut call = pin!(call);
        let mut done = None;
        let result = runtime.block_on(poll_fn(|cx| {
            // In order: a request is queued for the socket when its future is first polled.
            sent.retain_mut(|answer| match answer.as_mut().poll(cx) {
                Poll::Ready(Ok(())) => false,
                Poll::Ready(Err(e)) => {
                    failed.get_or_insert(e);
                    false
                }
                Poll::Pending => true,
            });
            if done.is_none()
                && let Poll::Ready(result) = call.as_mut().poll(cx)
            {
                done = Some(result);
            }
            if let Some(connection) = driver
                && let Poll::Ready(end) = connection.as_mut().poll(cx)
            {
                // Dropped: every request still waiting gets its "connection closed".
                *driver = None;
                if let Err(e) = end {
                    *ended = Some(DbError::from(e).to_string());
                }
                cx.waker().wake_by_ref();
            }
            match done.take() {
                Some(result) if sent.is_empty() => Poll::Ready(result),
                other => {
                    done = other;
                    Poll::Pending
                }
            }
        }));
        match link.failed.take() {
            Some(e) => Err(e.into()),
            None => result,
        }
    }

    /// The prepared statement for `sql`, preparing it (with `?N` rewritten to `$N`) on first
    /// use.
    fn statement(&self, sql: &str) -> Result<Statement, DbError> {
        if let Some(stmt) = self.statements.borrow().get(sql) {
            return Ok(stmt.clone());
        }
        let text = placeholders(sql);
        let stmt = self.wait(async { Ok(self.client.prepare(&text).await?) })?;
        self.statements
            .borrow_mut()
            .insert(sql.to_owned(), stmt.clone());
        Ok(stmt)
    }

    pub(super) fn execute(&self, sql: &str, args: &[Value<'_>]) -> Result<usize, DbError> {
        let stmt = self.statement(sql)?;
        let params = args.iter().map(|a| a as &(dyn ToSql + Sync));
        let changed = self.wait(async { Ok(self.client.execute_raw(&stmt, params).await?) })?;
        Ok(usize::try_from(changed).unwrap_or(usize::MAX))
    }

    /// Queues one statement without waiting for its answer (see the module's doc); its
    /// parameters are copied, as they outlive the caller's.
    pub(super) fn send(&self, sql: &str, args: &[Value<'_>]) -> Result<(), DbError> {
        let stmt = self.statement(sql)?;
        let owned: Vec<OwnedValue> = args.iter().map(OwnedValue::from).collect();
        let client = Arc::clone(&self.client);
        let answer = async move {
            let params = owned.iter().map(|a| a as &(dyn ToSql + Sync));
            client.execute_raw(&stmt, params).await.map(drop)
        };
        self.link.borrow_mut().sent.push_back(Box::pin(answer));
        Ok(())
    }

    /// Waits for the answers of every statement sent; the first error among them, if any.
    pub(super) fn flush(&self) -> Result<(), DbError> {
        if self.link.borrow().sent.is_empty() {
            return Ok(());
        }
        self.wait(async { Ok(()) })
    }

    pub(super) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Why the connection ended, when it did on an error (the server went away).
    pub(super) fn ended(&self) -> Option<String> {
        self.link.borrow().ended.clone()
    }

    pub(super) fn execute_batch(&self, sql: &str) -> Result<(), DbError> {
        self.wait(async { Ok(self.client.batch_execute(sql).await?) })
    }

    /// The first `limit` rows of a query, each read by `each` once all are in (so `each` may
    /// run queries of its own).
    /// The first `limit` rows of `sql`, each given to `each`. A `SELECT` with no `LIMIT` of
    /// its own is sent with one: a PostgreSQL server sends every row a query finds, however
    /// few are read (SQLite only steps as far as it is asked), and a turn's read of its
    /// session's last entries, unbounded, sent the whole transcript each time (BENCHMARKS.md).
    pub(super) fn query_each(
        &self,
        sql: &str,
        args: &[Value<'_>],
        limit: usize,
        each: impl FnMut(&tokio_postgres::Row) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let bound = (limit != usize::MAX && is_unlimited_select(sql))
            .then(|| Value::from(i64::try_from(limit).unwrap_or(i64::MAX)));
        let limited;
        let sql = match bound {
            Some(_) => {
                limited = format!("{sql}\nLIMIT ?{}", args.len() + 1);
                limited.as_str()
            }
            None => sql,
        };
        let stmt = self.statement(sql)?;
        let params: Vec<&(dyn ToSql + Sync)> = args
            .iter()
            .chain(bound.as_ref())
            .map(|a| a as &(dyn ToSql + Sync))
            .collect();
        let rows = self.wait(async {
            let rows = self.client.query_raw(&stmt, params).await?;
            let mut rows = pin!(rows);
            let mut taken = Vec::new();
            while taken.len() < limit
                && let Some(row) = rows.next().await
            {
                taken.push(row?);
            }
            Ok(taken)
        })?;
        rows.iter().try_for_each(each)
    }
}

/// Whether `sql` is a plain `SELECT` (not a data-modifying `WITH`) with no `LIMIT`, which one
/// may be added to.
fn is_unlimited_select(sql: &str) -> bool {
    let mut words = sql.split_whitespace();
    words
        .next()
        .is_some_and(|first| first.eq_ignore_ascii_case("SELECT"))
        && !words.any(|word| word.eq_ignore_ascii_case("LIMIT"))
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

    /// A query of which only the first rows are read asks the server for no more: the rows
    /// after them are never made (each row here takes a number from a sequence).
    #[tokio::test]
    async fn only_the_rows_taken_are_asked_of_the_server() {
        let db = crate::store::testing::TestDb::postgres().await;
        tokio::task::spawn_blocking(move || {
            db.connect().with_db(|db| {
                db.execute_batch("CREATE SEQUENCE made").unwrap();
                let sql = "SELECT nextval('made') FROM generate_series(1, 100)";
                let taken = db.query_take(sql, &[], 3, |row| row.get::<i64>(0)).unwrap();
                assert_eq!(taken, [1, 2, 3]);
                let made = "SELECT last_value FROM made";
                assert_eq!(db.query_row(made, &[], |row| row.get::<i64>(0)).unwrap(), 3);
            });
        })
        .await
        .unwrap();
    }

    #[test]
    fn is_unlimited_select_leaves_writes_and_limited_queries_alone() {
        assert!(is_unlimited_select("SELECT id FROM t ORDER BY id"));
        assert!(is_unlimited_select("\n select id FROM t"));
        assert!(!is_unlimited_select("SELECT id FROM t LIMIT 1 OFFSET 4"));
        assert!(!is_unlimited_select(
            "WITH fresh AS (INSERT INTO t VALUES (1) RETURNING 1) SELECT 1"
        ));
        assert!(!is_unlimited_select(
            "INSERT INTO t VALUES (1) RETURNING id"
        ));
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
