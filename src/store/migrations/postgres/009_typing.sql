-- PostgreSQL form of ../009_typing.sql: the same tables in PostgreSQL's types (BIGINT, BYTEA,
-- identity ids in place of rowids, "user" quoted). Keep the two in step.
-- Schema version 9: typing indicators a kill -9 may leave up (issue 19).
--
-- typing_open: one row per typing indicator being put up, written before the platform is
-- asked and deleted once the indicator is taken away again. A Feishu/Lark reaction stays on
-- its message until it is removed, so whatever is left at start was cut off by a crash and is
-- taken away then.
--   chat, thread, message: where it shows (the message is the one being answered)
--   handle:                the platform's handle on it (Feishu's reaction id), once known
CREATE TABLE typing_open (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    platform TEXT    NOT NULL,
    account  TEXT    NOT NULL,
    chat     TEXT    NOT NULL,
    thread   TEXT,
    message  TEXT    NOT NULL,
    handle   TEXT,
    since_ms BIGINT  NOT NULL
);
