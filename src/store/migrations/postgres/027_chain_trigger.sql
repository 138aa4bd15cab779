-- PostgreSQL form of ../027_chain_trigger.sql. Keep the two in step.
ALTER TABLE chains ADD COLUMN trigger_id TEXT;
