-- PostgreSQL form of ../030_local_rooms.sql. Keep the two in step.
CREATE TABLE local_rooms (
    room TEXT PRIMARY KEY,
    is_dm BIGINT NOT NULL,
    next_seq BIGINT NOT NULL,
    active BIGINT NOT NULL
);
CREATE INDEX local_rooms_by_activity ON local_rooms (is_dm, active);
CREATE TABLE local_room_messages (
    room TEXT NOT NULL,
    seq BIGINT NOT NULL,
    id TEXT NOT NULL,
    author TEXT NOT NULL,
    is_bot BIGINT NOT NULL,
    text TEXT NOT NULL,
    thread TEXT,
    reply_to TEXT,
    ts_ms BIGINT NOT NULL,
    PRIMARY KEY (room, seq)
);
CREATE INDEX local_room_messages_by_id ON local_room_messages (room, id);
CREATE TABLE local_room_posted (
    key TEXT PRIMARY KEY,
    message_id TEXT NOT NULL,
    n BIGINT NOT NULL
);
CREATE INDEX local_room_posted_by_n ON local_room_posted (n);
