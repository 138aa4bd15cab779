-- PostgreSQL form of ../020_deliveries_text_unindexed.sql. Keep the two in step.
-- Schema version 20: deliveries without the index on (sender, target_session, created_ms)
-- (issue 23).
--
-- It found an earlier send of the same text to the same session; `deliveries_same_text`
-- (version 15) does that now, by the text's hash, and nothing else searches by it. Yet every
-- send wrote it: one more B-tree, and one more page to the log, on the way from one bot to
-- another (BENCHMARKS.md).
DROP INDEX deliveries_text;
