-- PostgreSQL form of ../016_typing_owner.sql. Keep the two in step.
-- Schema version 16: typing indicators across instances (issue 22).
--
-- typing_open.owner: the instance (`cluster.instance_id`) that put the indicator up. An
-- instance starting, or sweeping, takes down only the rows of instances that are gone (no row
-- in `instances` renewed within the lease), never those of a live one. Rows from before this
-- version have none: they were left by a single gateway that stopped.
ALTER TABLE typing_open ADD COLUMN owner TEXT;
