//! A database written through the gathering VFS, and the ways to look at it from outside.
//! Each test binary compiles this module and uses only part of it, hence the allowances.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

/// A database file in a directory of its own: a writer through the gathering VFS, as baton's
/// store runs it (WAL, `synchronous=NORMAL`, no automatic checkpoint, 2 KiB pages), and a
/// connection of the default VFS beside it, with file handles of its own.
pub struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
    pub writer: Connection,
    pub outside: Connection,
}

impl Db {
    /// A new database whose writer caches `cache_pages` pages, with a table `t (id, body)`.
    pub fn new(cache_pages: i64) -> Db {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let vfs = baton_wal_gather::register().expect("registered");
        let writer = Connection::open_with_flags_and_vfs(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
            vfs,
        )
        .unwrap();
        writer.pragma_update(None, "page_size", 2048).unwrap();
        let mode: String = writer
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        writer.pragma_update(None, "synchronous", "NORMAL").unwrap();
        writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        writer
            .pragma_update(None, "cache_size", cache_pages)
            .unwrap();
        writer
            .execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
            .unwrap();
        let outside = Connection::open(&path).unwrap();
        Db {
            _dir: dir,
            path,
            writer,
            outside,
        }
    }

    /// Writes `rows` (an id, or `None` for a new one, and a body) in one transaction.
    pub fn commit(&self, rows: impl IntoIterator<Item = (Option<i64>, String)>) {
        let tx = self.writer.unchecked_transaction().unwrap();
        for (id, body) in rows {
            tx.execute(
                "INSERT OR REPLACE INTO t (id, body) VALUES (?1, ?2)",
                rusqlite::params![id, body],
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }

    /// Asserts that what the writer committed is in the files now: the outside connection
    /// reads it, and so does a restart after `kill -9` at this moment (a copy of the files as
    /// they are, opened afresh: SQLite recovers the log from the file and checks every frame's
    /// checksum).
    pub fn assert_on_file(&self, when: &str) {
        let committed = rows(&self.writer);
        assert_eq!(rows(&self.outside), committed, "{when}: another connection");
        let copy = tempfile::tempdir().unwrap();
        let copied = copy.path().join("copy.sqlite");
        std::fs::copy(&self.path, &copied).unwrap();
        std::fs::copy(log(&self.path), log(&copied)).unwrap();
        let restarted = Connection::open(&copied).unwrap();
        assert_eq!(rows(&restarted), committed, "{when}: after a crash");
        let check: String = restarted
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .unwrap();
        assert_eq!(check, "ok", "{when}: after a crash");
    }
}

/// The rows of `t` and their bytes.
fn rows(conn: &Connection) -> (i64, i64) {
    conn.query_row(
        "SELECT count(*), coalesce(sum(length(body)), 0) FROM t",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .unwrap()
}

/// A database's write-ahead log.
fn log(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap().to_os_string();
    name.push("-wal");
    db.with_file_name(name)
}
