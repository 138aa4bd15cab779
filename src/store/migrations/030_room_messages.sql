-- Schema version 30: every room message kept once, for `baton export` (issue 50, SPEC section 13).
--
-- room_messages: every inbound message once per chat, whoever received it and whether or not
-- it woke a bot (a message nobody answers is otherwise only in the trimmed history buffer), so
-- `baton export` gives each message with its author. Written with the first decision on it
-- (`ON CONFLICT DO NOTHING` for the other bots' copies), pruned with the transcripts.
--   room:        `<platform>:<chat>` (threads included); chat: `<platform>:<chat>[:thread:<id>]`
--   author:      the person's id, or `bot:<id>`; origin: human | bot
CREATE TABLE room_messages (
    id          INTEGER PRIMARY KEY,
    ts_ms       INTEGER NOT NULL,
    room        TEXT    NOT NULL,
    chat        TEXT    NOT NULL,
    message_id  TEXT    NOT NULL,
    author      TEXT    NOT NULL,
    author_name TEXT    NOT NULL,
    origin      TEXT    NOT NULL,
    text        TEXT    NOT NULL,
    UNIQUE (chat, message_id)
);
CREATE INDEX room_messages_room ON room_messages (room, ts_ms);
CREATE INDEX room_messages_ts ON room_messages (ts_ms);
