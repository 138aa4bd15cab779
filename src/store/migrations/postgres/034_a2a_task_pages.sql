-- PostgreSQL form of ../034_a2a_task_pages.sql. Keep the two in step.
CREATE INDEX deliveries_by_target ON deliveries (target, created_ms, run_id);
