//! Admin commands in a local room: admins run them, a non-admin is refused, a bot is ignored,
//! exactly one bot answers, and every call is in the audit table.

use serde_json::Value;

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{TestGateway, config_text, temp_db};

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
        .chat_settings(&baton_contract::ChatKey::new(
            baton_contract::Platform::Local,
            &"room".into(),
            None,
        ))
        .await
        .unwrap();
    assert_eq!(
        settings.activation.map(|a| a.as_str()),
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

/// The answer to the last command: the newest bot line in the room.
async fn last_answer(gw: &TestGateway) -> String {
    let room = gw.messages("room").await;
    let line = room
        .iter()
        .rev()
        .find(|m| m["is_bot"] == true)
        .expect("an answer");
    line["text"].as_str().unwrap().to_owned()
}

/// `command` as `who`, then the answer.
async fn run(gw: &TestGateway, who: &str, command: &str) -> String {
    gw.say("room", who, command).await;
    gw.settle().await;
    last_answer(gw).await
}

#[tokio::test]
async fn status_bots_limits_transcript_and_chain_commands_answer_admins_only() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    // Two bots: a bot's line reaches the other, which is how a bot's command gets seen.
    let gw = TestGateway::start(&config_text(&fake.base_url, &["alpha", "beta"], ""), &db).await;
    gw.say("room", "alice", "@alpha hello there").await;
    gw.settle().await;

    let transcript = run(&gw, "admin", "/baton transcript 2").await;
    assert_eq!(
        transcript.lines().collect::<Vec<_>>()[0],
        "Last 2 line(s) here:",
        "{transcript}"
    );
    assert!(
        transcript.contains("alice [inbound]: @alpha hello there"),
        "{transcript}"
    );
    assert!(
        transcript.contains("alpha [reply]: echo: @alpha hello there"),
        "{transcript}"
    );
    let alpha = run(&gw, "admin", "/baton transcript @alpha 50").await;
    assert!(alpha.contains("[inbound]: @alpha hello there"), "{alpha}");
    assert!(
        alpha.contains("Last 2 line(s) here:"),
        "its own earlier answer: {alpha}"
    );

    let status = run(&gw, "admin", "/baton status").await;
    for part in [
        "Accounts:",
        "local/alpha (bot alpha): connected",
        "Lanes:",
        "- main: 0 running",
    ] {
        assert!(status.contains(part), "{part}: {status}");
    }
    assert!(
        status.contains("Guard refusals in the last hour: none"),
        "{status}"
    );
    let bots = run(&gw, "admin", "/baton bots").await;
    assert!(bots.starts_with("Bots:\n- alpha (alpha)"), "{bots}");
    let limits = run(&gw, "admin", "/baton limits").await;
    for part in [
        "Limits in local:room",
        "inbound: 20 messages per sender per bot per minute",
        "bot reply chain 0 of 3",
        "chains: baton coordinates round-robin, 1 round(s)",
        "Refused here in the last hour: none",
    ] {
        assert!(limits.contains(part), "{part}: {limits}");
    }

    assert_eq!(
        run(&gw, "admin", "/baton chain status").await,
        "No open chain in this chat. `/baton chain status ID` shows any chain; `baton chains` \
         lists them all."
    );
    run(&gw, "admin", "/baton chain start @alpha the plan").await;
    let id = gw.get("/api/chains").await["chains"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let started =
        format!("Started chain {id} \"the plan\": baton coordinates; participants alpha.");
    let room = texts(&gw.messages("room").await);
    assert!(room.iter().any(|t| t.starts_with(&started)), "{room:#?}");
    let one = run(&gw, "admin", &format!("/baton chain status {id}")).await;
    assert!(
        one.starts_with(&format!("{id} \"the plan\" — completed")),
        "{one}"
    );
    assert!(one.contains("message alpha: echo:"), "its log: {one}");
    assert_eq!(
        run(&gw, "admin", "/baton chain stop").await,
        "No open chain in this chat to stop."
    );

    // Someone else gets a short refusal, even for the stop when nothing is running.
    for command in [
        "/baton limits",
        "/baton chain start @alpha x",
        "/baton chain stop",
    ] {
        let answer = run(&gw, "mallory", command).await;
        assert_eq!(
            answer, "Only baton admins can run /baton commands.",
            "{command}"
        );
    }
    // A bot is never obeyed.
    fake.script("alpha", Step::reply("/baton chain start @alpha forever"));
    gw.say("room", "alice", "@alpha go").await;
    gw.settle().await;
    assert_eq!(
        gw.get("/api/chains").await["chains"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    let audit = gw.gateway.store().audit_log(50).await.unwrap();
    let rows: Vec<(String, String, String)> = audit
        .iter()
        .rev()
        .map(|a| (a.user.clone(), a.command.clone(), a.outcome.clone()))
        .collect();
    let expect = [
        ("admin", "/baton transcript 2", "ok"),
        ("admin", "/baton transcript @alpha 50", "ok"),
        ("admin", "/baton status", "ok"),
        ("admin", "/baton bots", "ok"),
        ("admin", "/baton limits", "ok"),
        ("admin", "/baton chain status", "ok"),
        ("admin", "/baton chain start @alpha the plan", "ok"),
        ("admin", &format!("/baton chain status {id}"), "ok"),
        (
            "admin",
            "/baton chain stop",
            "error: No open chain in this chat to stop.",
        ),
        ("mallory", "/baton limits", "refused: not an admin"),
        (
            "mallory",
            "/baton chain start @alpha x",
            "refused: not an admin",
        ),
        ("mallory", "/baton chain stop", "refused: not an admin"),
        (
            "alpha",
            "/baton chain start @alpha forever",
            "refused: bots may not run admin commands",
        ),
    ];
    let expect: Vec<(String, String, String)> = expect
        .iter()
        .map(|(u, c, o)| ((*u).to_owned(), (*c).to_owned(), (*o).to_owned()))
        .collect();
    assert_eq!(rows, expect);
    gw.stop().await;
}
