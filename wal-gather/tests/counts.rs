//! That the frames are gathered at all: one write for a commit of many pages, and none held
//! for a log that is not power-safe. Alone in its own test binary, and one test, since the
//! counts are the process's.

mod support;

use support::Db;

/// Commits a hundred rows of an indexed table; returns the writes SQLite asked for and the ones
/// made.
fn commit(db: &Db, round: usize) -> (u64, u64) {
    let before = baton_wal_gather::writes();
    db.commit((0..100).map(|n| (None, format!("{round}{n:04}{}", "z".repeat(200)))));
    let after = baton_wal_gather::writes();
    (after.asked - before.asked, after.written - before.written)
}

#[test]
fn what_reaches_the_file_in_how_many_writes() {
    a_commit_of_many_pages_is_one_write();
    a_log_that_is_not_power_safe_is_written_as_sqlite_asks();
}

fn a_commit_of_many_pages_is_one_write() {
    let db = Db::new(2000);
    db.writer
        .execute_batch("CREATE INDEX t_body ON t (body)")
        .unwrap();
    for round in 0..3 {
        let (asked, written) = commit(&db, round);
        // A header and a page for each of more than ten pages (the table's and the index's).
        assert!(asked > 20, "SQLite asked for {asked} writes");
        assert_eq!(
            written, 1,
            "round {round}: {asked} writes asked for, {written} made"
        );
        let _: i64 = db
            .writer
            .query_row("PRAGMA wal_checkpoint(RESTART)", [], |row| row.get(0))
            .unwrap();
        // The log starts over: SQLite writes its header and syncs it before the first frame,
        // so that commit is two writes, the header and the frames.
        let (asked, written) = commit(&db, round + 10);
        assert_eq!(
            written, 2,
            "round {round}, the log restarted: {asked} asked, {written} made"
        );
    }
}

/// Without `SQLITE_IOCAP_POWERSAFE_OVERWRITE` (here by the `psow=0` URI parameter) SQLite may
/// pad a commit and split a frame around a sync: such a log is not gathered at all.
fn a_log_that_is_not_power_safe_is_written_as_sqlite_asks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let vfs = baton_wal_gather::register().expect("registered");
    let writer = rusqlite::Connection::open_with_flags_and_vfs(
        format!("file:{}?psow=0", path.display()),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
            | rusqlite::OpenFlags::SQLITE_OPEN_CREATE
            | rusqlite::OpenFlags::SQLITE_OPEN_URI,
        vfs,
    )
    .unwrap();
    writer
        .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (body TEXT NOT NULL);")
        .unwrap();
    let before = baton_wal_gather::writes();
    writer
        .execute("INSERT INTO t (body) VALUES ('not gathered')", [])
        .unwrap();
    assert_eq!(
        baton_wal_gather::writes(),
        before,
        "nothing went through the gathering"
    );
    let outside = rusqlite::Connection::open(&path).unwrap();
    let count: i64 = outside
        .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
        .unwrap();
    assert_eq!(count, 1);
}
