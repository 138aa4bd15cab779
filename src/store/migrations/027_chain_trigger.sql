-- Schema version 27: the trigger a chain's turns are charged to (issue 49, SPEC section 12).
--
-- chains.trigger_id: the trigger of the turn that started the chain (the run id a message, a
-- schedule or an API request began), or the chain's own id for a chain an admin started with
-- a command. Every turn of the chain is charged to it, so a trigger budget covers the whole
-- chain one message set going. NULL for chains from before this version: each of their turns
-- is its own trigger.
ALTER TABLE chains ADD COLUMN trigger_id TEXT;
