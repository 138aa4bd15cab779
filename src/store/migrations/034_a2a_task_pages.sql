-- Schema version 34: the A2A tasks of a bot, listed a page at a time (SPEC 14, ListTasks).
--
-- A page is the next few deliveries to one bot, newest first, after a keyset cursor
-- (created_ms, run_id): this index makes it a bounded range scan however many deliveries the
-- store holds for other bots.
CREATE INDEX deliveries_by_target ON deliveries (target, created_ms, run_id);
