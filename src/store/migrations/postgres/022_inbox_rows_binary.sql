-- PostgreSQL form of ../022_inbox_rows_binary.sql. Keep the two in step.
-- Schema version 22: an inbox row holds the event in a compact binary form (issue 23).
--
-- Filing an event as JSON was the largest part of taking in a mention on the accepting task
-- (BENCHMARKS.md); `inbox_row.rs` writes it as its fields' bytes. The rows filed as JSON before
-- this version become their UTF-8 bytes, which start with `{`, and are read as JSON.
ALTER TABLE inbox ALTER COLUMN event TYPE BYTEA USING convert_to(event, 'UTF8');
