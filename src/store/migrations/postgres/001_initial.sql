-- PostgreSQL form of ../001_initial.sql: the same tables in PostgreSQL's types (BIGINT, BYTEA,
-- identity ids in place of rowids, "user" quoted). Keep the two in step.
-- Schema version 1: everything baton keeps between restarts.
-- Ids that readers use as cursors (transcript, history) are AUTOINCREMENT so that they are never
-- reused, even after the newest rows are deleted.

-- Inbound event ids already seen, per scope (an account), for 24 hours.
CREATE TABLE dedupe (
    scope   TEXT    NOT NULL,
    key     TEXT    NOT NULL,
    seen_ms BIGINT  NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX dedupe_seen ON dedupe (seen_ms);

-- One row per (bot, chat[, thread]) conversation. reset_after: the model's view of the
-- transcript starts after this entry id (0 = from the beginning).
CREATE TABLE sessions (
    key         TEXT    NOT NULL PRIMARY KEY,
    bot         TEXT    NOT NULL,
    platform    TEXT    NOT NULL,
    account     TEXT    NOT NULL,
    chat        TEXT    NOT NULL,
    thread      TEXT,
    created_ms  BIGINT  NOT NULL,
    updated_ms  BIGINT  NOT NULL,
    reset_after BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX sessions_chat ON sessions (platform, chat, bot);
CREATE INDEX sessions_updated ON sessions (updated_ms);

-- Everything said in a session, in order. Several NULL idempotency keys are allowed.
CREATE TABLE transcript (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session             TEXT    NOT NULL,
    ts_ms               BIGINT  NOT NULL,
    kind                TEXT    NOT NULL,
    speaker             TEXT    NOT NULL,
    origin              TEXT    NOT NULL,
    text                TEXT    NOT NULL,
    platform_message_id TEXT,
    run_id              TEXT,
    idempotency_key     TEXT,
    meta                TEXT    NOT NULL DEFAULT 'null'
);
CREATE INDEX transcript_session ON transcript (session, id);
CREATE UNIQUE INDEX transcript_idempotency ON transcript (idempotency_key);

-- Per-chat buffer of messages that did not wake a bot.
CREATE TABLE history (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chat_key   TEXT    NOT NULL,
    message_id TEXT    NOT NULL,
    sender_id  TEXT    NOT NULL,
    speaker    TEXT    NOT NULL,
    text       TEXT    NOT NULL,
    ts_ms      BIGINT  NOT NULL,
    UNIQUE (chat_key, message_id)
);
CREATE INDEX history_chat ON history (chat_key, id);

-- How far into a chat's history buffer each bot has been given context.
CREATE TABLE history_cursors (
    chat_key TEXT    NOT NULL,
    bot      TEXT    NOT NULL,
    last_id  BIGINT  NOT NULL,
    PRIMARY KEY (chat_key, bot)
);

-- Admin overrides per chat.
CREATE TABLE chat_settings (
    chat_key   TEXT NOT NULL PRIMARY KEY,
    activation TEXT
);
CREATE TABLE chat_paused (
    chat_key TEXT NOT NULL,
    bot      TEXT NOT NULL,
    PRIMARY KEY (chat_key, bot)
);

-- Admin commands and what became of them.
CREATE TABLE audit (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts_ms    BIGINT  NOT NULL,
    platform TEXT    NOT NULL,
    chat     TEXT    NOT NULL,
    "user"     TEXT    NOT NULL,
    command  TEXT    NOT NULL,
    outcome  TEXT    NOT NULL
);

-- DM pairing: one code per (platform, user) until an admin approves it.
CREATE TABLE pairing (
    platform    TEXT    NOT NULL,
    "user"        TEXT    NOT NULL,
    code        TEXT    NOT NULL UNIQUE,
    approved    BIGINT  NOT NULL DEFAULT 0,
    created_ms  BIGINT  NOT NULL,
    approved_ms BIGINT,
    PRIMARY KEY (platform, "user")
);
