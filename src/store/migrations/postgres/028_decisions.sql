-- PostgreSQL form of ../028_decisions.sql. Keep the two in step.
CREATE TABLE decisions (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts_ms      BIGINT  NOT NULL,
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
    waited_ms  BIGINT
);
CREATE INDEX decisions_message ON decisions (message_id);
CREATE INDEX decisions_event ON decisions (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX decisions_ts ON decisions (ts_ms);
CREATE INDEX deliveries_trigger ON deliveries (trigger_id) WHERE trigger_id IS NOT NULL;
