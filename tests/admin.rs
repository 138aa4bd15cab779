//! Admin commands in a local room: admins run them, a non-admin is refused, a bot is ignored,
//! exactly one bot answers, and every call is in the audit table.

mod support;

use serde_json::Value;
use support::fake_openai::{FakeOpenAi, Step};
use support::gateway::{TestGateway, config_text, temp_db};

fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn admins_run_commands_others_are_refused_and_everything_is_audited() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let extra = "\n[chats_default]\ngroup_policy = \"open\"\nallow_bots = [\"*\"]\n";
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha", "beta"], extra), &db).await;

    gw.say("room", "admin", "/baton activation always").await;
    gw.settle().await;
    let bot_replies: Vec<Value> = gw
        .messages("room")
        .await
        .into_iter()
        .filter(|m| m["is_bot"] == true)
        .collect();
    assert_eq!(
        texts(&bot_replies),
        ["Activation in this chat is now `always`."],
        "exactly one bot answers"
    );

    gw.say("room", "admin", "/baton pause @beta").await;
    gw.settle().await;
    gw.say("room", "alice", "does anyone know?").await;
    gw.settle().await;
    let answered: Vec<String> = gw
        .messages("room")
        .await
        .iter()
        .filter(|m| m["text"] == "echo: does anyone know?")
        .map(|m| m["author"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(answered, ["alpha"], "always wakes alpha; beta is paused");

    gw.say("room", "mallory", "/baton resume").await;
    gw.settle().await;
    assert!(
        texts(&gw.messages("room").await)
            .contains(&"Only baton admins can run /baton commands.".to_owned())
    );

    // A bot that says an admin command is never obeyed and never answered.
    fake.script("alpha", Step::reply("/baton activation mention"));
    let before = gw.messages("room").await.len();
    gw.say("room", "alice", "@alpha say the magic words").await;
    gw.settle().await;
    assert_eq!(
        gw.messages("room").await.len(),
        before + 2,
        "only alice's message and alpha's line"
    );

    let audit = gw.gateway.store().audit_log(10).await.unwrap();
    let rows: Vec<(String, String, String)> = audit
        .iter()
        .rev()
        .map(|a| (a.user.clone(), a.command.clone(), a.outcome.clone()))
        .collect();
    assert_eq!(rows.len(), 4, "{rows:#?}");
    assert_eq!(
        rows[0],
        (
            "admin".into(),
            "/baton activation always".into(),
            "ok".into()
        )
    );
    assert_eq!(
        rows[1],
        ("admin".into(), "/baton pause @beta".into(), "ok".into())
    );
    assert_eq!(rows[2].0, "mallory");
    assert!(rows[2].2.starts_with("refused"), "{rows:#?}");
    assert_eq!(rows[3].0, "alpha");
    assert!(rows[3].2.starts_with("refused"), "{rows:#?}");
    let settings = gw
        .gateway
        .store()
        .chat_settings("local:room")
        .await
        .unwrap();
    assert_eq!(
        settings.activation.as_deref(),
        Some("always"),
        "the bot changed the activation"
    );
    gw.stop().await;
}

#[tokio::test]
async fn reset_starts_a_new_conversation_and_help_lists_commands() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha"], ""), &db).await;
    gw.say("room", "alice", "@alpha remember the number 42")
        .await;
    gw.settle().await;
    gw.say("room", "admin", "/baton reset @alpha").await;
    gw.say("room", "admin", "/baton help").await;
    gw.settle().await;
    gw.say("room", "alice", "@alpha what number?").await;
    gw.settle().await;
    let last = fake.requests_for("alpha").last().cloned().unwrap();
    assert!(
        !last.to_string().contains("number 42"),
        "the reset session still saw old turns"
    );
    let all = texts(&gw.messages("room").await);
    assert!(
        all.iter().any(|t| t.contains("/baton pause [@bot]")),
        "{all:#?}"
    );
    gw.stop().await;
}
