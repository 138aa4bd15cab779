-- PostgreSQL form of ../031_delivery_trace.sql. Keep the two in step.
ALTER TABLE deliveries ADD COLUMN trace_parent TEXT;
