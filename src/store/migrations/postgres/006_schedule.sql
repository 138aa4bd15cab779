-- PostgreSQL form of ../006_schedule.sql: the same tables in PostgreSQL's types (BIGINT, BYTEA,
-- identity ids in place of rowids, "user" quoted). Keep the two in step.
-- Schema version 6: scheduled turns (heartbeats and cron entries).
-- (Versions 4, chains, and 5, pairing, come from the `chains` branch; they merge in order.)
-- One row per bot per job, so a restart neither fires every heartbeat at once nor forgets a
-- cron slot, and a heartbeat that says the same thing twice is caught across restarts.
--   job:          `heartbeat` | `cron-<n>` (the entry's index in the bot's [[bots.cron]])
--   spec:         what next_due_ms was computed from (interval, schedule, target); a config
--                 change re-arms the job instead of trusting a due time computed for another
--                 schedule
--   next_due_ms:  when the job falls due next
--   last_text:    the last heartbeat reply actually delivered, and when (duplicate suppression)
CREATE TABLE schedule_jobs (
    bot          TEXT    NOT NULL,
    job          TEXT    NOT NULL,
    spec         TEXT    NOT NULL,
    next_due_ms  BIGINT  NOT NULL,
    last_text    TEXT,
    last_text_ms BIGINT,
    PRIMARY KEY (bot, job)
);
