-- PostgreSQL form of ../013_session_locks.sql: the same schema in PostgreSQL's types. Keep the
-- two in step.
-- Schema version 13: flows between instances on one database (issue 22).
--
-- session_locks: one turn at a time per session across instances. A turn holds its session's
-- row (holder: the instance id and the turn's own token) while it runs, renewing `expires_ms`
-- (the database's clock); it deletes the row when it ends. A holder that stops renewing (a
-- killed instance) loses the lock once it expires. SQLite has one instance and never writes it.
-- deliveries.runner: the instance that claimed the delivery's run, by one conditional update,
-- so exactly one instance runs it; a delivery whose runner is no longer live is claimed again.
CREATE TABLE session_locks (
    name       TEXT   PRIMARY KEY,
    holder     TEXT   NOT NULL,
    expires_ms BIGINT NOT NULL
);
ALTER TABLE deliveries ADD COLUMN runner TEXT;
-- session_wakes: a message for a session (an escalation's answer, a late reply) handed to the
-- home instance of the session's bot, as JSON: one instance claims it (runner), wakes the
-- session and deletes the row. A row whose runner is gone is claimed again.
CREATE TABLE session_wakes (
    id         TEXT    PRIMARY KEY,
    bot        TEXT    NOT NULL,
    message    TEXT    NOT NULL,
    runner     TEXT,
    created_ms BIGINT NOT NULL
);
