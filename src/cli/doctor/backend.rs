//! A bot's model backend: an `openai` bot's server answers `GET /models` and lists the bot's
//! model. The other backends have nothing to ask without running a turn.

use serde_json::Value;

use super::{Checked, Finding, Verdict, unreachable};
use crate::backend::OpenAiSettings;
use crate::config::{BackendKind, BotConfig, Config, resolve_secret};

/// The check of `bot`'s backend, when it has one to ask.
pub(super) fn check<'a>(
    config: &'a Config,
    bot: &'a BotConfig,
    client: &'a reqwest::Client,
    env: &'a dyn Fn(&str) -> Option<String>,
) -> Option<impl Future<Output = Checked> + 'a> {
    (bot.backend == BackendKind::Openai).then(|| models(config, bot, client, env))
}

async fn models(
    config: &Config,
    bot: &BotConfig,
    client: &reqwest::Client,
    env: &dyn Fn(&str) -> Option<String>,
) -> Checked {
    let subject = format!("bot {}", bot.id);
    let defaults = &config.backends.openai;
    let configured = bot.base_url.as_deref().or(defaults.base_url.as_deref());
    let base = OpenAiSettings::resolve_base_url(configured, env("OPENAI_BASE_URL").as_deref());
    let key = resolve_secret(
        bot.api_key_env
            .as_deref()
            .or(defaults.api_key_env.as_deref()),
        env,
    );
    let url = format!("{base}/models");
    let mut request = client.get(&url);
    if let Some(key) = &key {
        request = request.bearer_auth(key.expose());
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(err) => return vec![unreachable(&subject, "backend", &url, &err)],
    };
    let status = response.status();
    if !status.is_success() {
        let hint = if status.as_u16() == 401 || status.as_u16() == 403 {
            "the API key was refused; check api_key_env's variable"
        } else {
            "check base_url (it ends with the API version, such as /v1)"
        };
        return vec![Finding::new(
            Verdict::Fail,
            &subject,
            "backend",
            format!("{url} answered HTTP {status}; {hint}"),
        )];
    }
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let listed: Vec<&str> = body["data"]
        .as_array()
        .map(|models| models.iter().filter_map(|m| m["id"].as_str()).collect())
        .unwrap_or_default();
    let model = bot.model.as_deref().unwrap_or_default();
    let finding = if listed.contains(&model) {
        Finding::new(
            Verdict::Ok,
            &subject,
            "model",
            format!("{base} serves {model}"),
        )
    } else {
        let some: Vec<&str> = listed.iter().take(10).copied().collect();
        Finding::new(
            Verdict::Fail,
            &subject,
            "model",
            format!(
                "{base} does not list model `{model}`; set the bot's model to one it serves ({})",
                if some.is_empty() {
                    "it lists none".to_owned()
                } else {
                    some.join(", ")
                }
            ),
        )
    };
    vec![finding]
}
