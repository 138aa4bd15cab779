//! Opening connections: where the database lives and the pragmas every connection needs.
//!
//! A file database runs in WAL mode with `synchronous=NORMAL`: readers never block the writer
//! and a commit costs no fsync (a power cut may lose the last commits, never corrupt the file).
//! Its connections open through `baton_wal_gather`'s VFS, which writes each commit's log
//! frames in one system call instead of two a page, and changes nothing else.
//!
//! `":memory:"` becomes a uniquely named shared-cache memory database, so that the reader
//! connections see what the writer committed and two stores in one process stay apart. In shared
//! cache, SQLite locks whole tables between connections and a busy timeout does not wait for
//! such locks: a reader would fail with "database table is locked" while a batch is open, and the
//! writer would fail while a reader holds a read lock. Readers of a memory database therefore
//! run `read_uncommitted`, which takes no table locks at all. They may see a batch before its
//! commit; in a throwaway database that is harmless.

use rusqlite::{Connection, OpenFlags};

use super::StoreError;
use super::checkpoint::BUSY_TIMEOUT;

/// The page size of a new database file (SQLite's default is 4096). Every commit writes each
/// page it touched to the WAL whole, and baton's rows are small (a dedupe key, a history line,
/// an inbox entry), so half-size pages cut what a commit writes and what the checkpoints copy
/// and sync (by about 45% in the latency benchmark). Measured in BENCHMARKS.md ("Speed work,
/// third session"), with 1024 no better. An existing database keeps the size it was made with
/// (SQLite ignores the pragma then).
const NEW_PAGE_SIZE: i64 = 2048;

/// The writer's page cache, in KiB (`cache_size = -N`): SQLite's default of 2 MiB. Nobody
/// else writes, so its cache stays valid from one batch to the next and keeps the index pages
/// that inserts land on.
const WRITER_CACHE_KIB: i64 = 2048;

/// Each reader's page cache, in KiB. SQLite keeps the pages a connection has read until its
/// cache is full, and every reader filled its default 2 MiB as the database grew: a turn's
/// transcript tail lands on different pages for every session. That was most of the heap
/// growth in the soak (BENCHMARKS.md, "Soak"). A reader gains little from a large cache: in WAL
/// mode it is emptied whenever another connection committed since its last read, which under
/// load is nearly every read.
const READER_CACHE_KIB: i64 = 256;

/// What SQLite may hold in all, in bytes, across every connection of the process
/// (`soft_heap_limit`): past it, each connection reuses its own cache pages instead of
/// allocating more. Normally the caches above stay below it; it bounds a burst of extra reader
/// connections (one per read in flight beyond the pooled ones) too.
const SQLITE_SOFT_HEAP: i64 = 8 * 1024 * 1024;

/// Prepared statements rusqlite's cache keeps per connection (its default is 16) while no
/// [`Sqlite`](super::sql::Sqlite) holds them: a reader's between two reads, which run more
/// distinct statements than 16 (an evicted one is parsed again on its next use). The writer
/// holds its own for its whole life.
const STATEMENT_CACHE: usize = 64;

/// Where the database lives.
#[derive(Debug, Clone)]
pub(crate) enum Location {
    /// A file on disk, as the user named it.
    File(String),
    /// A private shared-cache memory database (`file:baton-<uuid>?mode=memory&cache=shared`).
    Memory(String),
}

impl Location {
    /// Interprets the `database` setting: `":memory:"` or a file path.
    pub(crate) fn parse(path: &str) -> Self {
        if path == ":memory:" {
            Location::Memory(format!(
                "file:baton-{}?mode=memory&cache=shared",
                uuid::Uuid::new_v4()
            ))
        } else {
            Location::File(path.to_owned())
        }
    }

    /// The name used in error messages.
    pub(crate) fn display(&self) -> &str {
        match self {
            Location::File(path) => path,
            Location::Memory(_) => ":memory:",
        }
    }

    fn open_raw(&self) -> rusqlite::Result<Connection> {
        match self {
            // No URI flag for files, so a path is always a path, whatever characters it has.
            Location::File(path) => {
                let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                // Each commit's log frames in one write (the crate's docs); if SQLite refused
                // the VFS, the default one does the same, a call a frame.
                match baton_wal_gather::register() {
                    Some(vfs) => Connection::open_with_flags_and_vfs(path, flags, vfs),
                    None => Connection::open_with_flags(path, flags),
                }
            }
            Location::Memory(uri) => Connection::open_with_flags(
                uri,
                OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_CREATE
                    | OpenFlags::SQLITE_OPEN_URI
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            ),
        }
    }

    fn open_err(&self, source: rusqlite::Error) -> StoreError {
        if let Location::File(path) = self
            && std::path::Path::new(path).is_dir()
        {
            return StoreError::IsDirectory {
                path: self.display().to_owned(),
            };
        }
        StoreError::Open {
            path: self.display().to_owned(),
            source,
        }
    }

    /// Opens the one connection that writes, creating the file if needed. `wal_limit` (bytes)
    /// is the size the log is cut back to whenever it starts over (`journal_size_limit`).
    pub(crate) fn open_writer(&self, wal_limit: u64) -> Result<Connection, StoreError> {
        let setup = || -> rusqlite::Result<Connection> {
            let conn = self.open_raw()?;
            conn.busy_timeout(BUSY_TIMEOUT)?;
            conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
            // Before the first write (switching to WAL is one), or it has no effect.
            conn.pragma_update(None, "page_size", NEW_PAGE_SIZE)?;
            // A memory database answers "memory" here; that is fine.
            let _mode: String =
                conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            conn.pragma_update(None, "foreign_keys", true)?;
            conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)?;
            let _limit: i64 =
                conn.pragma_update_and_check(None, "soft_heap_limit", SQLITE_SOFT_HEAP, |row| {
                    row.get(0)
                })?;
            if let Location::File(_) = self {
                // The checkpoint thread does it, so no commit waits for one (`checkpoint.rs`).
                conn.pragma_update(None, "wal_autocheckpoint", 0)?;
                conn.pragma_update(None, "journal_size_limit", clamp(wal_limit))?;
                // After the pragma above, which would replace it: the writer keeps the log
                // under its bound by its length after each commit.
                conn.wal_hook(Some(super::checkpoint::record_log_length));
            }
            Ok(conn)
        };
        setup().map_err(|e| self.open_err(e))
    }

    /// Opens the connection that checkpoints the WAL (`checkpoint.rs`).
    pub(crate) fn open_checkpointer(&self) -> Result<Connection, StoreError> {
        let setup = || -> rusqlite::Result<Connection> {
            let conn = self.open_raw()?;
            conn.busy_timeout(BUSY_TIMEOUT)?;
            Ok(conn)
        };
        setup().map_err(|e| self.open_err(e))
    }

    /// Opens a connection that only reads.
    pub(crate) fn open_reader(&self) -> Result<Connection, StoreError> {
        let setup = || -> rusqlite::Result<Connection> {
            let conn = self.open_raw()?;
            conn.busy_timeout(BUSY_TIMEOUT)?;
            conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
            conn.pragma_update(None, "foreign_keys", true)?;
            conn.pragma_update(None, "query_only", true)?;
            conn.pragma_update(None, "cache_size", -READER_CACHE_KIB)?;
            if let Location::Memory(_) = self {
                conn.pragma_update(None, "read_uncommitted", true)?;
            }
            Ok(conn)
        };
        setup().map_err(|e| self.open_err(e))
    }
}

/// SQLite takes the limit as a signed 64-bit number.
fn clamp(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page_size(conn: &Connection) -> i64 {
        conn.query_row("PRAGMA page_size", [], |row| row.get(0))
            .unwrap()
    }

    /// The bundled SQLite is compiled to sync with `fdatasync` (`.cargo/config.toml`): a build
    /// that lost the flag falls back to `fsync`, one more disk write inside every sync.
    #[test]
    fn sqlite_is_compiled_to_sync_with_fdatasync() {
        let flags = option_env!("LIBSQLITE3_FLAGS").unwrap_or_default();
        assert!(flags.contains("-DHAVE_FDATASYNC=1"), "{flags:?}");
    }

    /// And without SQLite's shared page-cache list (`.cargo/config.toml`), whose one mutex every
    /// connection took at every page it fetched; each cache allocates its pages as it needs them.
    #[test]
    fn sqlite_is_compiled_with_a_page_cache_of_its_own_per_connection() {
        let conn = Connection::open_in_memory().unwrap();
        let options: Vec<String> = conn
            .prepare("PRAGMA compile_options")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(options.iter().any(|o| o == "THREADSAFE=1"), "{options:?}");
        assert!(
            !options.iter().any(|o| o == "ENABLE_MEMORY_MANAGEMENT"),
            "{options:?}"
        );
        assert!(
            options.iter().any(|o| o == "DEFAULT_PCACHE_INITSZ=0"),
            "{options:?}"
        );
    }

    #[test]
    fn a_new_database_gets_half_size_pages_and_an_existing_one_keeps_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = Location::parse(dir.path().join("new.db").to_str().unwrap());
        assert_eq!(
            page_size(&fresh.open_writer(1 << 20).unwrap()),
            NEW_PAGE_SIZE
        );

        // A database made before (SQLite's default 4096) is opened as it is.
        let old = dir.path().join("old.db");
        Connection::open(&old)
            .unwrap()
            .execute_batch("CREATE TABLE t (x)")
            .unwrap();
        let old = Location::parse(old.to_str().unwrap());
        let writer = old.open_writer(1 << 20).unwrap();
        assert_eq!(page_size(&writer), 4096);
        writer.execute_batch("INSERT INTO t VALUES (1)").unwrap();
    }

    /// A file database's log is written through the gathering VFS. Only the store opens
    /// connections through it in this test process, so its counts stay at zero if it does not.
    #[test]
    fn a_file_database_writes_its_log_through_the_gathering_vfs() {
        let dir = tempfile::tempdir().unwrap();
        let location = Location::parse(dir.path().join("gathered.db").to_str().unwrap());
        let writer = location.open_writer(1 << 20).unwrap();
        writer
            .execute_batch(
                "CREATE TABLE t (x); BEGIN; INSERT INTO t VALUES (1); INSERT INTO t VALUES (2); \
                 COMMIT;",
            )
            .unwrap();
        let writes = baton_wal_gather::writes();
        assert!(writes.written > 0, "{writes:?}");
        assert!(writes.asked > writes.written, "{writes:?}");
    }
}
