//! Files to chats end to end: a bot attaches artifacts to its reply (`reply_attach`, or an
//! agent backend's `attachments`) and a real gateway uploads them to fake Slack, Discord and
//! Feishu on 127.0.0.1 (and shows them on the local channel), each once, in the reply's thread,
//! even when the first upload is answered 429 and when the run is replayed after a restart.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_discord::FakeDiscord;
use crate::support::fake_feishu::{FakeFeishu, message_event};
use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::fake_slack::{FakeSlack, event_body, events_envelope};
use crate::support::gateway::{DEADLINE, TestGateway, config_text, config_with, temp_db};
use crate::support::uploads::Upload;

const CSV: &str = "name,price\nacme,10\n";
/// A 1x1 PNG.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const TOOLS: &str = "tools = [\"artifact_put\", \"reply_attach\"]";

/// The id in the newest `artifact_put` result the request carries.
fn put_id(request: &Value) -> Value {
    let lines = request["messages"].as_array().unwrap();
    let result = lines.iter().rev().find(|l| l["role"] == "tool").unwrap();
    let parsed: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    parsed["id"].clone()
}

/// The turn of `bot`: keep `put` as an artifact, attach it, then answer `text`.
fn script_attach(model: &FakeOpenAi, bot: &str, put: Value, text: &str) {
    model.script(bot, Step::tool_call("artifact_put", put));
    model.script(
        bot,
        Step::tool_call_with("reply_attach", |request| json!({"ids": [put_id(request)]})),
    );
    model.script(bot, Step::reply(text));
}

/// Wait, up to the deadline, until `uploads()` holds `n` files.
async fn wait_uploads(what: &str, n: usize, uploads: impl Fn() -> Vec<Upload>) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while uploads().len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: {} of {n} uploads",
            uploads().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---- Slack ---------------------------------------------------------------------------------------

#[tokio::test]
async fn slack_gets_the_attached_file_once_in_the_thread_after_a_429() {
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    slack.app("snark", "U_SNARK");
    let config = format!(
        "[gateway]\ndrain_seconds = 1\n\n[chats_default]\ngroup_policy = \"open\"\n\n\
         [[bots]]\nid = \"snark\"\nbackend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"\n{TOOLS}\n\n\
         [[accounts]]\nbot = \"snark\"\nplatform = \"slack\"\nmode = \"socket\"\n\
         app_token_env = \"APP\"\nbot_token_env = \"BOT\"\nsigning_secret_env = \"SIGN\"\napi_url = \"{}\"\n",
        model.base_url, slack.api_url
    );
    let env = |name: &str| match name {
        "APP" => Some("xapp-snark".to_owned()),
        "BOT" => Some("xoxb-snark".to_owned()),
        "SIGN" => Some("secret".to_owned()),
        _ => None,
    };
    let (_dir, db) = temp_db();
    let gw = TestGateway::start_with_env(&config, Path::new(&db), &env).await;
    slack.wait_connected("snark", 1).await;
    script_attach(
        &model,
        "snark",
        json!({"name": "report.csv", "text": CSV}),
        "here is the report",
    );
    slack.rate_limit_uploads(1);

    let ts = "1700000000.000100";
    let said = json!({ "user": "U_HUMAN", "text": "<@U_SNARK> the report please", "ts": ts,
                       "channel": "C1", "event_ts": ts, "channel_type": "channel" });
    slack.push(
        "snark",
        &events_envelope("env-1", 0, event_body("A1", "Ev1", "app_mention", said)),
    );
    wait_uploads("slack", 1, || slack.uploads()).await;
    gw.settle().await;

    let uploads = slack.uploads();
    assert_eq!(
        uploads,
        [Upload {
            channel: "C1".into(),
            thread: Some(ts.into()),
            name: "report.csv".into(),
            bytes: CSV.as_bytes().to_vec(),
            kind: "file".into(),
        }],
        "one file, in the message's thread"
    );
    assert_eq!(slack.upload_calls(), 2, "the 429 was retried once");
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].text, "here is the report");
    assert_eq!(posts[0].thread_ts.as_deref(), Some(ts));
    gw.stop().await;
}

// ---- Discord -------------------------------------------------------------------------------------

const SNARK_ID: &str = "100000000000000001";
const CHANNEL: &str = "300000000000000001";

#[tokio::test]
async fn discord_gets_the_attached_file_once_as_a_reply_after_a_429() {
    let model = FakeOpenAi::start().await;
    let discord = FakeDiscord::start().await;
    discord.bot("token-snark", SNARK_ID, "snark");
    let config = format!(
        "[gateway]\ndrain_seconds = 1\n\n[chats_default]\ngroup_policy = \"open\"\n\n\
         [[bots]]\nid = \"snark\"\nbackend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"\n{TOOLS}\n\n\
         [[accounts]]\nbot = \"snark\"\nplatform = \"discord\"\nbot_token_env = \"TOKEN\"\n\
         application_id = \"{SNARK_ID}\"\napi_url = \"{}\"\n",
        model.base_url, discord.api_url
    );
    let env = |name: &str| (name == "TOKEN").then(|| "token-snark".to_owned());
    let (_dir, db) = temp_db();
    let gw = TestGateway::start_with_env(&config, Path::new(&db), &env).await;
    discord
        .wait_for("snark identified", |d| d.connected(SNARK_ID))
        .await;
    script_attach(
        &model,
        "snark",
        json!({"name": "chart.png", "base64": PNG_BASE64}),
        "the chart",
    );
    discord.rate_limit_uploads(1);

    discord.say(
        ("200000000000000001", "mason"),
        CHANNEL,
        &format!("<@{SNARK_ID}> draw it"),
        None,
    );
    wait_uploads("discord", 1, || discord.uploads()).await;
    gw.settle().await;

    let uploads = discord.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:?}");
    assert_eq!(uploads[0].channel, CHANNEL);
    assert_eq!(uploads[0].name, "chart.png");
    assert_eq!(uploads[0].bytes[..4], [0x89, b'P', b'N', b'G']);
    assert_eq!(discord.upload_calls(), 2, "the 429 was retried once");
    let posts = discord.posts();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].text(), "the chart");
    gw.stop().await;
}

// ---- Feishu --------------------------------------------------------------------------------------

#[tokio::test]
async fn feishu_gets_an_image_message_once_in_reply_after_a_429() {
    let model = FakeOpenAi::start().await;
    let feishu = FakeFeishu::start().await;
    feishu.app("snark", "ou_snark_self");
    let config = format!(
        "[gateway]\ndrain_seconds = 1\n\n[chats_default]\ngroup_policy = \"open\"\n\n\
         [[bots]]\nid = \"snark\"\nbackend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"\n{TOOLS}\n\n\
         [[accounts]]\nbot = \"snark\"\nplatform = \"feishu\"\nmode = \"websocket\"\n\
         app_id = \"cli_snark\"\napp_secret_env = \"SECRET\"\napi_url = \"{}\"\n",
        model.base_url, feishu.api_url
    );
    let env = |name: &str| (name == "SECRET").then(|| "secret-snark".to_owned());
    let (_dir, db) = temp_db();
    let gw = TestGateway::start_with_env(&config, Path::new(&db), &env).await;
    feishu.wait_connected("snark", 1).await;
    script_attach(
        &model,
        "snark",
        json!({"name": "chart.png", "base64": PNG_BASE64}),
        "the chart",
    );
    feishu.rate_limit_uploads(1);

    let event = message_event(
        "snark",
        "ev-1",
        "om_question",
        ("oc_group", "group"),
        "ou_human",
        "@_user_1 draw it",
        &[("ou_snark_self", "snark")],
    );
    feishu.push_event("snark", &event);
    wait_uploads("feishu", 1, || feishu.uploads()).await;
    gw.settle().await;

    let uploads = feishu.uploads();
    assert_eq!(uploads.len(), 1, "{uploads:?}");
    assert_eq!(uploads[0].kind, "image", "an image is sent as one");
    assert_eq!(uploads[0].thread.as_deref(), Some("om_question"));
    assert_eq!(uploads[0].channel, "oc_group");
    assert_eq!(uploads[0].name, "chart.png");
    assert_eq!(uploads[0].bytes[..4], [0x89, b'P', b'N', b'G']);
    assert_eq!(feishu.upload_calls(), 2, "the 429 was retried once");
    let texts: Vec<String> = feishu.posts().into_iter().map(|p| p.text).collect();
    assert!(texts.contains(&"the chart".to_owned()), "{texts:?}");
    gw.stop().await;
}

// ---- The local channel, tool errors, replays, agent backends -------------------------------------

const OPS: &str = "bot:snark:local:snark:ops";

#[tokio::test]
async fn an_unknown_artifact_id_is_a_tool_error_naming_it_and_attaches_nothing() {
    let model = FakeOpenAi::start().await;
    let missing = "art-000000000000000000000000";
    model.script(
        "snark",
        Step::tool_call("reply_attach", json!({"ids": [missing]})),
    );
    model.script("snark", Step::reply("no file after all"));
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_with(&model.base_url, &[("snark", TOOLS)], ""), &db).await;
    gw.say("ops", "alice", "@snark attach it").await;
    gw.settle().await;

    let results = model.tool_results("snark");
    assert_eq!(results[0]["status"], "error", "{results:?}");
    let error = results[0]["error"].as_str().unwrap();
    assert!(error.contains(missing), "{error}");
    let said: Vec<Value> = gw.said_by("ops", "snark").await;
    let texts: Vec<&str> = said.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["no file after all"], "no file line");
    gw.stop().await;
}

#[tokio::test]
async fn the_local_channel_names_the_file_and_its_url_and_an_empty_reply_posts_the_file_alone() {
    let model = FakeOpenAi::start().await;
    script_attach(
        &model,
        "snark",
        json!({"name": "report.csv", "text": CSV}),
        "",
    );
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_with(&model.base_url, &[("snark", TOOLS)], ""), &db).await;
    gw.say("ops", "alice", "@snark the report").await;
    gw.settle().await;

    let said = gw.said_by("ops", "snark").await;
    assert_eq!(said.len(), 1, "the file alone: {said:?}");
    let line = said[0]["text"].as_str().unwrap();
    let url = line.split(": ").last().unwrap();
    assert!(line.starts_with("[file] report.csv (text/csv"), "{line}");
    assert!(
        url.starts_with("/api/artifacts/art-") && url.ends_with("/content"),
        "{line}"
    );
    let content = gw
        .http
        .get(format!("{}{url}", gw.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(content, CSV);
    // The transcript records the attachment: a reply entry naming the artifact.
    let transcript = gw.transcript(OPS).await;
    let file = transcript
        .iter()
        .find(|e| e["kind"] == "reply")
        .expect("the file's entry");
    assert!(
        url.contains(file["meta"]["artifact"]["id"].as_str().unwrap()),
        "{file}"
    );
    gw.stop().await;
}

/// A store in which the local account `snark` accepted "@snark the report" in room `ops` and
/// never finished it, as after a kill, after its run had posted its text and uploaded its file
/// (`report.csv`, made and attached in that run).
async fn store_after_a_kill_after_the_upload(db: &Path) {
    use baton::store::{Attached, EntryKind, NewArtifact, NewEntry, Origin, Put, Store};
    let event = crate::support::left_over::mention_of_snark("@snark the report");
    let store = Store::open(db.to_str().unwrap()).await.unwrap();
    // Filed as JSON, as a gateway before schema 22 filed it: such a row is still run after an
    // upgrade (`tests/it/faults.rs` files one as a gateway files it now).
    let json = serde_json::to_string(&event).unwrap();
    let filed = store
        .accept("local:snark", "msg:m-left", json.into_bytes(), 1)
        .await
        .unwrap()
        .expect("a fresh event");
    store.inbox_attempt(filed).await.unwrap();
    let run = "in:local:snark:m-left";
    // What the first run made, exactly as its `artifact_put` did.
    let made = NewArtifact {
        name: "report.csv".into(),
        media_type: "text/csv".into(),
        content: CSV.as_bytes().to_vec(),
        bot: "snark".parse().unwrap(),
        session: OPS.parse().unwrap(),
        run_id: Some(run.into()),
        inputs: Vec::new(),
        created_ms: 2,
    };
    let Put::Stored(artifact) = store.artifact_put(made).await.unwrap() else {
        panic!("stored");
    };
    let attached = store
        .reply_attach(run, vec![artifact.id.clone()], 3)
        .await
        .unwrap();
    assert!(matches!(attached, Attached::Done(_)));
    for (n, (key, text)) in [
        (format!("{run}#0"), "here it is".to_owned()),
        (
            format!("{run}#file:{}", artifact.id),
            "[attached]".to_owned(),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        store.send_begin(&key, 4).await.unwrap();
        let posted = NewEntry {
            session: OPS.parse().unwrap(),
            ts_ms: 5,
            kind: EntryKind::Reply,
            speaker: "snark".into(),
            origin: Origin::Bot,
            text,
            platform_message_id: Some(format!("m-posted-{n}")),
            run_id: Some(run.into()),
            idempotency_key: Some(key),
            meta: Value::Null,
        };
        store.append(posted).await.unwrap();
    }
    store.close().await.unwrap();
}

#[tokio::test]
async fn a_run_replayed_after_a_restart_does_not_post_its_file_again() {
    let model = FakeOpenAi::start().await;
    // The replayed turn does what the first did: the same put, the same attach, the same text.
    script_attach(
        &model,
        "snark",
        json!({"name": "report.csv", "text": CSV}),
        "here it is",
    );
    let (_dir, db) = temp_db();
    store_after_a_kill_after_the_upload(&db).await;

    let gw = TestGateway::start(&config_with(&model.base_url, &[("snark", TOOLS)], ""), &db).await;
    crate::support::process::eventually(DEADLINE, "the replayed run", || async {
        let left = gw.gateway.store().inbox_left("local:snark").await.unwrap();
        (left.is_empty() && model.requests_for("snark").len() == 3).then_some(())
    })
    .await;
    gw.settle().await;

    let results = model.tool_results("snark");
    assert_eq!(results[1]["status"], "ok", "attached again: {results:?}");
    let said = gw.said_by("ops", "snark").await;
    assert!(said.is_empty(), "posted again after the restart: {said:?}");
    let transcript = gw.transcript(OPS).await;
    let files = transcript
        .iter()
        .filter(|e| {
            e["idempotency_key"]
                .as_str()
                .is_some_and(|k| k.contains("#file:"))
        })
        .count();
    assert_eq!(files, 1, "{transcript:#?}");
    gw.stop().await;
}

#[tokio::test]
async fn a_command_backends_attachments_are_kept_and_posted_and_a_bad_one_fails_the_turn() {
    let reply = json!({"reply": "notes attached", "attachments": [
        {"name": "notes.txt", "text": "hello"}]});
    let bad = json!({"reply": "never shown", "attachments": ["art-000000000000000000000000"]});
    let script =
        format!("case \"$(cat)\" in *'bad one'*) echo '{bad}' ;; *) echo '{reply}' ;; esac");
    let config = format!(
        "{}\n[[bots]]\nid = \"agent\"\nbackend = \"command\"\ncommand = [\"sh\", \"-c\", {}]\n",
        config_text("http://127.0.0.1:9", &[], ""),
        serde_json::to_string(&script).unwrap()
    );
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config, &db).await;
    gw.say("ops", "alice", "@agent the notes").await;
    gw.settle().await;

    let said = gw.said_by("ops", "agent").await;
    let texts: Vec<&str> = said.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert_eq!(texts[0], "notes attached");
    assert!(
        texts[1].starts_with("[file] notes.txt (text/plain, 5 bytes)"),
        "{texts:?}"
    );
    let listed = gw.get("/api/artifacts").await;
    assert!(
        listed.to_string().contains("notes.txt"),
        "kept as an artifact: {listed}"
    );

    gw.say("ops", "alice", "@agent the bad one").await;
    gw.settle().await;
    let said = gw.said_by("ops", "agent").await;
    let last = said.last().unwrap()["text"].as_str().unwrap().to_owned();
    assert_ne!(last, "never shown", "{said:?}");
    let transcript = gw.transcript("bot:agent:local:agent:ops").await;
    let failure = transcript
        .iter()
        .find(|e| e["kind"] == "failure")
        .expect("the refused attachment is recorded");
    assert!(
        failure["text"]
            .as_str()
            .unwrap()
            .contains("art-000000000000000000000000"),
        "{failure}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn an_http_backends_attachment_by_id_posts_the_file_alone() {
    let (_dir, db) = temp_db();
    // An artifact another bot made earlier; the agent attaches it by id, with no text.
    let id = {
        use baton::store::{NewArtifact, Put, Store};
        let store = Store::open(db.to_str().unwrap()).await.unwrap();
        let made = NewArtifact {
            name: "plan.md".into(),
            media_type: "text/markdown".into(),
            content: b"# plan".to_vec(),
            bot: "scout".parse().unwrap(),
            session: OPS.parse().unwrap(),
            run_id: Some("r-earlier".into()),
            inputs: Vec::new(),
            created_ms: 1,
        };
        let Put::Stored(artifact) = store.artifact_put(made).await.unwrap() else {
            panic!("stored");
        };
        store.close().await.unwrap();
        artifact.id
    };
    let answer = json!({"attachments": [id]});
    let agent = axum::Router::new().route(
        "/turn",
        axum::routing::post(move || {
            let answer = answer.clone();
            async move { axum::Json(answer) }
        }),
    );
    let url = crate::support::turns::serve(agent).await;
    let config = format!(
        "{}\n[[bots]]\nid = \"agent\"\nbackend = \"http\"\nurl = \"{url}/turn\"\n",
        config_text("http://127.0.0.1:9", &[], "")
    );
    let gw = TestGateway::start(&config, &db).await;
    gw.say("ops", "alice", "@agent the plan").await;
    gw.settle().await;

    let said = gw.said_by("ops", "agent").await;
    let texts: Vec<&str> = said.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert_eq!(texts.len(), 1, "the file alone: {texts:?}");
    assert!(
        texts[0].starts_with("[file] plan.md (text/markdown, 6 bytes)") && texts[0].contains(&id),
        "{texts:?}"
    );
    gw.stop().await;
}
