-- PostgreSQL form of ../035_decisions_pruned_by_id.sql. Keep the two in step.
-- Schema version 35: decisions and room messages without an index on their time.
--
-- Every event writes its decision row and its room_messages row (issue 50); `decisions_ts`
-- and `room_messages_ts` served only `[retention] transcripts`, yet each was one more B-tree
-- written per event, ~5 k instructions each on the store's writer (BENCHMARKS.md). The prune
-- now takes the oldest rows by id, a chunk per writer job, and deletes those older than the
-- date among them (`prune.rs`).
DROP INDEX decisions_ts;
DROP INDEX room_messages_ts;
