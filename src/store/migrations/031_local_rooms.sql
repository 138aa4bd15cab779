-- Schema version 31: the local channel's rooms live in the store (issue 51), so every instance
-- sharing the database serves every room and a room's messages outlast a restart.
--
-- local_rooms: one row per group room or direct conversation (`dm:<user>`). `next_seq` is the
-- last message's position; `active` orders direct conversations by their last activity (the
-- least recently active one is dropped past `[local] max_rooms`).
-- local_room_messages: the last `[local] room_log_messages` messages of each room.
-- local_room_posted: the last bot posts' idempotency keys, with the message id each produced;
-- `n` orders them so only the newest are kept.
CREATE TABLE local_rooms (
    room TEXT PRIMARY KEY,
    is_dm INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    active INTEGER NOT NULL
);
CREATE INDEX local_rooms_by_activity ON local_rooms (is_dm, active);
CREATE TABLE local_room_messages (
    room TEXT NOT NULL,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    author TEXT NOT NULL,
    is_bot INTEGER NOT NULL,
    text TEXT NOT NULL,
    thread TEXT,
    reply_to TEXT,
    ts_ms INTEGER NOT NULL,
    PRIMARY KEY (room, seq)
);
CREATE INDEX local_room_messages_by_id ON local_room_messages (room, id);
CREATE TABLE local_room_posted (
    key TEXT PRIMARY KEY,
    message_id TEXT NOT NULL,
    n INTEGER NOT NULL
);
CREATE INDEX local_room_posted_by_n ON local_room_posted (n);
