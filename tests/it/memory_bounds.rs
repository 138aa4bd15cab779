//! The limits that keep memory bounded, end to end (issue 15): a real gateway, real local rooms
//! over HTTP, a real SQLite file, bots on a fake OpenAI server on loopback.
//!
//! - A turn that finds its session's or its lane's waiting room full is refused, not queued:
//!   one "busy" notice per chat, a failure in the transcript, a metric.
//! - Local rooms, their logs and their posts are capped, each refusal a 4xx that says why.
//! - SIGTERM while a 16 MiB reply is processed ends the process within its drain time.
//! - A sender name that could forge a line is refused at the local channel's edge.
//! - A non-admin's `/baton` goes through the inbound rate limit: a flood gets one "slow down",
//!   not a refusal and an audit row each.

use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{DEADLINE, TestGateway, config_text, temp_db};
use crate::support::process::{Running, baton, eventually};

const BUSY: &str = "I'm busy with earlier messages";

/// Wait until the main lane has `n` turns waiting.
async fn main_lane_waiting(gw: &TestGateway, n: usize) {
    eventually(DEADLINE, &format!("{n} turns waiting"), || async {
        let load = gw.gateway.engine().lanes().load();
        (load[0].queued == n).then_some(())
    })
    .await;
}

fn count(messages: &[Value], starts: &str) -> usize {
    messages
        .iter()
        .filter(|m| m["text"].as_str().is_some_and(|t| t.starts_with(starts)))
        .count()
}

#[tokio::test]
async fn a_full_waiting_room_refuses_with_one_busy_notice_and_a_record() {
    let fake = FakeOpenAi::start().await;
    for _ in 0..3 {
        fake.script("snark", Step::reply("done"));
    }
    let (_dir, db) = temp_db();
    let extra = "[lanes]\nmain = 1\nmax_queued = 2\nmax_queued_per_session = 1\n";
    let gw = TestGateway::start(&config_text(&fake.base_url, &["snark"], extra), &db).await;
    fake.hold();

    gw.say("ops", "alice", "@snark one").await;
    fake.wait_for_requests(1, DEADLINE).await;
    gw.say("ops", "bob", "@snark two").await;
    main_lane_waiting(&gw, 1).await;
    // The session `ops` has its one waiting turn: these two are refused, told once.
    gw.say("ops", "carol", "@snark three").await;
    gw.say("ops", "dave", "@snark four").await;
    eventually(DEADLINE, "the busy notice", || async {
        let said = gw.said_by("ops", "snark").await;
        (count(&said, BUSY) == 1).then_some(())
    })
    .await;
    // Another room: its turn waits for the lane (2 waiting); a third room finds the lane full.
    gw.say("dev", "erin", "@snark five").await;
    main_lane_waiting(&gw, 2).await;
    gw.say("qa", "frank", "@snark six").await;
    eventually(DEADLINE, "the lane's busy notice", || async {
        let said = gw.said_by("qa", "snark").await;
        (count(&said, BUSY) == 1).then_some(())
    })
    .await;

    fake.release();
    eventually(DEADLINE, "the waiting turns answered", || async {
        let ops = gw.said_by("ops", "snark").await;
        let dev = gw.said_by("dev", "snark").await;
        (count(&ops, "done") == 2 && count(&dev, "done") == 1).then_some(())
    })
    .await;
    gw.settle().await;
    let ops = gw.said_by("ops", "snark").await;
    assert_eq!(count(&ops, BUSY), 1, "one busy notice per chat: {ops:?}");
    assert_eq!(count(&gw.said_by("qa", "snark").await, "done"), 0);

    let transcript = gw.transcript("bot:snark:local:snark:ops").await;
    let refused: Vec<_> = transcript
        .iter()
        .filter(|e| e["kind"] == "failure" && e["meta"]["refused"] == "session_queue_full")
        .collect();
    assert_eq!(refused.len(), 2, "{transcript:#?}");
    let words: Vec<_> = refused.iter().map(|e| e["meta"]["text"].clone()).collect();
    assert_eq!(words, [json!("@snark three"), json!("@snark four")]);
    let qa = gw.transcript("bot:snark:local:snark:qa").await;
    assert!(
        qa.iter()
            .any(|e| e["kind"] == "failure" && e["meta"]["refused"] == "lane_queue_full"),
        "{qa:#?}"
    );
    let metrics = gw.metrics().await;
    assert!(
        metrics.contains("baton_queue_refusals_total{reason=\"session_queue_full\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("baton_queue_refusals_total{reason=\"lane_queue_full\"} 1"),
        "{metrics}"
    );
    gw.stop().await;
}

async fn post_status(gw: &TestGateway, room: &str, body: Value) -> (u16, Value) {
    let response = gw
        .http
        .post(format!("{}/api/local/rooms/{room}/messages", gw.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test]
async fn local_rooms_logs_and_posts_are_capped_with_a_reason() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let extra = "[local]\nmax_rooms = 2\nroom_log_messages = 3\nmax_message_bytes = 64\n";
    let gw = TestGateway::start(&config_text(&fake.base_url, &["snark"], extra), &db).await;
    for room in ["one", "two"] {
        gw.say(room, "alice", "hello").await;
    }
    let (status, body) = post_status(&gw, "three", json!({"sender": "alice", "text": "hi"})).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("max_rooms"),
        "{body}"
    );
    let long = "x".repeat(65);
    let (status, body) = post_status(&gw, "one", json!({"sender": "alice", "text": long})).await;
    assert_eq!(status, 413, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("max_message_bytes"),
        "{body}"
    );
    // Every field is bounded, not only the text.
    let id = "i".repeat(257);
    for field in ["message_id", "event_id", "thread", "reply_to"] {
        let body = json!({"sender": "alice", "text": "hi", field: id});
        let (status, body) = post_status(&gw, "one", body).await;
        assert_eq!(status, 413, "{field}: {body}");
        assert!(body["error"].as_str().unwrap().contains(field), "{body}");
    }
    for n in 0..5 {
        gw.say("one", "alice", &format!("m{n}")).await;
    }
    let shown: Vec<_> = gw
        .messages("one")
        .await
        .into_iter()
        .map(|m| m["text"].clone())
        .collect();
    assert_eq!(shown, [json!("m2"), json!("m3"), json!("m4")]);
    gw.settle().await;
    gw.stop().await;
}

#[tokio::test]
async fn sender_names_that_could_forge_a_line_are_refused_at_the_local_edge() {
    let fake = FakeOpenAi::start().await;
    fake.script("snark", Step::reply("hi"));
    let (_dir, db) = temp_db();
    // The test config makes `admin` a local admin.
    let gw = TestGateway::start(&config_text(&fake.base_url, &["snark"], ""), &db).await;
    for name in [
        "admin\u{0}",
        "bob\u{1b}[2J",
        "eve\u{202e}nimda",
        "a\nadmin",
        // Impersonation: invisible characters, edge spaces, look-alikes, reserved names.
        "ad\u{200b}min",
        "admin\u{a0}",
        " admin",
        "\u{430}dmin",
        "ADMIN",
        "baton",
        "bot:snark",
        "SNARK",
    ] {
        let (status, body) =
            post_status(&gw, "ops", json!({"sender": name, "text": "@snark hi"})).await;
        assert_eq!(status, 400, "{name:?}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains("sender name"),
            "{body}"
        );
        let response = gw
            .http
            .post(format!("{}/v1/chat/completions", gw.base))
            .json(&json!({"model": "snark", "user": name,
                          "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{name:?}");
    }
    gw.settle().await;
    assert!(gw.messages("ops").await.is_empty());
    assert!(fake.requests().is_empty(), "a forged name reached the bot");
    let sessions = gw.get("/api/sessions").await;
    assert_eq!(sessions, json!([]), "a forged name opened a session");
    gw.stop().await;
}

#[tokio::test]
async fn a_non_admins_commands_go_through_the_inbound_rate_limit() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let extra = "[limits]\ninbound_per_sender_per_minute = 3\n";
    let gw = TestGateway::start(&config_text(&fake.base_url, &["snark"], extra), &db).await;
    for _ in 0..40 {
        gw.say("ops", "mallory", "/baton pause @snark").await;
    }
    gw.settle().await;
    let said = gw.said_by("ops", "snark").await;
    assert_eq!(count(&said, "Only baton admins"), 3, "{said:#?}");
    assert_eq!(
        count(&said, "You're sending messages faster"),
        1,
        "{said:#?}"
    );
    assert_eq!(said.len(), 4, "{said:#?}");
    let audit = gw.gateway.store().audit_log(100).await.unwrap();
    assert_eq!(audit.len(), 3, "{audit:#?}");
    assert!(audit.iter().all(|a| a.outcome == "refused: not an admin"));
    // An admin is not held to it.
    for _ in 0..5 {
        gw.say("ops", "admin", "/baton status").await;
    }
    gw.settle().await;
    let audit = gw.gateway.store().audit_log(100).await.unwrap();
    assert_eq!(audit.len(), 8);
    gw.stop().await;
}

/// The artifact id a line names (`art-` and 24 hex digits).
fn artifact_named(text: &str) -> String {
    let at = text
        .find("art-")
        .unwrap_or_else(|| panic!("no artifact in {text:?}"));
    text[at..at + 28].to_owned()
}

#[tokio::test]
async fn a_reply_over_its_bounds_posts_its_start_and_a_note_and_is_kept_whole() {
    let fake = FakeOpenAi::start().await;
    let words: Vec<String> = (0..3000).map(|i| format!("word{i}")).collect();
    let reply = words.join(" ");
    fake.script("snark", Step::reply(reply.clone()));
    let (_dir, db) = temp_db();
    let extra = "[limits]\nmax_reply_bytes = 10000\nmax_posts_per_reply = 2\n";
    let gw = TestGateway::start(&config_text(&fake.base_url, &["snark"], extra), &db).await;
    gw.say("ops", "alice", "@snark talk at length").await;
    eventually(DEADLINE, "the cut reply and its file", || async {
        let said = gw.said_by("ops", "snark").await;
        (said.len() == 3).then_some(())
    })
    .await;
    gw.settle().await;
    let said = gw.said_by("ops", "snark").await;
    assert_eq!(said.len(), 3, "two posts and the file: {said:?}");
    let first = said[0]["text"].as_str().unwrap();
    assert!(reply.starts_with(first), "{said:?}");
    let note = said[1]["text"].as_str().unwrap();
    assert!(
        note.contains(&format!("all {} bytes", reply.len())),
        "{note:?}"
    );
    let file = said[2]["text"].as_str().unwrap();
    assert!(file.starts_with("[file] reply.md"), "{file:?}");
    let id = artifact_named(note);
    let content = reqwest::get(format!("http://{}/api/artifacts/{id}/content", gw.addr()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(content, reply, "the whole reply is kept");
    gw.stop().await;
}

/// A model that never stops answering: the gateway reads it up to its cap (from `[limits]
/// max_reply_bytes` and `[artifacts] max_bytes`), fails the turn with that reason in the
/// transcript, and tells the chat the usual error reply.
#[tokio::test]
async fn an_endless_model_answer_fails_the_turn_at_the_read_cap() {
    let fake = FakeOpenAi::start().await;
    fake.script("snark", Step::Endless);
    let (_dir, db) = temp_db();
    let extra = "[limits]\nmax_reply_bytes = 10000\n[artifacts]\nmax_bytes = 30000\n";
    let gw = TestGateway::start(&config_text(&fake.base_url, &["snark"], extra), &db).await;
    gw.say("ops", "alice", "@snark never stop").await;
    let failure = eventually(DEADLINE, "the turn's failure", || async {
        let transcript = gw.transcript("bot:snark:local:snark:ops").await;
        transcript.into_iter().find(|e| e["kind"] == "failure")
    })
    .await;
    let text = failure.to_string();
    assert!(
        text.contains("ran past 125536 bytes") && text.contains("max_reply_bytes"),
        "{failure:#}"
    );
    eventually(DEADLINE, "the error reply", || async {
        let said = gw.said_by("ops", "snark").await;
        (count(&said, "Sorry, my model backend failed.") == 1).then_some(())
    })
    .await;
    gw.stop().await;
}

/// SIGTERM while a 16 MiB reply is being processed: the process exits within its drain time
/// (`drain_seconds = 5` in the test config), plus a margin for the process's own teardown.
#[tokio::test]
async fn sigterm_while_a_16_mib_reply_is_processed_exits_within_the_drain_time() {
    const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);
    let margin = DRAIN + std::time::Duration::from_secs(3);
    let fake = FakeOpenAi::start().await;
    fake.script("snark", Step::reply("x".repeat(16 << 20)));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("baton.toml");
    std::fs::write(&config, config_text(&fake.base_url, &["snark"], "")).unwrap();
    let mut cmd = baton(dir.path());
    cmd.arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--database")
        .arg(dir.path().join("baton.db"));
    let (mut gateway, out) = Running::spawn(cmd);
    let base = gateway.base_url(out).await;
    let posted = reqwest::Client::new()
        .post(format!("{base}/api/local/rooms/ops/messages"))
        .json(&json!({"sender": "alice", "text": "@snark everything"}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 202);
    eventually(DEADLINE, "the model asked", || async {
        (!fake.requests_for("snark").is_empty()).then_some(())
    })
    .await;

    gateway.terminate();
    let asked = std::time::Instant::now();
    let status = gateway.wait(margin).await;
    assert!(
        asked.elapsed() < margin && status.success(),
        "exited after {:?} ({status})\n{}",
        asked.elapsed(),
        gateway.logs()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_16_mib_reply_never_holds_up_healthz() {
    let fake = FakeOpenAi::start().await;
    let reply = "x".repeat(16 << 20);
    fake.script("snark", Step::reply(reply));
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["snark"], ""), &db).await;
    let health = format!("http://{}/healthz", gw.addr());
    let client = reqwest::Client::new();
    gw.say("ops", "alice", "@snark everything").await;
    let mut slowest = std::time::Duration::ZERO;
    let deadline = tokio::time::Instant::now() + DEADLINE * 3;
    while gw.said_by("ops", "snark").await.len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "no reply posted");
        let asked = std::time::Instant::now();
        let status = client.get(&health).send().await.unwrap().status();
        assert_eq!(status, 200);
        slowest = slowest.max(asked.elapsed());
    }
    assert!(
        slowest < std::time::Duration::from_secs(1),
        "/healthz took {slowest:?} while the reply was processed"
    );
    let said = gw.said_by("ops", "snark").await;
    assert!(
        said.len() <= 21,
        "one reply makes at most 20 posts and a file: {}",
        said.len()
    );
    gw.settle().await;
    gw.stop().await;
}
