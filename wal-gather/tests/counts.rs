//! That the frames are gathered at all: one write for a commit of many pages. Alone in its own
//! test binary, since the counts are the process's.

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
