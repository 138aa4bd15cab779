-- PostgreSQL form of ../018_expiry_by_walk.sql. Keep the two in step.
-- Schema version 18: dedupe keys and begun posts without an index on their time (issue 23).
--
-- `dedupe_seen` and `sends_begun` served only the hourly purge, yet every claim and every
-- post begun wrote to them: one more B-tree, and one more page to the log, on the way from a
-- message to its reply (BENCHMARKS.md). The purge now walks each table by its primary key, a
-- window per writer job (`sweep.rs`).
DROP INDEX dedupe_seen;
DROP INDEX sends_begun;
