//! The real binary killed with SIGKILL while Telegram holds its post unanswered: Telegram takes
//! no idempotency key, so the post is on record as begun before it is made, and the next start
//! records it as cut off instead of posting it again.

use std::time::Duration;

use super::*;

use crate::support::process::{EXIT_DEADLINE, Running, baton, eventually};

#[tokio::test]
async fn a_kill_mid_post_never_posts_twice() {
    let model = FakeOpenAi::start().await;
    let telegram = FakeTelegram::start().await;
    telegram.bot("snark", SNARK.0, SNARK.1);
    model.script("snark", Step::reply("Exactly once."));
    model.script("snark", Step::reply("Exactly once."));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("baton.toml");
    let db = dir.path().join("baton.db");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n\n\
             [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n\n\
             [[bots]]\nid = \"snark\"\nbackend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"\n\n\
             [[accounts]]\nbot = \"snark\"\nplatform = \"telegram\"\n\
             bot_token_env = \"SNARK_TELEGRAM_BOT_TOKEN\"\napi_url = \"{}\"\n",
            model.base_url, telegram.api_url
        ),
    )
    .unwrap();
    let start = || {
        let mut cmd = baton(dir.path());
        cmd.arg("run")
            .arg("--config")
            .arg(&config)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--database")
            .arg(&db)
            .env("SNARK_TELEGRAM_BOT_TOKEN", "tok-snark");
        Running::spawn(cmd)
    };
    let http = reqwest::Client::new();
    let failures = |base: String| {
        let http = http.clone();
        async move {
            let sessions: Value = http
                .get(format!("{base}/api/sessions"))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            let key = sessions[0]["key"].as_str()?.to_owned();
            let transcript: Vec<Value> = http
                .get(format!("{base}/api/transcript"))
                .query(&[("session", key)])
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            let failures: Vec<Value> = transcript
                .into_iter()
                .filter(|e| e["kind"] == "failure")
                .collect();
            (!failures.is_empty()).then_some(failures)
        }
    };

    telegram.hold_posts();
    let (mut first, out) = start();
    let _base = first.base_url(out).await;
    telegram.wait_for(|t| t.polls("snark") > 0).await;
    telegram.say(
        GROUP,
        HUMAN,
        "@snark_bot once please",
        Value::Array(vec![mention(0, SNARK.1)]),
        None,
        None,
    );
    // Killed while Telegram has the post and has not answered it.
    telegram.wait_for(|t| t.all_posts().len() == 1).await;
    first.kill();
    first.wait(EXIT_DEADLINE).await;
    telegram.release_posts();

    let (mut second, out) = start();
    let base = second.base_url(out).await;
    let failures = eventually(
        Duration::from_secs(30),
        "the cut-off post on record",
        || failures(base.clone()),
    )
    .await;
    assert!(
        failures[0].to_string().contains("cut off mid-post"),
        "{failures:?}"
    );
    assert_eq!(
        telegram.all_posts().len(),
        1,
        "posted twice: {:?}",
        telegram.all_posts()
    );
    second.terminate();
    second.wait(EXIT_DEADLINE).await;
}
