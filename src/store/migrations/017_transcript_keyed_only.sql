-- Schema version 17: only keyed transcript entries in the idempotency index (issue 23).
--
-- Most entries have no idempotency key (what people said, tool calls, notices); only a
-- delivered post has one. Every entry still went into `transcript_idempotency`, one more
-- B-tree and one more page written to the log per commit that records a line, on the way from
-- a mention to its reply (BENCHMARKS.md). The same unique index over the keyed entries alone:
-- `idempotency_key = ?` implies the key is not NULL, so every look-up by key still uses it,
-- and an insert names the index's condition in its `ON CONFLICT`.
DROP INDEX transcript_idempotency;
CREATE UNIQUE INDEX transcript_idempotency ON transcript (idempotency_key)
    WHERE idempotency_key IS NOT NULL;
