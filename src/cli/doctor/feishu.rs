//! Feishu/Lark: the app's id and secret get a tenant token, and that token reads the bot's
//! own info (`bot/v3/info`): a bot that is not switched on has none.

use serde_json::{Value, json};

use super::{Checked, Finding, SecretOf, Verdict, unreachable};
use crate::config::AccountConfig;
use baton_contract::Platform;

pub(super) async fn check(
    account: &AccountConfig,
    subject: &str,
    client: &reqwest::Client,
    secret: &SecretOf<'_>,
) -> Checked {
    let default = match account.platform {
        Platform::Lark => "https://open.larksuite.com",
        _ => "https://open.feishu.cn",
    };
    let api = super::api_url(account, default);
    let fail = |check, detail: String| vec![Finding::new(Verdict::Fail, subject, check, detail)];
    let (Some(app_id), Some(app_secret)) = (
        account.app_id.as_deref(),
        secret(account.app_secret_env.as_deref()),
    ) else {
        return fail(
            "login",
            "app_id or app_secret_env is missing; copy both from the app's Credentials page".into(),
        );
    };
    let url = format!("{api}/open-apis/auth/v3/tenant_access_token/internal");
    let body = json!({ "app_id": app_id, "app_secret": app_secret.expose() });
    let answer: Value = match client.post(&url).json(&body).send().await {
        Ok(response) => response.json().await.unwrap_or(Value::Null),
        Err(err) => return vec![unreachable(subject, "login", &url, &err)],
    };
    let Some(token) = answer["tenant_access_token"]
        .as_str()
        .filter(|_| answer["code"] == 0)
    else {
        return fail(
            "login",
            format!(
                "the tenant token was refused ({} {}); check app_id {app_id} and ${}",
                answer["code"],
                answer["msg"].as_str().unwrap_or(""),
                account.app_secret_env.as_deref().unwrap_or_default()
            ),
        );
    };
    let mut found = vec![Finding::new(
        Verdict::Ok,
        subject,
        "login",
        format!("app {app_id} gets a tenant token"),
    )];
    let url = format!("{api}/open-apis/bot/v3/info");
    let info: Value = match client.get(&url).bearer_auth(token).send().await {
        Ok(response) => response.json().await.unwrap_or(Value::Null),
        Err(err) => {
            found.push(unreachable(subject, "bot", &url, &err));
            return found;
        }
    };
    found.push(if info["code"] == 0 {
        Finding::new(
            Verdict::Ok,
            subject,
            "bot",
            format!(
                "bot {} ({})",
                info["bot"]["app_name"].as_str().unwrap_or("?"),
                info["bot"]["open_id"].as_str().unwrap_or("?")
            ),
        )
    } else {
        Finding::new(
            Verdict::Fail,
            subject,
            "bot",
            format!(
                "bot/v3/info refused ({} {}); add the Bot feature to the app and publish a version",
                info["code"],
                info["msg"].as_str().unwrap_or("")
            ),
        )
    });
    found
}
