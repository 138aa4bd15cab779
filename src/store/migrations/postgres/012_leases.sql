-- PostgreSQL form of ../012_leases.sql: the same tables in PostgreSQL's types. Keep the two
-- in step.
-- Schema version 12: several instances on one database (issue 22), account leases.
--
-- instances: one row per running gateway, renewed with its leases; `baton cluster status`
-- and `/api/cluster` read it. A clean shutdown deletes its row; a killed instance's row stays,
-- showing its last renewal, until a day has passed.
-- leases: who may connect each socket account, until when. Taken and renewed by one
-- conditional upsert (`leases.rs`). Times are the database's clock, in ms since the epoch.
CREATE TABLE instances (
    id         TEXT   PRIMARY KEY,
    started_ms BIGINT NOT NULL,
    renewed_ms BIGINT NOT NULL,
    version    TEXT   NOT NULL
);
CREATE TABLE leases (
    platform   TEXT   NOT NULL,
    account    TEXT   NOT NULL,
    holder     TEXT   NOT NULL,
    expires_ms BIGINT NOT NULL,
    PRIMARY KEY (platform, account)
);
CREATE INDEX leases_holder ON leases (holder);
