-- PostgreSQL form of ../014_inbox_owner.sql: the same column in PostgreSQL's types. Keep the
-- two in step.
-- Schema version 14: an instance's left-over events re-run by another after a failover
-- (issue 22).
--
-- inbox.owner: the instance (`cluster.instance_id`) running the event now: the one that filed
-- it, or the one that took it over from an instance that stopped. '' is nobody: rows left by a
-- restarted instance's previous process, and rows filed before this version. A row whose owner
-- has no live registration (no row in `instances` renewed within the lease) is taken over by
-- one conditional update (`inbox.rs`), so exactly one instance re-runs it.
--
-- instances.stopping: 1 once a clean stop has given up its leases, while its last turns drain;
-- it no longer counts as live for the others' share of the accounts, but its inbox rows stay
-- its own until its row is deleted at the end of the drain.
ALTER TABLE inbox ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN stopping INTEGER NOT NULL DEFAULT 0;
CREATE INDEX inbox_account ON inbox (account, owner);
