-- PostgreSQL form of ../007_inbox.sql: the same tables in PostgreSQL's types (BIGINT, BYTEA,
-- identity ids in place of rowids, "user" quoted). Keep the two in step.
-- Schema version 7: what survives a kill -9 (issue 9).
--
-- inbox: every event accepted from a platform (its dedupe claim committed, so the platform was
-- told "got it" and will not redeliver) whose pipeline run has not finished. The row is written
-- in the same transaction as the claim and deleted when the run ends; whatever is left at
-- start was cut off by a crash and is run again.
--   event:     the normalized event, as JSON
--   attempts:  how many starts have already re-run it (a crash-looping event is given up on)
CREATE TABLE inbox (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account     TEXT    NOT NULL,
    event       TEXT    NOT NULL,
    accepted_ms BIGINT  NOT NULL,
    attempts    BIGINT  NOT NULL DEFAULT 0
);

-- sends: one row per chunk whose post has begun, keyed like the transcript's delivered chunks
-- (`<run id>#<n>`). A key here with no delivered transcript entry is a post cut off mid-flight:
-- it may or may not have reached the platform, so a replay records a failure instead of
-- posting it a second time.
CREATE TABLE sends (
    key      TEXT    PRIMARY KEY,
    begun_ms BIGINT  NOT NULL
);
CREATE INDEX sends_begun ON sends (begun_ms);

-- health: one row rewritten by the readiness probe, so /readyz proves the store can still
-- commit (a full disk or a read-only file fails here before it fails a user's message).
CREATE TABLE health (
    id        BIGINT  PRIMARY KEY CHECK (id = 1),
    probed_ms BIGINT  NOT NULL
);
