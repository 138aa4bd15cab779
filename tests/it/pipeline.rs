//! End-to-end tests of the pipeline through the local group room: a real gateway (store file,
//! local adapters, HTTP on loopback) with bots on the openai backend, answered by a scripted
//! fake model server. Every assertion is on what the room, the transcript, the audit table or
//! the fake model received.

use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{TestGateway, config_text, temp_db};

fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Every message content the fake received from `model`, joined: what the bot was given.
fn prompt_text(fake: &FakeOpenAi, model: &str) -> String {
    fake.requests_for(model)
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn mention_wakes_only_the_mentioned_bot_and_always_wakes_everyone() {
    let fake = FakeOpenAi::start().await;
    let extra = r#"
[[chats]]
platform = "local"
id = "busy"
activation = "always"
"#;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha", "beta"], extra), &db).await;

    gw.say("quiet", "alice", "good morning all").await;
    gw.say("quiet", "alice", "@alpha what's up?").await;
    gw.settle().await;
    assert_eq!(
        texts(&gw.said_by("quiet", "alpha").await),
        ["echo: @alpha what's up?"]
    );
    assert!(
        gw.said_by("quiet", "beta").await.is_empty(),
        "beta was not mentioned"
    );

    gw.say("busy", "alice", "anyone around?").await;
    gw.settle().await;
    assert_eq!(gw.said_by("busy", "alpha").await.len(), 1);
    assert_eq!(gw.said_by("busy", "beta").await.len(), 1);
    gw.stop().await;
}

#[tokio::test]
async fn an_always_bot_ignores_a_message_that_mentions_only_another_bot() {
    let fake = FakeOpenAi::start().await;
    let extra = "\n[chats_default]\ngroup_policy = \"open\"\nactivation = \"always\"\n";
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha", "beta"], extra), &db).await;
    gw.say("room", "alice", "@beta fix the build").await;
    gw.settle().await;
    assert_eq!(gw.said_by("room", "beta").await.len(), 1);
    assert!(gw.said_by("room", "alpha").await.is_empty());
    assert!(fake.requests_for("alpha").is_empty(), "alpha ran a turn");
    gw.stop().await;
}

#[tokio::test]
async fn silent_token_exact_match_is_silent_and_a_trailing_token_is_stripped() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], ""), &db).await;
    fake.script("alpha", Step::reply("  NO_REPLY\n"));
    let asked = gw.say("room", "alice", "@alpha anything?").await;
    gw.settle().await;
    assert_eq!(
        gw.messages("room").await.len(),
        1,
        "a silent turn left something in the room"
    );
    let session = "bot:alpha:local:alpha:room";
    let kinds: Vec<Value> = gw
        .transcript(session)
        .await
        .iter()
        .map(|e| e["kind"].clone())
        .collect();
    assert_eq!(kinds, [json!("inbound"), json!("silent")]);
    assert_eq!(
        gw.transcript(session).await[0]["platform_message_id"],
        asked["id"]
    );

    fake.script("alpha", Step::reply("All done.\n\nNO_REPLY"));
    gw.say("room", "alice", "@alpha and now?").await;
    gw.settle().await;
    assert_eq!(texts(&gw.said_by("room", "alpha").await), ["All done."]);
    gw.stop().await;
}

#[tokio::test]
async fn history_buffer_reaches_the_next_turn_and_survives_a_restart() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let config = config_text(&fake.base_url, &["alpha"], "");
    let gw = TestGateway::start(&config, &db).await;
    gw.say("room", "bob", "the release codename is pineapple")
        .await;
    gw.settle().await;
    assert!(fake.requests_for("alpha").is_empty());
    gw.stop().await;

    let gw = TestGateway::start(&config, &db).await;
    gw.say("room", "alice", "@alpha what is the codename?")
        .await;
    gw.settle().await;
    assert!(
        prompt_text(&fake, "alpha").contains("pineapple"),
        "history did not reach the turn"
    );
    fake.script("alpha", Step::reply("ok"));
    gw.say("room", "alice", "@alpha again?").await;
    gw.settle().await;
    let second = &fake.requests_for("alpha")[1];
    let first_line = second["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        !first_line.contains("Earlier messages"),
        "the buffer was given twice: {second}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_duplicate_event_redelivered_after_a_restart_gets_no_second_reply() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let config = config_text(&fake.base_url, &["alpha"], "");
    let event = json!({"sender": "alice", "text": "@alpha deploy?", "message_id": "m-1", "event_id": "Ev-1"});
    let gw = TestGateway::start(&config, &db).await;
    gw.post("room", event.clone()).await;
    gw.post("room", event.clone()).await;
    gw.settle().await;
    assert_eq!(gw.said_by("room", "alpha").await.len(), 1);
    gw.stop().await;

    let gw = TestGateway::start(&config, &db).await;
    gw.post("room", event).await;
    gw.settle().await;
    assert_eq!(
        gw.said_by("room", "alpha").await.len(),
        1,
        "answered a redelivery (the room keeps the one reply from before the restart)"
    );
    assert_eq!(fake.requests_for("alpha").len(), 1, "the model ran twice");
    gw.stop().await;
}

/// A post that carries only a delivery id, sent twice, is one message answered once: the
/// redelivery is recognised by its message id, which the local channel takes from the event id.
#[tokio::test]
async fn an_event_id_sent_twice_without_a_message_id_gets_one_reply() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], ""), &db).await;
    let event = json!({"sender": "alice", "text": "@alpha deploy?", "event_id": "Ev-7"});
    gw.post("room", event.clone()).await;
    gw.post("room", event).await;
    gw.settle().await;
    assert_eq!(gw.said_by("room", "alpha").await.len(), 1);
    assert_eq!(fake.requests_for("alpha").len(), 1, "the model ran twice");
    gw.stop().await;
}

#[tokio::test]
async fn a_bot_message_wakes_a_bot_only_when_allowed() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha", "beta"], ""), &db).await;
    fake.script("alpha", Step::reply("@beta can you check this?"));
    gw.say("room", "alice", "@alpha start").await;
    gw.settle().await;
    assert_eq!(gw.said_by("room", "alpha").await.len(), 1);
    assert!(
        fake.requests_for("beta").is_empty(),
        "beta woke without allow_bots"
    );
    gw.stop().await;

    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let extra = "\n[chats_default]\ngroup_policy = \"open\"\nallow_bots = [\"alpha\"]\n";
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha", "beta"], extra), &db).await;
    fake.script("alpha", Step::reply("@beta can you check this?"));
    gw.say("room", "alice", "@alpha start").await;
    gw.settle().await;
    let beta = gw.said_by("room", "beta").await;
    assert_eq!(beta.len(), 1, "an allowed bot message did not wake beta");
    assert!(prompt_text(&fake, "beta").contains("can you check this?"));
    gw.stop().await;
}

#[tokio::test]
async fn a_bot_reply_chain_stops_at_the_limit_until_a_human_speaks() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let extra = r#"
[limits]
max_bot_reply_chain = 3
bot_pair_events_per_minute = 100

[chats_default]
group_policy = "open"
allow_bots = ["*"]
"#;
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha", "beta"], extra), &db).await;
    for _ in 0..10 {
        fake.script("alpha", Step::reply("@beta ping"));
        fake.script("beta", Step::reply("@alpha pong"));
    }
    gw.say("room", "alice", "@alpha start the game").await;
    gw.settle().await;
    let bot_messages = |all: Vec<Value>| all.iter().filter(|m| m["is_bot"] == true).count();
    // alpha (to the human), beta, alpha, beta: the 4th bot message in a row wakes nobody.
    assert_eq!(bot_messages(gw.messages("room").await), 4);
    gw.say("room", "alice", "@alpha once more").await;
    gw.settle().await;
    assert_eq!(
        bot_messages(gw.messages("room").await),
        8,
        "a human did not reset the chain"
    );
    gw.stop().await;
}

#[tokio::test]
async fn two_bots_mentioned_together_answer_in_parallel() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha", "beta"], ""), &db).await;
    // Each request is held until both are in flight: serial turns would never get there.
    fake.hold_until_in_flight(2);
    gw.say("room", "alice", "@alpha @beta status please").await;
    gw.settle().await;
    assert_eq!(fake.max_in_flight(), 2, "the two turns did not overlap");
    assert_eq!(gw.said_by("room", "alpha").await.len(), 1);
    assert_eq!(gw.said_by("room", "beta").await.len(), 1);
    gw.stop().await;
}

#[tokio::test]
async fn a_long_reply_is_chunked_at_the_limit_without_losing_text() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], ""), &db).await;
    let paragraphs: Vec<String> = (0..30)
        .map(|i| format!("Paragraph {i}: {}", "lorem ipsum ".repeat(25)))
        .collect();
    let long = paragraphs.join("\n\n");
    assert!(long.chars().count() > 8000);
    fake.script("alpha", Step::reply(long.clone()));
    gw.say("room", "alice", "@alpha tell me everything").await;
    gw.settle().await;
    let chunks = texts(&gw.said_by("room", "alpha").await);
    assert!(chunks.len() >= 3, "{} chunks", chunks.len());
    assert!(chunks.iter().all(|c| c.chars().count() <= 4000));
    let squash = |s: &str| s.split_whitespace().collect::<String>();
    assert_eq!(squash(&chunks.concat()), squash(&long));
    let entries = gw.transcript("bot:alpha:local:alpha:room").await;
    let replies = entries.iter().filter(|e| e["kind"] == "reply").count();
    assert_eq!(
        replies,
        chunks.len(),
        "each chunk is mirrored with its message id"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_backend_failure_gives_a_short_error_reply_and_a_recorded_failure() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], ""), &db).await;
    // A passing failure (the server is down through every retry): "try again".
    for _attempt in 0..4 {
        fake.script(
            "alpha",
            Step::Error {
                status: 503,
                retry_after: Some(0),
            },
        );
    }
    gw.say("room", "alice", "@alpha are you there?").await;
    gw.settle().await;
    assert_eq!(
        texts(&gw.said_by("room", "alpha").await),
        ["Sorry, my model backend failed."]
    );
    // A permanent one (the server refuses the request): what to fix, naming the model.
    fake.script(
        "alpha",
        Step::Error {
            status: 400,
            retry_after: None,
        },
    );
    gw.say("room", "alice", "@alpha hello?").await;
    gw.settle().await;
    let said = texts(&gw.said_by("room", "alpha").await);
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(
        said[1].contains("model `alpha`") && said[1].contains("check the bot's model settings"),
        "{said:?}"
    );
    let entries = gw.transcript("bot:alpha:local:alpha:room").await;
    let failures: Vec<&str> = entries
        .iter()
        .filter(|e| e["kind"] == "failure")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert!(
        failures.len() == 2 && failures[0].contains("503") && failures[1].contains("HTTP 400"),
        "{failures:?}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn oversized_text_from_any_platform_is_refused_with_a_message() {
    use baton::dispatcher::{DropReason, Handled};
    use baton_contract::{ChatKind, InboundEvent, Platform, Sender, UserId};

    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], ""), &db).await;
    let sender = Sender {
        id: "alice".into(),
        name: "alice".into(),
        is_bot: false,
        is_self: false,
    };
    let text = format!("@alpha {}", "x".repeat(101 * 1024));
    let mut event = InboundEvent::text_message(
        Platform::Local,
        "alpha".into(),
        "room".into(),
        ChatKind::Group,
        sender,
        "big-1".into(),
        text,
    );
    event.mentions = vec![UserId::from("alpha")];
    let handled = gw.gateway.dispatcher().handle(event).await;
    assert_eq!(handled, Handled::Dropped(DropReason::TooLong));
    assert!(
        fake.requests_for("alpha").is_empty(),
        "the model saw the oversized text"
    );
    let said = texts(&gw.said_by("room", "alpha").await);
    assert_eq!(said.len(), 1);
    assert!(said[0].contains("over 100 kB"), "{said:?}");
    gw.stop().await;
}
