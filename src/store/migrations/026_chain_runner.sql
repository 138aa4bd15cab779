-- Schema version 26: which instance a chain's turn runs on (issue 51, SPEC section 10.1).
--
-- chains.runner: the instance that last acted on the chain (gave, passed, posted in or took
-- back its turn), so the one running its current turn. A starting instance picks up only the
-- open chains whose runner is gone (not renewed within the lease), is its own previous process,
-- or was never set (chains from before this version); a live instance's chains are left alone.
ALTER TABLE chains ADD COLUMN runner TEXT;
