-- PostgreSQL form of ../032_delivery_waiter.sql. Keep the two in step.
ALTER TABLE deliveries ADD COLUMN waiter TEXT;
-- Only rows still waited on are looked up by it.
CREATE INDEX deliveries_waiting ON deliveries (waiter) WHERE waiter IS NOT NULL;
