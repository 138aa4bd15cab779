-- Schema version 33: `baton export` reads a room a page at a time (issue 50, SPEC section 13).
--
-- Each part of a room's record is read from where the last page ended, in the page's order
-- (time, then id), at most a page of it (store/room_export.rs): an index for each part that
-- is read so, in that order. The indexes they replace are their prefixes.
--   transcript_turns: a session's turns, not what it heard (the room's messages say that).
CREATE INDEX room_messages_page ON room_messages (room, ts_ms, id);
DROP INDEX room_messages_room;
CREATE INDEX transcript_turns ON transcript (session, ts_ms, id) WHERE kind <> 'inbound';
CREATE INDEX deliveries_sent ON deliveries (sender_session, created_ms, run_id);
CREATE INDEX deliveries_received ON deliveries (target_session, created_ms, run_id);
CREATE INDEX chains_origin ON chains (origin_platform, origin_chat);
CREATE INDEX chain_messages_time ON chain_messages (chain, ts_ms, id);
CREATE INDEX artifacts_session_page ON artifacts (session, created_ms, id);
DROP INDEX artifacts_session;
