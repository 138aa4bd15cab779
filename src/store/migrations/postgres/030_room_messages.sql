CREATE TABLE room_messages (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts_ms       BIGINT  NOT NULL,
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
