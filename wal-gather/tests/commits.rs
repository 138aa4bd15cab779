//! What a commit through the gathering VFS leaves in the file, seen the way another process or
//! a restart after `kill -9` sees it: through a connection of the default VFS.

use rusqlite::{Connection, OpenFlags};

/// A writer in WAL mode as baton's store runs it (`synchronous=NORMAL`, no automatic
/// checkpoint), through the gathering VFS, on `path`; `cache_pages` is its page cache.
fn writer(path: &std::path::Path, cache_pages: i64) -> Connection {
    let vfs = baton_wal_gather::register().expect("registered");
    let conn = Connection::open_with_flags_and_vfs(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        vfs,
    )
    .unwrap();
    conn.pragma_update(None, "page_size", 2048).unwrap();
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
    conn.pragma_update(None, "cache_size", cache_pages).unwrap();
    conn.execute_batch("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        .unwrap();
    conn
}

/// A connection of the default VFS: its own file handles, nothing shared with the writer's.
fn outside(path: &std::path::Path) -> Connection {
    Connection::open(path).unwrap()
}

/// The database as a restart after `kill -9` would find it at this moment: a copy of the files
/// as they are, opened afresh, so SQLite recovers the log from the file and checks every
/// frame's checksum.
fn after_a_crash(path: &std::path::Path, into: &tempfile::TempDir) -> Connection {
    let copy = into.path().join("copy.sqlite");
    std::fs::copy(path, &copy).unwrap();
    let log = |p: &std::path::Path| {
        p.with_file_name(format!("{}-wal", p.file_name().unwrap().to_str().unwrap()))
    };
    std::fs::copy(log(path), log(&copy)).unwrap();
    outside(&copy)
}

fn rows(conn: &Connection) -> (i64, i64) {
    conn.query_row(
        "SELECT count(*), coalesce(sum(length(body)), 0) FROM t",
        [],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .unwrap()
}

fn intact(conn: &Connection) {
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

#[test]
fn every_commit_is_in_the_file_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let conn = writer(&path, 2000);
    let other = outside(&path);
    for n in 1..=300_i64 {
        // A few pages a commit, as a batch of the store's jobs is.
        let body = "x".repeat(usize::try_from(100 + n * 7).unwrap());
        conn.execute("INSERT INTO t (body) VALUES (?1)", [&body])
            .unwrap();
        let (count, _) = rows(&other);
        assert_eq!(
            count, n,
            "another connection sees commit {n} as soon as it returns"
        );
    }
    intact(&other);
}

#[test]
fn a_commit_is_kept_by_a_process_that_dies_right_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let conn = writer(&path, 2000);
    let tx = conn.unchecked_transaction().unwrap();
    for n in 0..50 {
        tx.execute("INSERT INTO t (body) VALUES (?1)", [format!("line {n}")])
            .unwrap();
    }
    tx.commit().unwrap();
    let copy = tempfile::tempdir().unwrap();
    let after = after_a_crash(&path, &copy);
    assert_eq!(rows(&after), rows(&conn));
    intact(&after);
}

#[test]
fn a_transaction_larger_than_the_cache_spills_and_rewrites_its_frames() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let conn = writer(&path, 10);
    let other = outside(&path);
    for round in 0..5 {
        let tx = conn.unchecked_transaction().unwrap();
        // Far more pages than the cache holds, each changed several times: SQLite spills
        // pages to the log mid-transaction, reads them back and overwrites their frames.
        for n in 0..400_i64 {
            tx.execute(
                "INSERT OR REPLACE INTO t (id, body) VALUES (?1, ?2)",
                rusqlite::params![
                    n % 150,
                    "y".repeat(300 + usize::try_from(round * 10 + n % 7).unwrap())
                ],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        assert_eq!(rows(&other), rows(&conn), "round {round}");
        intact(&other);
        // Recovery checks the checksums this commit rewrote.
        let copy = tempfile::tempdir().unwrap();
        assert_eq!(
            rows(&after_a_crash(&path, &copy)),
            rows(&conn),
            "round {round}"
        );
    }
}

#[test]
fn the_log_starting_over_is_written_from_its_header() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let conn = writer(&path, 2000);
    let other = outside(&path);
    for round in 0..4 {
        for n in 0..40 {
            conn.execute("INSERT INTO t (body) VALUES (?1)", [format!("{round}/{n}")])
                .unwrap();
        }
        // Everything copied back and the log restarted: the next commit writes its header at
        // the start of the file again, over frames already there.
        let (busy, _, _): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(RESTART)", [], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .unwrap();
        assert_eq!(busy, 0);
        conn.execute("INSERT INTO t (body) VALUES ('after')", [])
            .unwrap();
        assert_eq!(rows(&other), rows(&conn), "round {round}");
    }
    drop(conn);
    intact(&outside(&path));
}

#[test]
fn a_commit_larger_than_one_write_is_written_in_pieces() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let conn = writer(&path, 4000);
    let other = outside(&path);
    for round in 0..3 {
        // About 600 KiB of pages in one commit, no spill: more than the default VFS writes in
        // one call.
        let tx = conn.unchecked_transaction().unwrap();
        for n in 0..500 {
            tx.execute(
                "INSERT INTO t (body) VALUES (?1)",
                [format!("{round}/{n}/{}", "w".repeat(1000))],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        assert_eq!(rows(&other), rows(&conn), "round {round}");
        let copy = tempfile::tempdir().unwrap();
        assert_eq!(
            rows(&after_a_crash(&path, &copy)),
            rows(&conn),
            "round {round}"
        );
    }
    intact(&other);
}
