-- Schema version 19: the inbox without an index on its account (issue 23).
--
-- The inbox holds only the events whose run has not finished, so it stays small, and it is
-- searched by account only when an instance looks for events to take over (at start, and every
-- third of a lease): a scan of those few rows. Yet every event wrote `inbox_account` twice, when
-- it was filed and when its run ended, one more B-tree and one more page to the log on each
-- (BENCHMARKS.md).
DROP INDEX inbox_account;
