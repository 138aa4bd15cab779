-- PostgreSQL form of ../033_room_export_pages.sql. Keep the two in step.
CREATE INDEX room_messages_page ON room_messages (room, ts_ms, id);
DROP INDEX room_messages_room;
CREATE INDEX transcript_turns ON transcript (session, ts_ms, id) WHERE kind <> 'inbound';
CREATE INDEX deliveries_sent ON deliveries (sender_session, created_ms, run_id);
CREATE INDEX deliveries_received ON deliveries (target_session, created_ms, run_id);
CREATE INDEX chains_origin ON chains (origin_platform, origin_chat);
CREATE INDEX chain_messages_time ON chain_messages (chain, ts_ms, id);
CREATE INDEX artifacts_session_page ON artifacts (session, created_ms, id);
DROP INDEX artifacts_session;
