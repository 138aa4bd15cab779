//! `GET /api/roster`: who is here and what they are doing, for the dashboard's first paint
//! (the event stream keeps it current): every bot with its accounts and their connection
//! state, its running turns (from the turn events) and its queued ones (from the lanes), the
//! lanes' load and the counters a person watches.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::metrics;
use crate::relay::Relay;

/// The roster, now.
pub(super) async fn roster(State(relay): State<Relay>) -> Json<Value> {
    let engine = relay.engine();
    // Read first: whatever happens while the rest is read is replayed to a client that
    // subscribes after it, so it misses nothing.
    let last_event = engine.events().last_id();
    let running = engine.events().activity().running();
    let bots: Vec<Value> = engine
        .roster()
        .bots()
        .iter()
        .map(|bot| {
            let accounts: Vec<Value> = engine
                .roster()
                .accounts()
                .iter()
                .filter(|a| a.bot.id() == bot.id())
                .map(|a| {
                    let state = a.adapter.connection_state();
                    let reason = a.adapter.connection().trouble().map(|t| t.as_str());
                    json!({"platform": a.platform.as_str(), "account": a.id.as_str(),
                           "state": state.as_str(), "attempt": state.attempt(),
                           "ready": state.is_ready(), "reason": reason})
                })
                .collect();
            let mine: Vec<_> = running.iter().filter(|t| &t.bot == bot.id()).collect();
            let queued = engine
                .lanes()
                .bot_turns(bot.id())
                .saturating_sub(mine.len());
            json!({
                "id": bot.id(),
                "name": bot.config.display_name(),
                "description": bot.config.description,
                "backend": bot.config.backend.as_str(),
                "model": bot.config.model.clone().unwrap_or_default(),
                "accounts": accounts,
                "running": mine,
                "queued": queued,
            })
        })
        .collect();
    let lanes: Vec<Value> = engine
        .lanes()
        .load()
        .into_iter()
        .map(|l| {
            json!({"lane": l.lane.as_str(), "capacity": l.capacity, "queued": l.queued,
                   "running": l.running})
        })
        .collect();
    let m = engine.metrics();
    let refusals: usize = m.recent.last_hour(None).iter().map(|r| r.count).sum();
    Json(json!({
        "bots": bots,
        "lanes": lanes,
        "counters": {
            "turns_reply": m.get(&metrics::TURNS, "reply"),
            "turns_silent": m.get(&metrics::TURNS, "silent"),
            "turns_failed": m.get(&metrics::TURNS, "failed"),
            "refusals_last_hour": refusals,
            "deliveries_in_flight": relay.waiters().in_flight(),
        },
        "last_event": last_event,
    }))
}
