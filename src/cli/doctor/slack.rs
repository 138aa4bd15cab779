//! Slack: the bot token logs in (`auth.test`), its granted scopes (the `x-oauth-scopes`
//! header) cover what `baton setup slack` asks for, and, in Socket Mode, the app token may open
//! connections (`apps.connections.open`; the URL it gives is not used).

use serde_json::Value;

use super::{Checked, Finding, SecretOf, Verdict, unreachable};
use crate::cli::setup::slack::{bot_scopes, events_mode};
use crate::config::{AccountConfig, Config};

const DEFAULT_API_URL: &str = "https://slack.com/api";

pub(super) async fn check(
    config: &Config,
    account: &AccountConfig,
    subject: &str,
    client: &reqwest::Client,
    secret: &SecretOf<'_>,
) -> Checked {
    let api = super::api_url(account, DEFAULT_API_URL);
    let mut found = Vec::new();
    let Some(bot_token) = secret(account.bot_token_env.as_deref()) else {
        return vec![Finding::new(
            Verdict::Fail,
            subject,
            "login",
            "bot_token_env names no set variable; export the Bot User OAuth Token (xoxb-...)"
                .into(),
        )];
    };
    let url = format!("{api}/auth.test");
    let response = match client
        .post(&url)
        .bearer_auth(bot_token.expose())
        .send()
        .await
    {
        Ok(response) => response,
        Err(err) => return vec![unreachable(subject, "login", &url, &err)],
    };
    let granted: Option<Vec<String>> = response
        .headers()
        .get("x-oauth-scopes")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if body["ok"] != true {
        let error = body["error"]
            .as_str()
            .unwrap_or("no answer Slack understands");
        return vec![Finding::new(
            Verdict::Fail,
            subject,
            "login",
            format!(
                "auth.test refused the bot token ({error}); copy the Bot User OAuth Token \
                 (xoxb-...) from OAuth & Permissions into ${}",
                account.bot_token_env.as_deref().unwrap_or_default()
            ),
        )];
    }
    found.push(Finding::new(
        Verdict::Ok,
        subject,
        "login",
        format!(
            "bot user {} ({}) in workspace {}",
            body["user"].as_str().unwrap_or("?"),
            body["user_id"].as_str().unwrap_or("?"),
            body["team"].as_str().unwrap_or("?"),
        ),
    ));
    found.push(scopes(config, account, subject, granted.as_deref()));
    if !events_mode(account) {
        found.push(socket(account, subject, client, secret, api).await);
    }
    found
}

/// Whether the granted scopes cover what the bot needs.
fn scopes(
    config: &Config,
    account: &AccountConfig,
    subject: &str,
    granted: Option<&[String]>,
) -> Finding {
    let Some(granted) = granted else {
        return Finding::new(
            Verdict::Warn,
            subject,
            "scopes",
            "Slack did not say which scopes the token has (no x-oauth-scopes header)".into(),
        );
    };
    let bot = config.bots.iter().find(|b| b.id == account.bot);
    let needed = bot.map(|bot| bot_scopes(config, bot)).unwrap_or_default();
    let missing: Vec<&str> = needed
        .into_iter()
        .filter(|scope| !granted.iter().any(|g| g == scope))
        .collect();
    if missing.is_empty() {
        Finding::new(
            Verdict::Ok,
            subject,
            "scopes",
            "the token has every scope the bot needs".into(),
        )
    } else {
        Finding::new(
            Verdict::Fail,
            subject,
            "scopes",
            format!(
                "missing {}; add them under OAuth & Permissions (or paste `baton setup slack {}` \
                 into the app's manifest) and reinstall the app",
                missing.join(", "),
                account.bot
            ),
        )
    }
}

/// Whether the app token may open Socket Mode connections.
async fn socket(
    account: &AccountConfig,
    subject: &str,
    client: &reqwest::Client,
    secret: &SecretOf<'_>,
    api: &str,
) -> Finding {
    let Some(app_token) = secret(account.app_token_env.as_deref()) else {
        return Finding::new(
            Verdict::Fail,
            subject,
            "socket",
            "app_token_env names no set variable; export the app-level token (xapp-...)".into(),
        );
    };
    let url = format!("{api}/apps.connections.open");
    let response = match client
        .post(&url)
        .bearer_auth(app_token.expose())
        .send()
        .await
    {
        Ok(response) => response,
        Err(err) => return unreachable(subject, "socket", &url, &err),
    };
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if body["ok"] == true {
        Finding::new(
            Verdict::Ok,
            subject,
            "socket",
            "the app token may open Socket Mode connections".into(),
        )
    } else {
        let error = body["error"]
            .as_str()
            .unwrap_or("no answer Slack understands");
        Finding::new(
            Verdict::Fail,
            subject,
            "socket",
            format!(
                "apps.connections.open refused the app token ({error}); generate an app-level \
                 token with connections:write under Basic Information and export it as ${}, \
                 and switch Socket Mode on",
                account.app_token_env.as_deref().unwrap_or_default()
            ),
        )
    }
}
