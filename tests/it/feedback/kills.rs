//! The real binary killed mid-turn: at the next start nothing is posted twice and no typing
//! reaction is left behind.

use super::*;

/// The real binary, killed with SIGKILL while a reply streams into Slack: at the next start
/// the unfinished turn runs again and finishes the reply in the post it had made, never
/// posting it a second time; the transcript holds the post once, with its final text.
#[tokio::test]
async fn a_kill_mid_stream_never_posts_the_reply_twice() {
    killed_mid_stream(FEEDBACK).await;
}

/// The same with `stream = "native"`: the replay ends the stream the killed attempt started
/// (with the whole reply), and posts nothing a second time.
#[tokio::test]
async fn a_kill_mid_native_stream_never_posts_the_reply_twice() {
    killed_mid_stream(NATIVE).await;
}

async fn killed_mid_stream(feedback: &str) {
    use crate::support::fake_slack::{signed_headers, unix_now};
    use crate::support::process::{EXIT_DEADLINE, Running, baton, eventually};

    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    slack.app("snark", SLACK_BOT);
    // One reply for the killed attempt, one for the replay.
    model.script("snark", Step::slow(REPLY, 8, Duration::from_millis(60)));
    model.script("snark", Step::slow(REPLY, 8, Duration::from_millis(60)));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("baton.toml");
    let db = dir.path().join("baton.db");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n\n\
             [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n{feedback}\n\
             [[bots]]\nid = \"snark\"\nbackend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"\n\n\
             [[accounts]]\nbot = \"snark\"\nplatform = \"slack\"\nmode = \"events\"\n\
             bot_token_env = \"SNARK_SLACK_BOT_TOKEN\"\nsigning_secret_env = \"SNARK_SLACK_SIGNING_SECRET\"\n\
             api_url = \"{}\"\n",
            model.base_url, slack.api_url
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
            .env("SNARK_SLACK_BOT_TOKEN", "xoxb-snark")
            .env("SNARK_SLACK_SIGNING_SECRET", SECRET);
        Running::spawn(cmd)
    };
    let http = reqwest::Client::new();
    let reply_entries = |base: String| reply_entries(http.clone(), base);

    let ready = |base: String| {
        let http = http.clone();
        async move {
            let status = http
                .get(format!("{base}/readyz"))
                .send()
                .await
                .ok()?
                .status();
            (status == 200).then_some(())
        }
    };
    let (mut first, out) = start();
    let base = first.base_url(out).await;
    eventually(DEADLINE, "the gateway ready", || ready(base.clone())).await;
    let event = serde_json::json!({ "user": "U_HUMAN", "text": format!("<@{SLACK_BOT}> why?"),
        "ts": "1700000000.000001", "channel": "C1", "event_ts": "1700000000.000001",
        "channel_type": "channel" });
    let body = event_body("A_snark", "Ev1", "app_mention", event).to_string();
    let mut request = http
        .post(format!("{base}/hooks/slack/snark"))
        .header("content-type", "application/json")
        .body(body.clone());
    for (k, v) in signed_headers(SECRET, unix_now(), &body) {
        request = request.header(k, v);
    }
    assert_eq!(request.send().await.unwrap().status(), 200);
    // Killed once the first streamed post is made and on record, long before the reply is done.
    eventually(DEADLINE, "the first streamed post on record", || {
        let entries = reply_entries(base.clone());
        async move { entries.await.filter(|e| !e.is_empty()) }
    })
    .await;
    first.kill();
    first.wait(EXIT_DEADLINE).await;
    assert_eq!(slack.seen().posts(), 1);
    assert_ne!(
        slack.seen().shown(),
        [REPLY],
        "killed too late to test anything"
    );

    let (mut second, out) = start();
    let base = second.base_url(out).await;
    slack.wait_for(|s| s.seen().shown() == [REPLY]).await;
    assert_eq!(
        slack.seen().posts(),
        1,
        "posted twice: {:?}",
        slack.seen().all()
    );
    let entries = eventually(DEADLINE, "the reply's final text on record", || {
        let entries = reply_entries(base.clone());
        async move {
            entries
                .await
                .filter(|e| e.len() == 1 && e[0]["text"] == REPLY)
        }
    })
    .await;
    assert!(entries[0]["platform_message_id"].as_str().is_some());
    second.terminate();
    second.wait(EXIT_DEADLINE).await;
}

/// The reply entries of the one session of the gateway at `base`, once it answers.
async fn reply_entries(http: reqwest::Client, base: String) -> Option<Vec<Value>> {
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
    Some(
        transcript
            .into_iter()
            .filter(|e| e["kind"] == "reply")
            .collect(),
    )
}

/// The real binary, killed with SIGKILL while a reply streams into a Feishu streaming card: the
/// next start finds the card from its message (`id_convert`), ends it with the whole reply, and
/// posts nothing a second time.
#[tokio::test]
async fn a_kill_mid_card_stream_ends_that_card_and_posts_nothing_twice() {
    use crate::support::process::{EXIT_DEADLINE, Running, baton, eventually};

    let model = FakeOpenAi::start().await;
    let feishu = FakeFeishu::start().await;
    feishu.app("snark", FEISHU_BOT);
    // One reply for the killed attempt, one for the replay.
    model.script("snark", Step::slow(REPLY, 8, Duration::from_millis(60)));
    model.script("snark", Step::slow(REPLY, 8, Duration::from_millis(60)));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("baton.toml");
    let db = dir.path().join("baton.db");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n\n\
             [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n{NATIVE}\n\
             [[bots]]\nid = \"snark\"\nbackend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"\n\n\
             [[accounts]]\nbot = \"snark\"\nplatform = \"feishu\"\nmode = \"websocket\"\n\
             app_id = \"cli_snark\"\napp_secret_env = \"SNARK_FEISHU_APP_SECRET\"\napi_url = \"{}\"\n",
            model.base_url, feishu.api_url
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
            .env("SNARK_FEISHU_APP_SECRET", "secret-snark");
        Running::spawn(cmd)
    };
    let http = reqwest::Client::new();

    let (mut first, out) = start();
    let base = first.base_url(out).await;
    feishu.wait_connected("snark", 1).await;
    let event = message_event(
        "snark",
        "ev_1",
        "om_human_1",
        ("oc_group", "group"),
        "ou_human",
        "@_user_1 why did the build break?",
        &[(FEISHU_BOT, "snark")],
    );
    feishu.push_event("snark", &event);
    // Killed once the card is posted and on record, long before the reply is done.
    eventually(DEADLINE, "the card's post on record", || {
        let entries = reply_entries(http.clone(), base.clone());
        async move { entries.await.filter(|e| !e.is_empty()) }
    })
    .await;
    first.kill();
    first.wait(EXIT_DEADLINE).await;
    assert_eq!(feishu.seen().posts(), 1);
    assert_eq!(
        feishu.streaming_cards(),
        1,
        "the killed attempt left its card streaming"
    );
    assert_ne!(
        feishu.seen().shown(),
        [REPLY],
        "killed too late to test anything"
    );

    let (mut second, out) = start();
    let base = second.base_url(out).await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !(feishu.seen().shown() == [REPLY] && feishu.streaming_cards() == 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "saw {:?}; the gateway said:\n{}",
            feishu.seen().all(),
            second.logs()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(feishu.seen().posts(), 1, "{:?}", feishu.seen().all());
    let entries = eventually(DEADLINE, "the reply's final text on record", || {
        let entries = reply_entries(http.clone(), base.clone());
        async move {
            entries
                .await
                .filter(|e| e.len() == 1 && e[0]["text"] == REPLY)
        }
    })
    .await;
    assert!(entries[0]["platform_message_id"].as_str().is_some());
    second.terminate();
    second.wait(EXIT_DEADLINE).await;
}

/// The real binary, killed with SIGKILL while a Feishu turn shows its typing reaction: the
/// reaction would stay on the message for good, so the next start takes it away (and the turn
/// run again takes its own reaction away too).
#[tokio::test]
async fn a_typing_reaction_left_by_a_kill_is_taken_away_at_the_next_start() {
    use crate::support::process::{EXIT_DEADLINE, Running, baton};

    let model = FakeOpenAi::start().await;
    let feishu = FakeFeishu::start().await;
    feishu.app("snark", FEISHU_BOT);
    // The killed attempt writes for about 6 s; the run after the restart answers at once.
    model.script("snark", Step::slow(REPLY, 4, Duration::from_millis(100)));
    model.script("snark", Step::reply("Here it is."));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("baton.toml");
    let db = dir.path().join("baton.db");
    std::fs::write(
        &config,
        format!(
            "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n\n\
             [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n\n\
             {FEEDBACK}\n\
             [[bots]]\nid = \"snark\"\nbackend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"\n\n\
             [[accounts]]\nbot = \"snark\"\nplatform = \"feishu\"\nmode = \"websocket\"\n\
             app_id = \"cli_snark\"\napp_secret_env = \"SNARK_FEISHU_APP_SECRET\"\napi_url = \"{}\"\n",
            model.base_url, feishu.api_url
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
            .env("SNARK_FEISHU_APP_SECRET", "secret-snark");
        Running::spawn(cmd)
    };

    let (mut first, out) = start();
    let _base = first.base_url(out).await;
    feishu.wait_connected("snark", 1).await;
    let event = message_event(
        "snark",
        "ev_1",
        "om_human_1",
        ("oc_group", "group"),
        "ou_human",
        "@_user_1 why did the build break?",
        &[(FEISHU_BOT, "snark")],
    );
    feishu.push_event("snark", &event);
    // Killed once the reply has begun to stream: the reaction went up (and its id was put on
    // record) when the turn began, well before the first post.
    feishu.wait_for(|f| f.seen().posts() == 1).await;
    first.kill();
    first.wait(EXIT_DEADLINE).await;
    assert_eq!(feishu.reactions_left(), 1, "{:?}", feishu.seen().all());

    let (mut second, out) = start();
    let _base = second.base_url(out).await;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    // The reaction left up is taken away, and the turn run again shows and ends its own.
    while !(feishu.seen().typing() == (2, 2) && feishu.reactions_left() == 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} reactions left, saw {:?}; the gateway said:\n{}",
            feishu.reactions_left(),
            feishu.seen().all(),
            second.logs()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(feishu.seen().posts(), 1, "{:?}", feishu.seen().all());
    second.terminate();
    second.wait(EXIT_DEADLINE).await;
}
