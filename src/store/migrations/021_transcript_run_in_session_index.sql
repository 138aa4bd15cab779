-- Schema version 21: a run's entries found through the session index (issue 23).
--
-- `transcript_run` (version 11) was a third B-tree that every entry went into at a place of its
-- own: a run id is random within its session, so nearly every line said wrote one more page to
-- the log per commit, and an entry cost about twice what it does without it (BENCHMARKS.md).
-- A run's entries are looked up only when a restart recovers a delivery, when a replayed run
-- checks what it already recorded, and on the dashboard. The session index now carries the run
-- id after the entry id: those look-ups walk the session's index entries and read the rows of
-- the run only (a few milliseconds for a session of 30,000 entries), and an entry is added
-- where its session's newest one is.
DROP INDEX transcript_run;
DROP INDEX transcript_session;
CREATE INDEX transcript_session ON transcript (session, id, run_id);
