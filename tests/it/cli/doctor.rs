//! `baton doctor` against the fake Slack, Discord and Feishu and the fake model server: good
//! accounts, refused tokens, a missing scope, an unknown model, a platform that never answers,
//! a config that does not validate. It asks and changes nothing: no socket, no post, no file.

use super::*;

use crate::support::fake_discord::FakeDiscord;
use crate::support::fake_feishu::FakeFeishu;
use crate::support::fake_openai::FakeOpenAi;
use crate::support::fake_slack::FakeSlack;
use crate::support::fake_telegram::FakeTelegram;

/// The secrets the configs name, so the test can look for them in the output.
const SLACK_BOT: &str = "xoxb-snark";
const SLACK_APP: &str = "xapp-snark";
const DISCORD_TOKEN: &str = "discord-token-secret-77";
const FEISHU_SECRET: &str = "secret-snark";

struct Fakes {
    slack: FakeSlack,
    discord: FakeDiscord,
    feishu: FakeFeishu,
    model: FakeOpenAi,
}

async fn fakes() -> Fakes {
    let fakes = Fakes {
        slack: FakeSlack::start().await,
        discord: FakeDiscord::start().await,
        feishu: FakeFeishu::start().await,
        model: FakeOpenAi::start().await,
    };
    fakes.slack.app("snark", "U_SNARK");
    fakes.discord.bot(DISCORD_TOKEN, "900", "snark");
    fakes.feishu.app("snark", "ou_snark");
    fakes
}

/// One bot with an account on each platform and an openai backend; `slack_api` lets a test
/// point Slack somewhere else.
fn config(dir: &Path, fakes: &Fakes, slack_api: &str, model: &str) -> PathBuf {
    let path = dir.join("baton.toml");
    let text = format!(
        r#"[gateway]
database = "doctor.db"

[backends.openai]
base_url = "{model_url}"

[[bots]]
id = "snark"
backend = "openai"
model = "{model}"

[[accounts]]
bot = "snark"
platform = "slack"
app_token_env = "DOCTOR_SLACK_APP"
bot_token_env = "DOCTOR_SLACK_BOT"
api_url = "{slack_api}"

[[accounts]]
bot = "snark"
platform = "discord"
application_id = "900"
bot_token_env = "DOCTOR_DISCORD"
api_url = "{discord}"

[[accounts]]
bot = "snark"
platform = "feishu"
app_id = "cli_snark"
app_secret_env = "DOCTOR_FEISHU"
api_url = "{feishu}"
"#,
        model_url = fakes.model.base_url,
        discord = fakes.discord.api_url,
        feishu = fakes.feishu.api_url,
    );
    std::fs::write(&path, text).unwrap();
    path
}

async fn doctor(dir: &Path, config: &Path, secrets: [&str; 4], extra: &[&str]) -> Output {
    let mut cmd = baton(dir);
    cmd.arg("doctor")
        .args(extra)
        .arg("--config")
        .arg(config)
        .env("DOCTOR_SLACK_BOT", secrets[0])
        .env("DOCTOR_SLACK_APP", secrets[1])
        .env("DOCTOR_DISCORD", secrets[2])
        .env("DOCTOR_FEISHU", secrets[3]);
    output(cmd).await
}

const GOOD: [&str; 4] = [SLACK_BOT, SLACK_APP, DISCORD_TOKEN, FEISHU_SECRET];

/// The report's line for `subject`'s `check`.
fn line<'a>(text: &'a str, subject: &str, check: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(&format!(" {subject} ")) && l.contains(&format!(" {check}: ")))
        .unwrap_or_else(|| panic!("no `{subject}` `{check}` line in:\n{text}"))
}

fn no_secret(out: &Output) {
    let said = all_output(out);
    for secret in GOOD {
        assert!(!said.contains(secret), "{secret} printed:\n{said}");
    }
}

#[tokio::test]
async fn good_accounts_and_a_known_model_are_all_ok_and_nothing_is_opened_or_posted() {
    let fakes = fakes().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fakes, &fakes.slack.api_url, "fake-model");
    let out = doctor(dir.path(), &config, GOOD, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    for (subject, check) in [
        ("slack/snark", "login"),
        ("slack/snark", "scopes"),
        ("slack/snark", "socket"),
        ("discord/snark", "login"),
        ("discord/snark", "gateway"),
        ("feishu/snark", "login"),
        ("feishu/snark", "bot"),
        ("snark", "model"),
    ] {
        assert!(line(&text, subject, check).starts_with("ok "), "{text}");
    }
    assert!(
        line(&text, "discord/snark", "login").contains("snark (900)"),
        "{text}"
    );
    assert!(
        line(&text, "feishu/snark", "bot").contains("ou_snark"),
        "{text}"
    );
    no_secret(&out);
    assert_eq!(
        fakes.slack.connects("snark"),
        0,
        "no Socket Mode connection"
    );
    assert_eq!(fakes.discord.identifies("900"), 0, "no gateway session");
    assert_eq!(fakes.feishu.connects("snark"), 0, "no long connection");
    assert!(fakes.slack.all_posts().is_empty() && fakes.discord.all_posts().is_empty());
    assert!(fakes.model.requests().is_empty(), "no completion asked");
    assert!(
        !dir.path().join("doctor.db").exists(),
        "no database created"
    );
}

#[tokio::test]
async fn a_bad_token_on_each_platform_is_a_fail_saying_what_to_do() {
    let fakes = fakes().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fakes, &fakes.slack.api_url, "fake-model");
    let bad = ["xoxb-nobody", "xapp-nobody", "wrong-token", "wrong-secret"];
    let out = doctor(dir.path(), &config, bad, &[]).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let text = stdout(&out);
    let slack = line(&text, "slack/snark", "login");
    assert!(
        slack.starts_with("fail")
            && slack.contains("invalid_auth")
            && slack.contains("$DOCTOR_SLACK_BOT"),
        "{text}"
    );
    let discord = line(&text, "discord/snark", "login");
    assert!(
        discord.starts_with("fail") && discord.contains("401"),
        "{text}"
    );
    let feishu = line(&text, "feishu/snark", "login");
    assert!(
        feishu.starts_with("fail") && feishu.contains("app secret invalid"),
        "{text}"
    );
    assert!(line(&text, "snark", "model").starts_with("ok "), "{text}");
    let said = all_output(&out);
    for secret in bad {
        assert!(!said.contains(secret), "{secret} printed:\n{said}");
    }
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("checks failed"),
        "{}",
        show(&out)
    );
}

#[tokio::test]
async fn a_slack_token_missing_a_scope_and_an_unknown_model_fail() {
    let fakes = fakes().await;
    fakes.slack.withhold_scope("files:write");
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fakes, &fakes.slack.api_url, "gpt-nonexistent");
    let out = doctor(dir.path(), &config, GOOD, &[]).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let text = stdout(&out);
    let scopes = line(&text, "slack/snark", "scopes");
    assert!(
        scopes.starts_with("fail")
            && scopes.contains("missing files:write")
            && scopes.contains("reinstall"),
        "{text}"
    );
    assert!(
        line(&text, "slack/snark", "login").starts_with("ok "),
        "{text}"
    );
    let model = line(&text, "snark", "model");
    assert!(
        model.starts_with("fail")
            && model.contains("gpt-nonexistent")
            && model.contains("fake-model"),
        "{text}"
    );
    no_secret(&out);
}

#[tokio::test]
async fn a_platform_that_never_answers_fails_at_the_timeout_and_the_others_still_report() {
    let fakes = fakes().await;
    // Accepts connections (the kernel queues them) and never answers a byte.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_api = format!("http://{}/api", silent.local_addr().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fakes, &silent_api, "fake-model");
    let started = std::time::Instant::now();
    let out = doctor(dir.path(), &config, GOOD, &["--timeout-seconds", "1"]).await;
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let text = stdout(&out);
    let slack = line(&text, "slack/snark", "login");
    assert!(
        slack.starts_with("fail") && slack.contains("api_url"),
        "{text}"
    );
    assert!(
        line(&text, "discord/snark", "login").starts_with("ok "),
        "{text}"
    );
    assert!(
        line(&text, "feishu/snark", "bot").starts_with("ok "),
        "{text}"
    );
    assert!(line(&text, "snark", "model").starts_with("ok "), "{text}");
    drop(silent);
}

#[tokio::test]
async fn a_config_that_does_not_validate_gets_checks_problems_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.toml");
    std::fs::write(&path, "[gateway]\nlisen = \"x\"\n").unwrap();
    let mut cmd = baton(dir.path());
    cmd.arg("doctor").arg("--config").arg(&path);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let said = all_output(&out);
    assert!(
        said.contains("gateway.lisen") && said.contains("unknown key"),
        "{said}"
    );
}

#[tokio::test]
async fn a_discord_token_of_another_application_is_a_warning() {
    let fakes = fakes().await;
    fakes.discord.bot("other-app-token", "901", "someone-else");
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path(), &fakes, &fakes.slack.api_url, "fake-model");
    let secrets = [SLACK_BOT, SLACK_APP, "other-app-token", FEISHU_SECRET];
    let out = doctor(dir.path(), &config, secrets, &[]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "a warning is no failure: {}",
        show(&out)
    );
    let text = stdout(&out);
    let login = line(&text, "discord/snark", "login");
    assert!(
        login.starts_with("warn")
            && login.contains("901")
            && login.contains("application_id is 900"),
        "{text}"
    );
}

/// Telegram: a good token is the bot `getMe` names; a wrong one is a fail saying where to get
/// the right one, and never printed.
#[tokio::test]
async fn telegram_logs_in_with_get_me_and_a_wrong_token_is_a_fail() {
    let telegram = FakeTelegram::start().await;
    telegram.bot("snark", 4242, "snark_bot");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("baton.toml");
    std::fs::write(
        &config,
        format!(
            r#"[gateway]
database = "doctor.db"

[[bots]]
id = "snark"
backend = "echo"

[[accounts]]
bot = "snark"
platform = "telegram"
bot_token_env = "DOCTOR_TELEGRAM"
api_url = "{api}"
"#,
            api = telegram.api_url
        ),
    )
    .unwrap();
    let run = |token: &'static str| {
        let mut cmd = baton(dir.path());
        cmd.arg("doctor")
            .arg("--config")
            .arg(&config)
            .env("DOCTOR_TELEGRAM", token);
        output(cmd)
    };
    let out = run("tok-snark").await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    let login = line(&text, "telegram/snark", "login");
    assert!(
        login.starts_with("ok ") && login.contains("@snark_bot (4242)"),
        "{text}"
    );
    assert!(
        line(&text, "telegram/snark", "privacy").starts_with("ok "),
        "{text}"
    );
    assert!(!all_output(&out).contains("tok-snark"));
    let out = run("tok-nobody").await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let text = stdout(&out);
    let login = line(&text, "telegram/snark", "login");
    assert!(
        login.starts_with("fail") && login.contains("@BotFather"),
        "{text}"
    );
    assert!(!all_output(&out).contains("tok-nobody"));
    assert!(
        !dir.path().join("doctor.db").exists(),
        "no database created"
    );
}
