//! `[lanes]`, `[limits]` and `[local]`: how much runs at once, guard budgets and reply bounds,
//! and the local rooms' bounds.

use serde::Deserialize;

/// `[lanes]`: how many turns run at once per lane.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LanesConfig {
    /// Turns caused by user messages.
    pub main: usize,
    /// Bot-to-bot deliveries.
    pub nested: usize,
    /// Sub-agent runs.
    pub subagent: usize,
    /// Heartbeats and cron entries.
    pub cron: usize,
    /// Turns that may wait on one lane; a chat message over it gets a "busy" notice.
    pub max_queued: usize,
    /// Turns that may wait in one session (bot and chat); over it, the same.
    pub max_queued_per_session: usize,
}

impl Default for LanesConfig {
    fn default() -> Self {
        Self {
            main: 4,
            nested: 4,
            subagent: 8,
            cron: 1,
            max_queued: 256,
            max_queued_per_session: 32,
        }
    }
}

/// `[limits]`: guard budgets and how big a reply may be.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LimitsConfig {
    /// Messages one sender may send that wake a bot, per minute.
    pub inbound_per_sender_per_minute: u32,
    /// Messages from bot A that may wake bot B in one chat, per minute.
    pub bot_pair_events_per_minute: u32,
    /// After a pair exhausts its budget, how long it stays cooled down.
    pub bot_pair_cooldown_seconds: u64,
    /// Bot-to-bot replies in a chat before a human must speak.
    pub max_bot_reply_chain: u32,
    /// `sessions_send` A->B per minute.
    pub send_per_pair_per_minute: u32,
    /// `sessions_send` by one sender per minute.
    pub send_per_sender_per_minute: u32,
    /// Distinct targets one sender may reach within the fan-out window.
    pub fan_out_targets: u32,
    /// The fan-out window.
    pub fan_out_window_seconds: u64,
    /// Hops A->B->C allowed.
    pub max_depth: u32,
    /// Extra alternating A<->B exchanges after a send (0..=5).
    pub max_ping_pong_turns: u32,
    /// Largest reply a bot's backend may give, in bytes; a longer one is kept whole as an
    /// artifact and the chat gets its start and a note (`engine/reply_bound.rs`).
    pub max_reply_bytes: usize,
    /// Posts one reply may make; the rest goes as a file, or is cut with a note.
    pub max_posts_per_reply: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            inbound_per_sender_per_minute: 20,
            bot_pair_events_per_minute: 10,
            bot_pair_cooldown_seconds: 60,
            max_bot_reply_chain: 3,
            send_per_pair_per_minute: 10,
            send_per_sender_per_minute: 30,
            fan_out_targets: 5,
            fan_out_window_seconds: 5,
            max_depth: 3,
            max_ping_pong_turns: 0,
            max_reply_bytes: 1024 * 1024,
            max_posts_per_reply: 20,
        }
    }
}

/// `[local]`: bounds on the local channel's rooms, which live in the store (the transcript keeps
/// every word; a room's log is only what `GET /api/local/rooms/...` shows).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LocalConfig {
    /// Group rooms the hub holds; a post that would open one more is refused. Direct
    /// conversations keep this many logs too, the least recently active dropped first.
    pub max_rooms: usize,
    /// Messages a room's log keeps; older ones roll off.
    pub room_log_messages: usize,
    /// Largest message a person may post into a room, in bytes.
    pub max_message_bytes: usize,
}

impl Default for LocalConfig {
    fn default() -> Self {
        Self {
            max_rooms: 50,
            room_log_messages: 100,
            max_message_bytes: 16 * 1024,
        }
    }
}
