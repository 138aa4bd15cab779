-- Schema version 22: an inbox row holds the event in a compact binary form (issue 23).
--
-- Filing an event as JSON was the largest part of taking in a mention on the accepting task
-- (BENCHMARKS.md); `inbox_row.rs` writes it as its fields' bytes. SQLite keeps each cell's own
-- type, so `event` takes the bytes as they are, and rows filed as JSON before this version stay
-- text and are still read. Nothing to change here; PostgreSQL's column becomes `BYTEA`.
SELECT 1;
