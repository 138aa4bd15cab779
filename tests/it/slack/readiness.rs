//! Why an account is not connected, as `/readyz`, the dashboard's roster and `/baton status`
//! say it: a refused bot token, an app token without `connections:write`, a platform that does
//! not answer (an account that keeps failing is not ready).

use super::*;

use crate::support::gateway::DEADLINE;
use crate::support::process::eventually;

#[tokio::test]
async fn readyz_the_roster_and_status_say_why_each_account_is_not_connected() {
    let slack = FakeSlack::start().await;
    for bot in ["snark", "caid", "doc"] {
        slack.app(bot, &format!("U_{}", bot.to_uppercase()));
    }
    slack.withhold_scope("connections:write");
    let account = |bot: &str, api: &str| {
        let upper = bot.to_uppercase();
        format!(
            "\n[[bots]]\nid = \"{bot}\"\nbackend = \"echo\"\n\n[[accounts]]\nbot = \"{bot}\"\n\
             platform = \"slack\"\napp_token_env = \"{upper}_SLACK_APP_TOKEN\"\n\
             bot_token_env = \"{upper}_SLACK_BOT_TOKEN\"\napi_url = \"{api}\"\n"
        )
    };
    // Nothing listens on port 1 of loopback: every connection is refused at once.
    let config = format!(
        "[admins]\nlocal = [\"admin\"]\n\n[chats_default]\ngroup_policy = \"open\"\n\
         {}{}{}\n[[bots]]\nid = \"ops\"\nbackend = \"echo\"\n\n[[accounts]]\nbot = \"ops\"\n\
         platform = \"local\"\n",
        account("snark", &slack.api_url),
        account("caid", "http://127.0.0.1:1/api"),
        account("doc", &slack.api_url),
    );
    let env = |name: &str| match name {
        "SNARK_SLACK_BOT_TOKEN" => Some("xoxb-revoked".to_owned()),
        other => env(other),
    };
    let (_dir, db) = crate::support::gateway::temp_db();
    let gateway = TestGateway::start_with_env(&config, &db, &env).await;

    let wanted = [
        ("slack/snark", "stopped", "invalid token"),
        ("slack/caid", "retrying", "unreachable"),
        ("slack/doc", "stopped", "missing scope"),
    ];
    let readyz = format!("{}/readyz", gateway.base);
    let body: Value = eventually(
        DEADLINE,
        "/readyz saying why each account is down",
        || async {
            let response = gateway.http.get(&readyz).send().await.ok()?;
            let status = response.status().as_u16();
            let body: Value = response.json().await.ok()?;
            let said = |(account, state, reason): &(&str, &str, &str)| {
                body["accounts"].as_array().is_some_and(|a| {
                    a.iter().any(|x| {
                        x["account"] == *account && x["state"] == *state && x["reason"] == *reason
                    })
                })
            };
            (status == 503 && wanted.iter().all(said)).then_some(body)
        },
    )
    .await;
    assert_eq!(body["ready"], false, "{body:#}");
    let not_ready = body["accounts_not_ready"].as_array().unwrap();
    assert_eq!(not_ready.len(), 3, "the local account is ready: {body:#}");

    let roster = gateway.get("/api/roster").await;
    for (account, _, reason) in wanted {
        let (_, bot) = account.split_once('/').unwrap();
        let entry = roster["bots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id"] == bot)
            .unwrap();
        assert_eq!(entry["accounts"][0]["reason"], reason, "{roster:#}");
        assert_eq!(entry["accounts"][0]["ready"], false, "{roster:#}");
    }

    gateway.say("ops-room", "admin", "/baton status").await;
    gateway.settle().await;
    let said = gateway.said_by("ops-room", "ops").await;
    let status = said
        .iter()
        .filter_map(|m| m["text"].as_str())
        .find(|t| t.contains("baton status"))
        .unwrap_or_else(|| panic!("no status answer: {said:#?}"));
    for line in [
        "slack/snark (bot snark): stopped: invalid token",
        "slack/doc (bot doc): stopped: missing scope",
        "local/ops (bot ops): connected",
    ] {
        assert!(status.contains(line), "{line}:\n{status}");
    }
    assert!(
        status.contains("slack/caid (bot caid): retrying (attempt ")
            && status.contains("): unreachable"),
        "{status}"
    );
    gateway.stop().await;
}
