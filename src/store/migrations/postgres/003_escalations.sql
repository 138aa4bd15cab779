-- PostgreSQL form of ../003_escalations.sql: the same tables in PostgreSQL's types (BIGINT, BYTEA,
-- identity ids in place of rowids, "user" quoted). Keep the two in step.
-- Schema version 3: escalations (`escalate_to_user`, `resolve_agent_approval`).
-- One row per question or approval request a bot put to the humans of a conversation.
--   id:     q-xxxxxx (question) | ap-xxxxxx (approval): short, because people type them
--   state:  pending -> answered (question) | approved | denied (approval) ; failed when the
--           question could not be posted. Only a pending row ever moves, so one human message
--           seen by several bot accounts, or two admins racing, resolve it once.
--   origin: the session whose chat the question was posted to, kept in parts so the asker's
--           woken turn can be given it back as its originating conversation.
CREATE TABLE escalations (
    id                TEXT    NOT NULL PRIMARY KEY,
    kind              TEXT    NOT NULL,
    bot               TEXT    NOT NULL,
    session           TEXT    NOT NULL,
    origin            TEXT    NOT NULL,
    origin_bot        TEXT    NOT NULL,
    origin_platform   TEXT    NOT NULL,
    origin_account    TEXT    NOT NULL,
    origin_chat       TEXT    NOT NULL,
    origin_thread     TEXT,
    chat_key          TEXT    NOT NULL,
    posted_message_id TEXT,
    text              TEXT    NOT NULL,
    state             TEXT    NOT NULL,
    answer            TEXT,
    answered_by       TEXT,
    answer_message_id TEXT,
    created_ms        BIGINT  NOT NULL,
    resolved_ms       BIGINT 
);
-- The answer step looks for pending questions in a chat on every human message there.
CREATE INDEX escalations_pending ON escalations (origin_platform, origin_chat, created_ms)
    WHERE state = 'pending';
-- Copies of an answer arriving through other bot accounts find the row they answered.
CREATE INDEX escalations_answer ON escalations (answer_message_id)
    WHERE answer_message_id IS NOT NULL;
CREATE INDEX escalations_created ON escalations (created_ms);
