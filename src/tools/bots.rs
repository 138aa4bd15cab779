//! `bots_list` (alias `bots_list_available`): the roster, so a bot can find who to ask.

use serde_json::{Value, json};

use crate::engine::Engine;

/// Every bot: id, name, description, backend, model and the platforms it is on.
pub(super) fn list(engine: &Engine) -> Value {
    let bots: Vec<Value> = engine
        .roster()
        .bots()
        .iter()
        .map(|bot| {
            let mut platforms: Vec<&str> = engine
                .roster()
                .accounts()
                .iter()
                .filter(|a| a.bot.id() == bot.id())
                .map(|a| a.platform.as_str())
                .collect();
            platforms.dedup();
            json!({
                "id": bot.id(),
                "name": bot.config.display_name(),
                "description": bot.config.description,
                "backend": bot.config.backend.as_str(),
                "model": bot.config.model.clone().unwrap_or_default(),
                "platforms": platforms,
            })
        })
        .collect();
    json!({"status": "ok", "bots": bots})
}
