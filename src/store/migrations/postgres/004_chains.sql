-- PostgreSQL form of ../004_chains.sql: the same tables in PostgreSQL's types (BIGINT, BYTEA,
-- identity ids in place of rowids, "user" quoted). Keep the two in step.
-- Schema version 4: chains, ordered turn-taking among bots.
-- One row per chain, and one row per thing said or done in it.
--   id:           ch-xxxxxx: short, because people type it (`/baton chain close ch-7kq2xd`)
--   coordinator:  the bot steering it with the chain_* tools; NULL when baton itself coordinates
--                 (round-robin, `[chains] coordinator` unset)
--   holder:       who may post now: a participant, or the coordinator (NULL when that is baton).
--                 Every move of the turn is one UPDATE on the writer that checks the holder and
--                 the turn number first, so a late post or a stale timeout can never move it.
--   participants: JSON array of bot ids, in the order they were named
--   state:        open -> completed (chain_close, or round-robin done) | stopped (a human) |
--                 capped (max_rounds) | stalled (the coordinator let its turn go by)
--   turn:         counts moves of the turn; round, round_turn: the current round and the turn it
--                 began at (a round ends when someone who spoke in it is given the turn again)
--   origin_*:     the chat the chain posts in: platform, chat, thread, the message its posts
--                 answer (anchor) and the account baton's own lines about it go through
CREATE TABLE chains (
    id              TEXT    NOT NULL PRIMARY KEY,
    name            TEXT    NOT NULL,
    coordinator     TEXT,
    holder          TEXT,
    participants    TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    turn            BIGINT  NOT NULL DEFAULT 0,
    round           BIGINT  NOT NULL DEFAULT 0,
    round_turn      BIGINT  NOT NULL DEFAULT 0,
    origin_platform TEXT    NOT NULL,
    origin_chat     TEXT    NOT NULL,
    origin_thread   TEXT,
    origin_anchor   TEXT,
    origin_account  TEXT    NOT NULL,
    started_by      TEXT    NOT NULL,
    closed_reason   TEXT,
    created_ms      BIGINT  NOT NULL,
    closed_ms       BIGINT 
);
-- `/baton chain stop` looks for the open chains of the chat it is said in.
CREATE INDEX chains_open ON chains (origin_platform, origin_chat) WHERE state = 'open';
CREATE INDEX chains_created ON chains (created_ms);

--   kind:      message (a post, shown in the chat) | handoff (the turn given to `recipient`, with
--              the prompt as content) | system (baton's own note: opened, timed out, closed)
--   turn:      the chain's turn number when it was written
CREATE TABLE chain_messages (
    id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    chain     TEXT    NOT NULL REFERENCES chains (id),
    turn      BIGINT  NOT NULL,
    sender    TEXT    NOT NULL,
    kind      TEXT    NOT NULL,
    content   TEXT    NOT NULL,
    recipient TEXT,
    ts_ms     BIGINT  NOT NULL
);
CREATE INDEX chain_messages_chain ON chain_messages (chain, id);
