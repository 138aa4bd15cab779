-- PostgreSQL form of ../002_deliveries.sql: the same tables in PostgreSQL's types (BIGINT, BYTEA,
-- identity ids in place of rowids, "user" quoted). Keep the two in step.
-- Schema version 2: bot-to-bot deliveries (sessions_send).
-- One row per send, refused ones included, so `baton deliveries` shows every guard decision.
--   state:  queued -> running -> delivered | failed | timed_out ; or refused at once
--   mode:   wait (the sender waits up to its timeout) | fire (timeout_seconds = 0)
--   notify: none | pending | done -- whether the reply still has to be pushed to the sender's
--           session (fire-and-forget, or the sender stopped waiting), and whether it was.
CREATE TABLE deliveries (
    run_id          TEXT    NOT NULL PRIMARY KEY,
    sender          TEXT    NOT NULL,
    sender_session  TEXT    NOT NULL,
    target          TEXT    NOT NULL,
    target_session  TEXT    NOT NULL,
    message         TEXT    NOT NULL,
    idempotency_key TEXT,
    depth           BIGINT  NOT NULL,
    origin          TEXT,
    mode            TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    reason          TEXT,
    reply           TEXT,
    model           TEXT,
    notify          TEXT    NOT NULL DEFAULT 'none',
    created_ms      BIGINT  NOT NULL,
    started_ms      BIGINT,
    finished_ms     BIGINT 
);
CREATE UNIQUE INDEX deliveries_key ON deliveries (sender, target_session, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND state <> 'refused';
CREATE INDEX deliveries_text ON deliveries (sender, target_session, created_ms);
CREATE INDEX deliveries_open ON deliveries (state) WHERE state IN ('queued', 'running');
CREATE INDEX deliveries_notify ON deliveries (notify) WHERE notify = 'pending';
CREATE INDEX deliveries_created ON deliveries (created_ms);
