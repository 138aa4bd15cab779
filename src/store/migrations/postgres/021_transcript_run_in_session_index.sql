-- PostgreSQL form of ../021_transcript_run_in_session_index.sql. Keep the two in step.
-- Schema version 21: a run's entries found through the session index (issue 23).
--
-- `transcript_run` (version 11) was a third B-tree that every entry went into at a place of its
-- own: a run id is random within its session, so nearly every line said wrote one more page
-- per commit (BENCHMARKS.md). A run's entries are looked up only when a restart recovers a
-- delivery, when a replayed run checks what it already recorded, and on the dashboard. The
-- session index now carries the run id after the entry id, which those look-ups check in the
-- index.
DROP INDEX transcript_run;
DROP INDEX transcript_session;
CREATE INDEX transcript_session ON transcript (session, id, run_id);
