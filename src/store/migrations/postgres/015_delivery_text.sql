-- Schema version 15: "the same request" found by an index, not a scan (issue 23).
--
-- A sessions_send without an idempotency key repeats an earlier one when its text is the same
-- within ten minutes. That look-up scanned every send of the sender to the target in the window
-- and compared texts (17% of the writer in the bot-to-bot benchmark). message_hash is the first
-- 8 bytes of the text's SHA-256 (deliveries.rs); sends written before this version have none and
-- are not matched by it.
ALTER TABLE deliveries ADD COLUMN message_hash BIGINT;
CREATE INDEX deliveries_same_text
    ON deliveries (sender, target_session, message_hash, created_ms)
    WHERE idempotency_key IS NULL;
