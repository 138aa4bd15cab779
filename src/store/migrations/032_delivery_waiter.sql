-- Schema version 32: which instance a sender waits on (issue 51, SPEC section 10.1).
--
-- deliveries.waiter: the instance whose sender waits in its `sessions_send` call for the
-- outcome; cleared once the sender got it or gave up waiting. A row whose waiter is gone (not
-- renewed within the lease) is picked up by a live instance, which pushes the outcome to the
-- sender's session (or marks it to be pushed when the run settles), unless the sender's turn,
-- run again, took it first: the waiter is changed with one conditional update either way.
ALTER TABLE deliveries ADD COLUMN waiter TEXT;
-- Only rows still waited on are looked up by it.
CREATE INDEX deliveries_waiting ON deliveries (waiter) WHERE waiter IS NOT NULL;
