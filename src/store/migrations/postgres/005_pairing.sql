-- PostgreSQL form of ../005_pairing.sql: the same tables in PostgreSQL's types (BIGINT, BYTEA,
-- identity ids in place of rowids, "user" quoted). Keep the two in step.
-- Schema version 5: DM pairing codes belong to the bot account that issued them, so that each
-- account holds at most three pending codes (a stranger flooding one bot with DMs cannot fill
-- the list with codes). Codes issued before this version have no account and count nowhere.
-- A code lasts one hour from `created_ms`; an expired one is replaced on the sender's next DM.
ALTER TABLE pairing ADD COLUMN account TEXT;
CREATE INDEX pairing_pending ON pairing (platform, account, created_ms) WHERE approved = 0;
