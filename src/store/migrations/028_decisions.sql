-- Schema version 28: why an inbound message was or was not answered (issue 50, SPEC section 13).
--
-- decisions: one row per inbound event per bot: the step that decided what became of it
-- (duplicate, self, size, admin, policy, answer, activation, bot_guard, rate, lane, budget,
-- turn), its outcome and reason, and for a turn its run and session (the transcript and the
-- deliveries say the rest). Written in the job that ends the event's run, so it costs no
-- write of its own; pruned with the transcripts (`[retention] transcripts`).
-- deliveries_trigger: a turn's deliveries, found by the run that began them.
CREATE TABLE decisions (
    id         INTEGER PRIMARY KEY,
    ts_ms      INTEGER NOT NULL,
    platform   TEXT    NOT NULL,
    account    TEXT    NOT NULL,
    bot        TEXT    NOT NULL,
    chat       TEXT    NOT NULL,
    message_id TEXT    NOT NULL,
    event_id   TEXT,
    sender     TEXT    NOT NULL,
    step       TEXT    NOT NULL,
    outcome    TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    session    TEXT,
    run_id     TEXT,
    waited_ms  INTEGER
);
CREATE INDEX decisions_message ON decisions (message_id);
CREATE INDEX decisions_event ON decisions (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX decisions_ts ON decisions (ts_ms);
CREATE INDEX deliveries_trigger ON deliveries (trigger_id) WHERE trigger_id IS NOT NULL;
