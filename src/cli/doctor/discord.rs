//! Discord: the bot token logs in (`GET /users/@me`) as the configured application's bot user,
//! and may connect to the gateway (`GET /gateway/bot`, which only hands out the URL and the
//! session-start budget).

use serde_json::Value;

use super::{Checked, Finding, SecretOf, Verdict, unreachable};
use crate::config::AccountConfig;

const DEFAULT_API_URL: &str = "https://discord.com";

pub(super) async fn check(
    account: &AccountConfig,
    subject: &str,
    client: &reqwest::Client,
    secret: &SecretOf<'_>,
) -> Checked {
    let api = super::api_url(account, DEFAULT_API_URL);
    let Some(token) = secret(account.bot_token_env.as_deref()) else {
        return vec![Finding::new(
            Verdict::Fail,
            subject,
            "login",
            "bot_token_env names no set variable; export the bot token".into(),
        )];
    };
    let refused = |path: &str, status: reqwest::StatusCode| {
        Finding::new(
            Verdict::Fail,
            subject,
            "login",
            format!(
                "{path} refused the bot token (HTTP {status}); reset it under the application's \
                 Bot page and export it as ${}",
                account.bot_token_env.as_deref().unwrap_or_default()
            ),
        )
    };
    let mut found = Vec::new();
    for (path, check) in [("/users/@me", "login"), ("/gateway/bot", "gateway")] {
        let url = format!("{api}/api/v10{path}");
        let auth = format!("Bot {}", token.expose());
        let response = match client.get(&url).header("authorization", auth).send().await {
            Ok(response) => response,
            Err(err) => {
                found.push(unreachable(subject, check, &url, &err));
                return found;
            }
        };
        let status = response.status();
        if !status.is_success() {
            found.push(refused(path, status));
            return found;
        }
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let user = body["id"].as_str().unwrap_or("?");
        let configured = account.application_id.as_deref();
        if check == "login" && configured.is_some_and(|app| app != user) {
            found.push(Finding::new(
                Verdict::Warn,
                subject,
                check,
                format!(
                    "the token is bot user {user}'s, and application_id is {}: check that both \
                     are from the same application",
                    configured.unwrap_or_default()
                ),
            ));
            continue;
        }
        let detail = if check == "login" {
            format!(
                "bot user {} ({user})",
                body["username"].as_str().unwrap_or("?"),
            )
        } else {
            format!(
                "gateway open to this token ({} session starts left today)",
                body["session_start_limit"]["remaining"]
            )
        };
        found.push(Finding::new(Verdict::Ok, subject, check, detail));
    }
    found
}
