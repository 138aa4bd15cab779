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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::testing::{echo_config, parts};

    #[tokio::test]
    async fn every_bot_of_the_roster_is_listed_with_its_platforms() {
        let gw = parts(&echo_config(&["scout", "writer"], "")).await;
        let listed = list(&gw.engine);
        assert_eq!(listed["status"], "ok");
        let bots = listed["bots"].as_array().unwrap();
        let ids: Vec<&str> = bots.iter().map(|b| b["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["scout", "writer"]);
        for bot in bots {
            assert_eq!(bot["backend"], "echo");
            assert_eq!(bot["platforms"], json!(["local"]));
        }
    }
}
