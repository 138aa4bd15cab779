//! That the frames are gathered at all: one write for a commit of many pages. Alone in its own
//! test binary, since the counts are the process's.

use rusqlite::{Connection, OpenFlags};

#[test]
fn a_commit_of_many_pages_is_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let vfs = baton_wal_gather::register().expect("registered");
    let conn = Connection::open_with_flags_and_vfs(
        &path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        vfs,
    )
    .unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT NOT NULL);
         CREATE INDEX t_body ON t (body);",
    )
    .unwrap();
    let before = baton_wal_gather::writes();
    let tx = conn.unchecked_transaction().unwrap();
    for n in 0..100 {
        tx.execute(
            "INSERT INTO t (body) VALUES (?1)",
            [format!("{n:04}{}", "z".repeat(200))],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    let after = baton_wal_gather::writes();
    let asked = after.asked - before.asked;
    let written = after.written - before.written;
    // A header and a page for each of more than ten pages (the table's and the index's).
    assert!(asked > 20, "SQLite asked for {asked} writes");
    assert_eq!(written, 1, "{asked} writes asked for, {written} made");
}
