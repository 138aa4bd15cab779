//! What a commit through the gathering VFS leaves in the file, seen the way another process or
//! a restart after `kill -9` sees it: through connections of the default VFS.

mod support;

use support::Db;

#[test]
fn every_commit_is_in_the_file_when_it_returns() {
    let db = Db::new(2000);
    for n in 1..=300_usize {
        // A few pages a commit, as a batch of the store's jobs is.
        db.commit([(None, "x".repeat(100 + n * 7))]);
        db.assert_on_file(&format!("commit {n}"));
    }
}

#[test]
fn a_commit_is_in_the_file_whatever_its_size() {
    let db = Db::new(2000);
    db.commit((0..50).map(|n| (None, format!("line {n}"))));
    db.assert_on_file("fifty small rows");
    for round in 0..3 {
        // About 600 KiB of pages in one commit, no spill: more than the default VFS writes in
        // one call, so it is written in pieces.
        db.commit((0..500).map(|n| (None, format!("{round}/{n}/{}", "w".repeat(1000)))));
        db.assert_on_file(&format!("large commit {round}"));
    }
}

#[test]
fn a_transaction_larger_than_the_cache_spills_and_rewrites_its_frames() {
    let db = Db::new(10);
    for round in 0..5_usize {
        // Far more pages than the cache holds, each changed several times: SQLite spills
        // pages to the log mid-transaction, reads them back, overwrites their frames and
        // rewrites the checksums after them, which recovery checks.
        db.commit((0..400_i64).map(|n| {
            let size = 300 + round * 10 + usize::try_from(n % 7).unwrap();
            (Some(n % 150), "y".repeat(size))
        }));
        db.assert_on_file(&format!("round {round}"));
    }
}

#[test]
fn the_log_starting_over_is_written_from_its_header() {
    let db = Db::new(2000);
    for round in 0..4 {
        db.commit((0..40).map(|n| (None, format!("{round}/{n}"))));
        // Everything copied back and the log restarted: the next commit writes its header at
        // the start of the file again, over frames already there.
        let busy: i64 = db
            .writer
            .query_row("PRAGMA wal_checkpoint(RESTART)", [], |row| row.get(0))
            .unwrap();
        assert_eq!(busy, 0);
        db.commit([(None, "after".to_owned())]);
        db.assert_on_file(&format!("round {round}"));
    }
}
