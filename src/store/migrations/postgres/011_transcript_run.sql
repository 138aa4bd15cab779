-- Schema version 11: a run's entries found by index (see the SQLite step of the same number).
CREATE INDEX transcript_run ON transcript (session, run_id, id);
