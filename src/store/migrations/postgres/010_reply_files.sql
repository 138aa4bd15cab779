-- PostgreSQL form of ../010_reply_files.sql: the same tables in PostgreSQL's types (BIGINT, BYTEA,
-- identity ids in place of rowids, "user" quoted). Keep the two in step.
-- Schema version 10: the files a bot attached to a run's reply (issue 20, files to chats).
--
-- reply_files: one row per artifact a run attached (`reply_attach`, or an `http`/`command`
-- backend's `attachments`), in the order attached. Kept durably so a run replayed after a
-- restart delivers the same files, and each upload goes through the begun sends under the key
-- `<run id>#file:<artifact id>`, so no replay posts one twice. A row goes with its artifact.
CREATE TABLE reply_files (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id      TEXT    NOT NULL,
    artifact_id TEXT    NOT NULL,
    attached_ms BIGINT  NOT NULL,
    UNIQUE (run_id, artifact_id)
);
