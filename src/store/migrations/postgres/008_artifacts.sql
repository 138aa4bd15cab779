-- PostgreSQL form of ../008_artifacts.sql: the same tables in PostgreSQL's types (BIGINT, BYTEA,
-- identity ids in place of rowids, "user" quoted). Keep the two in step.
-- Schema version 8: artifacts, and what a delivery took in, made and reported (issue 20).
--
-- artifact_blobs: the bytes, once per content (content-addressed by their SHA-256, hex). Two
-- artifacts with the same content share one row; a blob goes when no artifact names it.
CREATE TABLE artifact_blobs (
    sha256  TEXT    NOT NULL PRIMARY KEY,
    bytes   BIGINT  NOT NULL,
    content BYTEA    NOT NULL
);

-- artifacts: one immutable record per artifact_put (or file taken in).
--   id:      `art-` + a digest of (sha256, name, media type, run, inputs): the same put in the
--            same run (a replayed turn) finds its artifact instead of making a second
--   session: the session whose turn (or MCP client) made it; run_id: that turn's run, if any
--   inputs:  JSON array of the artifact ids it was made from
CREATE TABLE artifacts (
    id          TEXT    NOT NULL PRIMARY KEY,
    sha256      TEXT    NOT NULL REFERENCES artifact_blobs (sha256),
    name        TEXT    NOT NULL,
    media_type  TEXT    NOT NULL,
    bytes       BIGINT  NOT NULL,
    bot         TEXT    NOT NULL,
    session     TEXT    NOT NULL,
    run_id      TEXT,
    inputs      TEXT    NOT NULL DEFAULT '[]',
    created_ms  BIGINT  NOT NULL
);
CREATE INDEX artifacts_session ON artifacts (session, created_ms);
CREATE INDEX artifacts_run ON artifacts (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX artifacts_created ON artifacts (created_ms);
CREATE INDEX artifacts_sha ON artifacts (sha256);

-- What a delivery took in (artifact ids the sender handed over), the JSON Schema its answer
-- had to match, and the structured result (`output`, `errors`, `usage`, `tool_calls`).
ALTER TABLE deliveries ADD COLUMN artifacts_in TEXT NOT NULL DEFAULT '[]';
ALTER TABLE deliveries ADD COLUMN expect TEXT;
ALTER TABLE deliveries ADD COLUMN result TEXT;

-- delivery_progress: the lines a target's turn reported with `progress` while it worked.
CREATE TABLE delivery_progress (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id   TEXT    NOT NULL,
    ts_ms    BIGINT  NOT NULL,
    message  TEXT    NOT NULL,
    step     BIGINT,
    of       BIGINT 
);
CREATE INDEX delivery_progress_run ON delivery_progress (run_id, id);
