-- PostgreSQL form of ../026_chain_runner.sql. Keep the two in step.
ALTER TABLE chains ADD COLUMN runner TEXT;
