//! `baton setup`: the Slack manifest, the Discord install URL and Feishu's scopes for one bot's
//! account, read from the config; the manifest alone on stdout; what a wrong bot or platform
//! gets.

use super::*;

/// Two bots: `snark` on Slack (socket mode), Discord, Feishu and Telegram (webhook mode); `caid`
/// on Slack (events mode).
fn setup_config(dir: &Path) -> PathBuf {
    let path = dir.join("baton.toml");
    std::fs::write(
        &path,
        r#"[gateway]
public_url = "https://baton.example.com/"

[[bots]]
id = "snark"
name = "Snark"
description = "Wry router"
backend = "echo"

[[bots]]
id = "caid"
backend = "echo"
feedback = { typing = false }

[[accounts]]
bot = "snark"
platform = "slack"
app_token_env = "SETUP_TEST_APP"
bot_token_env = "SETUP_TEST_BOT"

[[accounts]]
bot = "snark"
platform = "discord"
application_id = "1234567890"
bot_token_env = "SETUP_TEST_BOT"

[[accounts]]
bot = "snark"
platform = "feishu"
app_id = "cli_snark"
app_secret_env = "SETUP_TEST_BOT"

[[accounts]]
bot = "snark"
platform = "telegram"
mode = "webhook"
bot_token_env = "SETUP_TEST_BOT"
secret_token_env = "SETUP_TEST_APP"

[[accounts]]
bot = "caid"
id = "caid-events"
platform = "slack"
mode = "events"
bot_token_env = "SETUP_TEST_BOT"
signing_secret_env = "SETUP_TEST_APP"
"#,
    )
    .unwrap();
    path
}

async fn setup(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = baton(dir);
    cmd.arg("setup")
        .args(args)
        .arg("--config")
        .arg(setup_config(dir))
        .env("SETUP_TEST_APP", "xapp-never-printed")
        .env("SETUP_TEST_BOT", "xoxb-never-printed");
    output(cmd).await
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_slack_manifest_in_json_holds_the_scopes_events_and_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = setup(dir.path(), &["slack", "snark", "--format", "json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let manifest: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is the manifest alone ({e}):\n{}", show(&out)));
    assert_eq!(manifest["display_information"]["name"], "Snark");
    assert_eq!(manifest["display_information"]["description"], "Wry router");
    let scopes = strings(&manifest["oauth_config"]["scopes"]["bot"]);
    for scope in [
        "app_mentions:read",
        "channels:history",
        "groups:history",
        "im:history",
        "mpim:history",
        "chat:write",
        "files:read",
        "files:write",
        "commands",
        "assistant:write",
    ] {
        assert!(scopes.contains(&scope), "{scope} missing: {scopes:?}");
    }
    let events = strings(&manifest["settings"]["event_subscriptions"]["bot_events"]);
    for event in [
        "app_mention",
        "message.channels",
        "message.groups",
        "message.im",
        "message.mpim",
    ] {
        assert!(events.contains(&event), "{event} missing: {events:?}");
    }
    assert_eq!(
        manifest["features"]["slash_commands"][0]["command"],
        "/baton"
    );
    assert_eq!(manifest["settings"]["socket_mode_enabled"], true);
    assert!(manifest["settings"]["event_subscriptions"]["request_url"].is_null());
    let guidance = String::from_utf8_lossy(&out.stderr);
    assert!(guidance.contains("connections:write"), "{guidance}");
    assert!(
        !all_output(&out).contains("never-printed"),
        "{}",
        show(&out)
    );
}

#[tokio::test]
async fn in_events_mode_the_request_urls_are_under_public_url() {
    let dir = tempfile::tempdir().unwrap();
    let out = setup(dir.path(), &["slack", "caid", "--format", "json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
    let hook = "https://baton.example.com/hooks/slack/caid-events";
    assert_eq!(manifest["settings"]["socket_mode_enabled"], false);
    assert_eq!(
        manifest["settings"]["event_subscriptions"]["request_url"],
        hook
    );
    assert_eq!(manifest["settings"]["interactivity"]["request_url"], hook);
    assert_eq!(manifest["features"]["slash_commands"][0]["url"], hook);
    // caid shows no typing status, so it does not ask for the scope that sets one.
    let scopes = strings(&manifest["oauth_config"]["scopes"]["bot"]);
    assert!(!scopes.contains(&"assistant:write"), "{scopes:?}");
    assert!(scopes.contains(&"im:history"), "{scopes:?}");
}

#[tokio::test]
async fn the_slack_manifest_is_yaml_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = setup(dir.path(), &["slack", "snark"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    assert!(text.contains("  socket_mode_enabled: true\n"), "{text}");
    assert!(text.contains("      - \"message.mpim\"\n"), "{text}");
}

#[tokio::test]
async fn the_discord_install_url_asks_for_what_baton_uses_and_never_administrator() {
    let dir = tempfile::tempdir().unwrap();
    let out = setup(dir.path(), &["discord", "snark"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let url = stdout(&out).trim().to_owned();
    let query = url
        .strip_prefix("https://discord.com/oauth2/authorize?")
        .unwrap_or_else(|| panic!("not an install URL: {url}"));
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} missing from {url}"))
    };
    assert_eq!(param("client_id"), "1234567890");
    assert_eq!(param("scope"), "bot+applications.commands");
    let permissions: u64 = param("permissions").parse().unwrap();
    let needed = [
        ("view channels", 1 << 10),
        ("send messages", 1 << 11),
        ("send in threads", 1 << 38),
        ("read history", 1 << 16),
        ("attach files", 1 << 15),
        ("add reactions", 1 << 6),
    ];
    for (name, bit) in needed {
        assert_ne!(permissions & bit, 0, "{name} missing from {permissions}");
    }
    assert_eq!(permissions & (1 << 3), 0, "never Administrator");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Message Content"),
        "{}",
        show(&out)
    );
    let out = setup(dir.path(), &["discord", "snark", "--format", "json"]).await;
    let parts: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(parts["install_url"], url.as_str());
    assert_eq!(strings(&parts["privileged_intents"]), ["MESSAGE_CONTENT"]);
}

#[tokio::test]
async fn feishu_gets_its_scopes_as_the_bulk_import_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = setup(dir.path(), &["feishu", "snark"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let import: Value = serde_json::from_slice(&out.stdout).unwrap();
    let scopes = strings(&import["scopes"]["tenant"]);
    assert!(
        scopes.contains(&"im:message.group_at_msg:readonly"),
        "{scopes:?}"
    );
    assert!(scopes.contains(&"im:message:send_as_bot"), "{scopes:?}");
    assert!(
        scopes.contains(&"cardkit:card:write") && scopes.contains(&"cardkit:card:read"),
        "the streaming card's scopes: {scopes:?}"
    );
    let guidance = String::from_utf8_lossy(&out.stderr);
    assert!(guidance.contains("im.message.receive_v1"), "{guidance}");
    assert!(
        guidance.contains("persistent"),
        "long connection: {guidance}"
    );
}

#[tokio::test]
async fn telegram_gets_its_botfather_settings_the_command_menu_and_the_webhook_url() {
    let dir = tempfile::tempdir().unwrap();
    let out = setup(dir.path(), &["telegram", "snark"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let settings: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(settings["group_privacy"], "disabled", "{settings}");
    assert_eq!(settings["bot_to_bot"], "enabled", "{settings}");
    assert_eq!(settings["commands"][0]["command"], "baton", "{settings}");
    assert_eq!(
        settings["webhook_url"], "https://baton.example.com/hooks/telegram/snark",
        "{settings}"
    );
    let guidance = String::from_utf8_lossy(&out.stderr);
    assert!(
        guidance.contains("@BotFather") && guidance.contains("/setprivacy"),
        "{guidance}"
    );
}

#[tokio::test]
async fn a_wrong_bot_or_platform_names_what_there_is() {
    let dir = tempfile::tempdir().unwrap();
    let out = setup(dir.path(), &["slack", "snrak"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let said = all_output(&out);
    assert!(
        said.contains("no bot `snrak`") && said.contains("snark, caid"),
        "{said}"
    );
    let out = setup(dir.path(), &["discord", "caid"]).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let said = all_output(&out);
    assert!(
        said.contains("bot `caid` has no discord account") && said.contains("slack/caid-events"),
        "{said}"
    );
}
