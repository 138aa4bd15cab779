//! Files posted in chats, end to end: a real gateway whose bots live on fake Slack, Discord and
//! Feishu platforms on 127.0.0.1, which serve the files' bytes at their download routes, and
//! bots on a fake model server that records every request. A PNG reaches a `vision` bot's model
//! request as an image part (the bytes of its data URL are checked), a text file is given
//! inline, a file over the cap or whose download fails is named to the bot as not read and the
//! turn still runs. Every wait is on a condition with a deadline.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::fake_discord::FakeDiscord;
use crate::support::fake_feishu::{FakeFeishu, file_event};
use crate::support::fake_openai::FakeOpenAi;
use crate::support::fake_slack::{FakeSlack, event_body, events_envelope};
use crate::support::gateway::{DEADLINE, TestGateway};

/// A 1×1 PNG.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn png() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(PNG_B64)
        .unwrap()
}

/// The `content` of the last user message of a model request.
fn last_user_content(request: &Value) -> Value {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .expect("a user message")["content"]
        .clone()
}

/// The text of a user message's content, whether a string or content parts.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The bytes of each image part's base64 data URL, with its media type.
fn images_of(content: &Value) -> Vec<(String, Vec<u8>)> {
    let parts = content.as_array().cloned().unwrap_or_default();
    parts
        .iter()
        .filter(|p| p["type"] == "image_url")
        .map(|p| {
            let url = p["image_url"]["url"].as_str().unwrap();
            let (head, data) = url.split_once(";base64,").expect("a base64 data URL");
            let media = head.strip_prefix("data:").unwrap().to_owned();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap();
            (media, bytes)
        })
        .collect()
}

/// Wait until the model has received `n` requests.
async fn requests(model: &FakeOpenAi, n: usize) -> Vec<Value> {
    model.wait_for_requests(n, DEADLINE).await
}

/// The artifacts a run made, from the HTTP API.
async fn artifacts_of_run(gateway: &TestGateway, run: &str) -> Vec<Value> {
    let found = gateway
        .http
        .get(format!("{}/api/artifacts", gateway.base))
        .query(&[("run", run)])
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    found["artifacts"].as_array().cloned().unwrap_or_default()
}

fn open_chats() -> &'static str {
    "\n[chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n"
}

// ---- Slack ----------------------------------------------------------------------------------

struct Slack {
    model: FakeOpenAi,
    slack: FakeSlack,
    gateway: TestGateway,
    _db: tempfile::TempDir,
}

/// `snark` (`vision = true`) as a Slack app in Socket Mode, `extra` TOML appended.
async fn slack(extra: &str) -> Slack {
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    slack.app("snark", "U_SNARK");
    let text = format!(
        "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n{}\n\
         [[bots]]\nid = \"snark\"\nbackend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"\n\
         vision = true\n\n\
         [[accounts]]\nbot = \"snark\"\nplatform = \"slack\"\nmode = \"socket\"\n\
         app_token_env = \"APP\"\nbot_token_env = \"BOT\"\napi_url = \"{}\"\n{extra}",
        open_chats(),
        model.base_url,
        slack.api_url
    );
    let env = |name: &str| match name {
        "APP" => Some("xapp-snark".to_owned()),
        "BOT" => Some("xoxb-snark".to_owned()),
        _ => None,
    };
    let (dir, db) = crate::support::gateway::temp_db();
    let gateway = TestGateway::start_with_env(&text, Path::new(&db), &env).await;
    slack.wait_connected("snark", 1).await;
    Slack {
        model,
        slack,
        gateway,
        _db: dir,
    }
}

impl Slack {
    /// A human's `file_share` message mentioning snark in a thread of `C1`, with `files`.
    async fn share(&self, ts: &str, text: &str, files: Vec<Value>) {
        let event = json!({
            "type": "message", "subtype": "file_share", "user": "U_HUMAN",
            "text": format!("<@U_SNARK> {text}"), "ts": ts, "thread_ts": "1700000000.000001",
            "channel": "C1", "channel_type": "channel", "event_ts": ts, "files": files,
        });
        let body = event_body("A1", &format!("Ev{ts}"), "message", event);
        let envelope = events_envelope(&format!("env-{ts}"), 0, body);
        self.slack.push("snark", &envelope);
        let id = format!("env-{ts}");
        self.slack.wait_for(|s| s.acks().contains(&id)).await;
        self.gateway.settle().await;
    }
}

/// A PNG and a text file posted in a Slack thread: the PNG's bytes reach the vision bot's model
/// request as an image part, the text inline; both are artifacts made by the sender, fetched
/// once each with the bot token, kept in the bot's session; the reply goes into the thread.
#[tokio::test]
async fn a_png_in_a_slack_thread_reaches_a_vision_bot_as_an_image_part() {
    let w = slack("").await;
    let shot = w.slack.file("F1", "shot.png", "image/png", &png());
    let notes = w
        .slack
        .file("F2", "notes.txt", "text/plain", b"deploy at five, not six");
    w.share("1700000000.000100", "what is in these?", vec![shot, notes])
        .await;

    let request = &requests(&w.model, 1).await[0];
    let content = last_user_content(request);
    assert_eq!(
        images_of(&content),
        [("image/png".to_owned(), png())],
        "{content:#}"
    );
    let text = text_of(&content);
    assert!(text.contains("what is in these?"), "{text}");
    assert!(
        text.contains(
            "`shot.png` (image/png, 70 bytes, posted by U_HUMAN): shown to you as an image"
        ),
        "{text}"
    );
    assert!(
        text.contains("`notes.txt` (text/plain, 23 bytes, posted by U_HUMAN):\ndeploy at five, not six\n(end of art-"),
        "{text}"
    );

    let fetches = w.slack.shelf().fetches();
    assert_eq!(fetches.len(), 2, "{fetches:?}");
    assert!(
        fetches
            .iter()
            .all(|f| f.authorization.as_deref() == Some("Bearer xoxb-snark")),
        "{fetches:?}"
    );
    let posts = w.slack.posts();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].thread_ts.as_deref(), Some("1700000000.000001"));

    let kept = artifacts_of_run(&w.gateway, "in:slack:snark:C1:1700000000.000100").await;
    let names: Vec<&str> = kept.iter().filter_map(|a| a["name"].as_str()).collect();
    assert_eq!(names.len(), 2, "{kept:#?}");
    assert!(names.contains(&"shot.png") && names.contains(&"notes.txt"));
    assert!(kept.iter().all(|a| a["bot"] == "snark"), "{kept:#?}");
    w.gateway.stop().await;
}

/// A file over `[artifacts] max_bytes` by the platform's word is not fetched at all; a file
/// whose download fails is fetched once; both are named to the bot as not read (recorded in
/// the transcript, without the token), a good file beside them is read, and the turn runs.
#[tokio::test]
async fn an_over_cap_file_and_a_failed_download_are_told_and_the_turn_runs() {
    let w = slack("\n[artifacts]\nmax_bytes = 2048\n").await;
    let big = w
        .slack
        .file("F1", "big.pdf", "application/pdf", &[b'%'; 5000]);
    let broken = w.slack.file("F2", "broken.csv", "text/csv", b"a,b\n1,2\n");
    w.slack.shelf().fail("T1-F2/download/broken.csv", 500);
    let fine = w.slack.file("F3", "fine.md", "text/markdown", b"# fine");
    w.share("1700000000.000200", "read these", vec![big, broken, fine])
        .await;

    let request = &requests(&w.model, 1).await[0];
    let text = text_of(&last_user_content(request));
    assert!(
        text.contains("- file big.pdf (4.9 kB) was not read: over the 2 kB limit"),
        "{text}"
    );
    assert!(
        text.contains("- file broken.csv (8 bytes) was not read: the platform answered HTTP 500"),
        "{text}"
    );
    assert!(text.contains(":\n# fine\n(end of art-"), "{text}");
    let fetched: Vec<String> = w
        .slack
        .shelf()
        .fetches()
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(
        fetched,
        ["T1-F2/download/broken.csv", "T1-F3/download/fine.md"],
        "the over-cap file is never fetched"
    );
    assert_eq!(
        w.slack.posts().len(),
        1,
        "the turn ran and its reply was posted"
    );

    let session = "bot:snark:slack:snark:C1:thread:1700000000.000001";
    let transcript = w.gateway.transcript(session).await;
    let inbound = transcript
        .iter()
        .find(|e| e["kind"] == "inbound")
        .unwrap_or_else(|| panic!("no inbound entry in {transcript:#?}"));
    let recorded = inbound["text"].as_str().unwrap();
    assert!(
        recorded.contains("big.pdf (4.9 kB) was not read"),
        "{recorded}"
    );
    assert!(
        !Value::Array(transcript.clone())
            .to_string()
            .contains("xoxb-snark")
    );
    w.gateway.stop().await;
}

// ---- Discord --------------------------------------------------------------------------------

const SNARK: &str = "100000000000000001";
const CAID: &str = "100000000000000002";
const CHANNEL: &str = "300000000000000001";

/// A PNG posted in a Discord channel, mentioning a vision bot and one without vision: each
/// fetches it from the attachment URL (no token sent); the vision bot's request has it as an
/// image part, the other's names it by reference to be read with `artifact_get`.
#[tokio::test]
async fn a_png_in_a_discord_channel_reaches_a_vision_bot_and_the_other_by_reference() {
    let model = FakeOpenAi::start().await;
    let discord = FakeDiscord::start().await;
    discord.bot("token-snark", SNARK, "snark");
    discord.bot("token-caid", CAID, "caid");
    let mut text = format!(
        "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n{}",
        open_chats()
    );
    for (bot, user, keys) in [("snark", SNARK, "vision = true"), ("caid", CAID, "")] {
        text.push_str(&format!(
            "\n[[bots]]\nid = \"{bot}\"\nbackend = \"openai\"\nmodel = \"{bot}\"\nbase_url = \"{}\"\n{keys}\n\n\
             [[accounts]]\nbot = \"{bot}\"\nplatform = \"discord\"\nbot_token_env = \"{bot}\"\n\
             application_id = \"{user}\"\napi_url = \"{}\"\n",
            model.base_url, discord.api_url
        ));
    }
    let env = |name: &str| Some(format!("token-{name}"));
    let (_dir, db) = crate::support::gateway::temp_db();
    let gateway = TestGateway::start_with_env(&text, Path::new(&db), &env).await;
    discord
        .wait_for("both bots identified", |d| {
            d.connected(SNARK) && d.connected(CAID)
        })
        .await;
    wait_ready(&gateway).await;

    discord.say_with_files(
        ("200000000000000001", "mason"),
        CHANNEL,
        &format!("<@{SNARK}> <@{CAID}> what is this?"),
        &[("shot.png", "image/png", &png())],
    );
    requests(&model, 2).await;
    gateway.settle().await;

    let snark = last_user_content(&model.requests_for("snark")[0]);
    assert_eq!(images_of(&snark), [("image/png".to_owned(), png())]);
    let caid = last_user_content(&model.requests_for("caid")[0]);
    assert!(images_of(&caid).is_empty(), "{caid:#}");
    let told = text_of(&caid);
    assert!(
        told.contains("`shot.png` (image/png, 70 bytes, posted by 200000000000000001); read it with artifact_get"),
        "{told}"
    );
    let fetches = discord.shelf().fetches();
    assert_eq!(fetches.len(), 2, "one fetch per bot: {fetches:?}");
    assert!(
        fetches.iter().all(|f| f.authorization.is_none()),
        "{fetches:?}"
    );
    assert_eq!(discord.posts().len(), 2);
    gateway.stop().await;
}

/// Until every account knows who it is (READY, `bot/v3/info`), mentions cannot be resolved.
async fn wait_ready(gateway: &TestGateway) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let status = gateway
            .http
            .get(format!("{}/readyz", gateway.base))
            .send()
            .await
            .unwrap()
            .status();
        let known = gateway
            .gateway
            .dispatcher()
            .engine()
            .roster()
            .accounts()
            .iter()
            .all(|a| a.adapter.self_id().is_some());
        if status == 200 && known {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---- Feishu ---------------------------------------------------------------------------------

/// An image message in a Feishu chat reaches the vision bot as an image part (the resource
/// fetched with the tenant token, its type sniffed from its bytes); a file message over the cap
/// is cut off by its announced length and the bot is told.
#[tokio::test]
async fn a_png_in_a_feishu_chat_reaches_a_vision_bot_as_an_image_part() {
    let model = FakeOpenAi::start().await;
    let feishu = FakeFeishu::start().await;
    feishu.app("snark", "ou_snark_self");
    let text = format!(
        "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 1\n{}\n\
         [artifacts]\nmax_bytes = 4096\n\n\
         [[bots]]\nid = \"snark\"\nbackend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{}\"\n\
         vision = true\n\n\
         [[accounts]]\nbot = \"snark\"\nplatform = \"feishu\"\nmode = \"websocket\"\n\
         app_id = \"cli_snark\"\napp_secret_env = \"SECRET\"\napi_url = \"{}\"\n",
        open_chats(),
        model.base_url,
        feishu.api_url
    );
    let env = |name: &str| (name == "SECRET").then(|| "secret-snark".to_owned());
    let (_dir, db) = crate::support::gateway::temp_db();
    let gateway = TestGateway::start_with_env(&text, Path::new(&db), &env).await;
    feishu.wait_connected("snark", 1).await;
    wait_ready(&gateway).await;

    let dm = ("oc_dm", "p2p");
    // Served as octet-stream: the media type comes from the PNG's own signature.
    feishu.resource(
        "om_img",
        "img_v2_1",
        "image",
        &png(),
        "application/octet-stream",
    );
    let frame = feishu.push_event(
        "snark",
        &file_event("snark", "ev1", "om_img", dm, "ou_human", "img_v2_1", None),
    );
    feishu.wait_for(|f| f.acks_for(&frame) == 1).await;
    requests(&model, 1).await;
    gateway.settle().await;
    let content = last_user_content(&model.requests()[0]);
    assert_eq!(images_of(&content), [("image/png".to_owned(), png())]);
    assert!(text_of(&content).starts_with("[image]\n\nFiles posted with this message:"));

    feishu.resource(
        "om_file",
        "file_v2_1",
        "file",
        &[b'x'; 5000],
        "application/zip",
    );
    let frame = feishu.push_event(
        "snark",
        &file_event(
            "snark",
            "ev2",
            "om_file",
            dm,
            "ou_human",
            "file_v2_1",
            Some("big.zip"),
        ),
    );
    feishu.wait_for(|f| f.acks_for(&frame) == 1).await;
    requests(&model, 2).await;
    gateway.settle().await;
    let told = text_of(&last_user_content(&model.requests()[1]));
    assert!(
        told.contains("[file big.zip]\n\nFiles posted with this message:\n- file big.zip was not read: over the 4 kB limit"),
        "{told}"
    );

    let fetches = feishu.shelf().fetches();
    let paths: Vec<&str> = fetches.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        ["om_img/img_v2_1?type=image", "om_file/file_v2_1?type=file"]
    );
    assert!(
        fetches.iter().all(|f| f
            .authorization
            .as_deref()
            .is_some_and(|a| a.starts_with("Bearer t-snark-"))),
        "{fetches:?}"
    );
    assert_eq!(feishu.posts().len(), 2, "both turns ran and answered");
    gateway.stop().await;
}
