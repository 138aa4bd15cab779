//! Why a message was or was not answered (SPEC 13): `GET /api/why` on messages posted into
//! local rooms of bots answered by the fake model. Each bot that received a message says which
//! step decided and why (duplicate, self, admin, policy, activation, bot guards, budgets, rate
//! limit); an answered one names its turn, its lane wait, the deliveries it made and the message
//! it posted.

use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{TestGateway, config_text, config_with, temp_db};

/// The decisions on message `id`, as `GET /api/why` gives them.
async fn why(gw: &TestGateway, id: &str) -> Vec<Value> {
    let found = gw.get(&format!("/api/why?message={id}")).await;
    found["decisions"].as_array().cloned().unwrap_or_default()
}

/// `bot`'s decisions among `all`.
fn of<'a>(all: &'a [Value], bot: &str) -> Vec<&'a Value> {
    all.iter().filter(|d| d["bot"] == bot).collect()
}

/// Posts `body` into local room `room` and waits for the pipeline; returns the message's id.
async fn say(gw: &TestGateway, room: &str, body: Value) -> String {
    let posted = gw.post(room, body).await;
    gw.settle().await;
    posted["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn why_tells_each_bots_decision_on_a_message() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["a", "b"], ""), &db).await;

    // Mentions nobody: neither bot is woken.
    let nobody = say(
        &gw,
        "room",
        json!({"sender": "alice", "text": "lunch at noon?"}),
    )
    .await;
    let found = why(&gw, &nobody).await;
    assert_eq!(found.len(), 2, "one decision per bot: {found:#?}");
    for d in &found {
        assert_eq!(d["step"], "activation", "{d:#}");
        assert_eq!(d["outcome"], "buffered", "{d:#}");
        assert_eq!(d["reason"], "not mentioned", "{d:#}");
        assert_eq!(d["sender"], "alice", "{d:#}");
    }

    // Mentions only b: a stays quiet for that reason, b answers and names what it posted.
    let to_b = say(
        &gw,
        "room",
        json!({"sender": "alice", "text": "@b what is two and two?"}),
    )
    .await;
    let found = why(&gw, &to_b).await;
    let a = of(&found, "a");
    assert_eq!(a.len(), 1, "{found:#?}");
    assert_eq!(a[0]["step"], "activation");
    assert_eq!(a[0]["reason"], "mentions only other bots");
    let b = of(&found, "b");
    assert_eq!(b.len(), 1, "{found:#?}");
    assert_eq!(b[0]["step"], "turn");
    assert_eq!(b[0]["outcome"], "replied");
    assert_eq!(b[0]["reason"], "mentioned");
    assert!(
        b[0]["run_id"].as_str().unwrap().contains(&to_b),
        "{:#}",
        b[0]
    );
    let reply = gw.said_by("room", "b").await;
    assert_eq!(reply.len(), 1, "{reply:#?}");
    assert_eq!(b[0]["posts"][0]["message_id"], reply[0]["id"], "{:#}", b[0]);
    assert_eq!(b[0]["posts"][0]["text"], reply[0]["text"]);

    // A redelivery of a message (the same id again) is one decision more per bot: duplicate.
    let first = json!({"sender": "alice", "text": "@a hello", "message_id": "m-again"});
    say(&gw, "room", first.clone()).await;
    say(&gw, "room", first).await;
    let found = why(&gw, "m-again").await;
    for bot in ["a", "b"] {
        let steps: Vec<&Value> = of(&found, bot).iter().map(|d| &d["step"]).collect();
        let first = if bot == "a" { "turn" } else { "activation" };
        assert_eq!(steps, [first, "duplicate"], "{bot}: {found:#?}");
    }
    assert_eq!(fake.requests().len(), 2, "the redelivery was not answered");

    // Asked for nothing, it says what to ask.
    let bad = gw
        .http
        .get(format!("{}/api/why", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let said: Value = bad.json().await.unwrap();
    assert!(
        said["error"].as_str().unwrap().contains("message="),
        "{said}"
    );
}

#[tokio::test]
async fn why_names_the_budget_that_refused_a_turn() {
    let fake = FakeOpenAi::start().await;
    fake.report_usage(40, 20);
    let extra = "\n[[budgets]]\nname = \"a-hourly\"\nscope = \"bot\"\nmatch = { bot = \"a\" }\n\
                 tokens = 50\nwindow = \"1h\"\n";
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["a"], extra), &db).await;

    let served = say(&gw, "room", json!({"sender": "alice", "text": "@a one"})).await;
    let refused = say(&gw, "room", json!({"sender": "alice", "text": "@a two"})).await;
    assert_eq!(fake.requests().len(), 1, "the second call was not made");

    let found = why(&gw, &served).await;
    assert_eq!(found[0]["step"], "turn", "{found:#?}");
    let found = why(&gw, &refused).await;
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0]["step"], "budget", "{found:#?}");
    assert_eq!(found[0]["outcome"], "failed");
    assert!(
        found[0]["reason"].as_str().unwrap().contains("a-hourly"),
        "{found:#?}"
    );
}

/// The steps that stop a message before any turn, each named with its reason: a room the
/// policy does not list, an admin command, a paused bot, a bot's own message, another bot's
/// message that mentions a bot (the bot guards), a sender over the rate limit. The one turn
/// names its lane wait and the message it posted.
#[tokio::test]
async fn why_names_each_step_that_stopped_a_message() {
    let fake = FakeOpenAi::start().await;
    fake.script("a", Step::reply("@b your turn"));
    let extra = "\n[limits]\ninbound_per_sender_per_minute = 1\n\
                 \n[chats_default]\ngroup_policy = \"allowlist\"\ndm_policy = \"open\"\n\
                 \n[[chats]]\nplatform = \"local\"\nid = \"room\"\n";
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["a", "b", "c"], extra), &db).await;
    let steps = |found: &[Value], bot: &str| -> Vec<(String, String)> {
        of(found, bot)
            .iter()
            .map(|d| {
                let text = |key: &str| d[key].as_str().unwrap_or_default().to_owned();
                (text("step"), text("reason"))
            })
            .collect()
    };
    let step = |step: &str, reason: &str| vec![(step.to_owned(), reason.to_owned())];

    // A room the policy does not list: refused for every bot.
    let unlisted = say(
        &gw,
        "elsewhere",
        json!({"sender": "alice", "text": "@a hi"}),
    )
    .await;
    let found = why(&gw, &unlisted).await;
    assert_eq!(found.len(), 3, "{found:#?}");
    for d in &found {
        assert_eq!(
            (&d["step"], &d["outcome"]),
            (&json!("policy"), &json!("dropped"))
        );
        assert_eq!(d["reason"], "group_not_listed", "{d:#}");
    }

    // An admin command: answered by one account, left to it by the others.
    let pause = say(
        &gw,
        "room",
        json!({"sender": "admin", "text": "/baton pause @c"}),
    )
    .await;
    let found = why(&gw, &pause).await;
    assert_eq!(found.len(), 3, "{found:#?}");
    assert!(found.iter().all(|d| d["step"] == "admin"), "{found:#?}");
    let answered = found
        .iter()
        .filter(|d| d["reason"] == "an admin command, answered");
    assert_eq!(answered.count(), 1, "{found:#?}");

    // c is paused; b is mentioned by nobody; a answers, naming its turn and what it posted.
    let hi = say(&gw, "room", json!({"sender": "alice", "text": "@a @c hi"})).await;
    let found = why(&gw, &hi).await;
    assert_eq!(steps(&found, "c"), step("activation", "paused"));
    assert_eq!(
        steps(&found, "b"),
        step("activation", "mentions only other bots")
    );
    assert_eq!(steps(&found, "a"), step("turn", "mentioned"));
    let turn = of(&found, "a")[0];
    assert_eq!(turn["outcome"], "replied", "{turn:#}");
    assert!(
        turn["waited_ms"].as_i64().is_some(),
        "the lane wait: {turn:#}"
    );
    let said = gw.said_by("room", "a").await;
    let reply = said.iter().find(|m| m["text"] == "@b your turn").unwrap();
    assert_eq!(turn["posts"][0]["message_id"], reply["id"], "{turn:#}");

    // a's reply mentions b: a's own message to a, a bot b may not hear from to b.
    let found = why(&gw, reply["id"].as_str().unwrap()).await;
    assert_eq!(steps(&found, "a"), step("self", "the bot's own message"));
    assert_eq!(steps(&found, "b"), step("bot_guard", "bot_not_allowed"));
    assert!(found.iter().all(|d| d["sender"] == "bot:a"), "{found:#?}");

    // alice's second message to a within the minute: over the rate limit.
    let again = say(&gw, "room", json!({"sender": "alice", "text": "@a again"})).await;
    let found = why(&gw, &again).await;
    assert_eq!(
        steps(&found, "a"),
        step("rate", "the sender is over the inbound rate limit")
    );
    assert_eq!(
        fake.requests().len(),
        1,
        "only the first message was answered"
    );
    gw.stop().await;
}

/// A turn that asked another bot names the delivery: its run, target, state and reply.
#[tokio::test]
async fn why_names_the_deliveries_a_turn_made() {
    let fake = FakeOpenAi::start().await;
    let ask = json!({"target": "b", "message": "two and two?", "timeout_seconds": 20});
    fake.script("a", Step::tool_call("sessions_send", ask));
    fake.script("b", Step::reply("four"));
    fake.script("a", Step::reply("b says four"));
    let bots = [("a", "tools = [\"*\"]"), ("b", "tools = [\"*\"]")];
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_with(&fake.base_url, &bots, ""), &db).await;

    let asked = say(&gw, "room", json!({"sender": "alice", "text": "@a ask b"})).await;
    let found = why(&gw, &asked).await;
    let a = of(&found, "a");
    assert_eq!(
        (&a[0]["step"], &a[0]["outcome"]),
        (&json!("turn"), &json!("replied"))
    );
    let sent = &a[0]["deliveries"];
    assert_eq!(sent.as_array().map(Vec::len), Some(1), "{:#}", a[0]);
    let rows = gw.get("/api/deliveries").await;
    assert_eq!(
        sent[0]["run_id"], rows["deliveries"][0]["run_id"],
        "{sent:#}"
    );
    assert_eq!(
        (&sent[0]["target"], &sent[0]["state"], &sent[0]["reply"]),
        (&json!("b"), &json!("delivered"), &json!("four")),
        "{sent:#}"
    );
    assert_eq!(a[0]["posts"][0]["text"], "b says four", "{:#}", a[0]);
}
