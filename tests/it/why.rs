//! Why a message was or was not answered (SPEC 13): `GET /api/why` on messages posted into a
//! local room of two bots answered by the fake model. Each bot that received a message says
//! which step decided and why; an answered one names its turn and the message it posted.

use serde_json::{Value, json};

use crate::support::fake_openai::FakeOpenAi;
use crate::support::gateway::{TestGateway, config_text, temp_db};

/// The decisions on message `id`, as `GET /api/why` gives them.
async fn why(gw: &TestGateway, id: &str) -> Vec<Value> {
    let found = gw.get(&format!("/api/why?message={id}")).await;
    found["decisions"].as_array().cloned().unwrap_or_default()
}

/// `bot`'s decisions among `all`.
fn of<'a>(all: &'a [Value], bot: &str) -> Vec<&'a Value> {
    all.iter().filter(|d| d["bot"] == bot).collect()
}

/// Posts `text` as alice and waits for the pipeline; returns the message's id.
async fn say(gw: &TestGateway, body: Value) -> String {
    let posted = gw.post("room", body).await;
    gw.settle().await;
    posted["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn why_tells_each_bots_decision_on_a_message() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["a", "b"], ""), &db).await;

    // Mentions nobody: neither bot is woken.
    let nobody = say(&gw, json!({"sender": "alice", "text": "lunch at noon?"})).await;
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
    say(&gw, first.clone()).await;
    say(&gw, first).await;
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

    let served = say(&gw, json!({"sender": "alice", "text": "@a one"})).await;
    let refused = say(&gw, json!({"sender": "alice", "text": "@a two"})).await;
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
