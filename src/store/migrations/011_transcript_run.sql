-- Schema version 11: a run's entries found by index (issue 23).
--
-- `run_entries` (one run's lines in one session: a delivery's tool calls, whether a replayed
-- run already heard its message) searched `transcript_session` for the session and then read
-- every row of it to compare run ids. A bot that answers many `sessions_send` calls keeps them
-- in one session, so each round trip read the whole, growing session: the bot-to-bot benchmark
-- fell from ~450 to ~110 round trips/s (BENCHMARKS.md). This index finds the run's rows alone.
CREATE INDEX transcript_run ON transcript (session, run_id);
