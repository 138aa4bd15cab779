-- Schema version 25: budgets that follow the conversation (issue 49, SPEC section 12).
--
-- usage: one row per model call (a turn's calls summed), with who made it, the chat and the
-- trigger it is charged to, and what it cost (NULL for a model without a price). A budget's
-- window sum is read from the index on its scope's key and the time, never a scan.
-- budget_notices: when a budget's notice (or a warning) last went out, per budget and scope
-- key, so it goes once per window even across restarts and instances.
-- budget_limits: limits an admin set with `/baton budget set`, over the config's.
-- deliveries.trigger_id: the trigger a bot-to-bot delivery's turns are charged to.
CREATE TABLE usage (
    id                INTEGER PRIMARY KEY,
    ts_ms             INTEGER NOT NULL,
    bot               TEXT    NOT NULL,
    platform          TEXT    NOT NULL,
    chat              TEXT    NOT NULL,
    session           TEXT    NOT NULL,
    run_id            TEXT    NOT NULL,
    trigger_id        TEXT    NOT NULL,
    instance          TEXT    NOT NULL,
    model             TEXT    NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd          REAL,
    estimated         INTEGER NOT NULL
);
CREATE INDEX usage_bot ON usage (bot, ts_ms);
CREATE INDEX usage_chat ON usage (chat, platform, ts_ms);
CREATE INDEX usage_trigger ON usage (trigger_id, ts_ms);
CREATE INDEX usage_ts ON usage (ts_ms);
CREATE TABLE budget_notices (
    budget     TEXT    NOT NULL,
    scope_key  TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    noticed_ms INTEGER NOT NULL,
    PRIMARY KEY (budget, scope_key, kind)
);
CREATE TABLE budget_limits (
    name     TEXT    PRIMARY KEY,
    tokens   INTEGER,
    cost_usd REAL,
    set_ms   INTEGER NOT NULL
);
ALTER TABLE deliveries ADD COLUMN trigger_id TEXT;
