//! Budgets that follow the conversation (SPEC 12), end to end: bots on the openai backend
//! answered by the fake model, which reports the `usage` each test sets. Assertions are on what
//! the fake received (was the call made?), what the room shows (one notice), the transcript and
//! `GET /api/usage`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{TestGateway, config_text, config_with, temp_db};
use crate::support::world::World;

/// `[[budgets]]` text for one budget.
fn budget(name: &str, keys: &str) -> String {
    format!("\n[[budgets]]\nname = \"{name}\"\n{keys}\n")
}

/// The budget notices `bot` posted in `room`.
async fn notices(gw: &TestGateway, room: &str, bot: &str) -> Vec<String> {
    gw.said_by(room, bot)
        .await
        .into_iter()
        .filter_map(|m| m["text"].as_str().map(str::to_owned))
        .filter(|t| t.contains("has used its budget"))
        .collect()
}

/// A human asks `bot` in `room` and the pipeline settles.
async fn ask(gw: &TestGateway, room: &str, bot: &str, text: &str) {
    gw.say(room, "alice", &format!("@{bot} {text}")).await;
    gw.settle().await;
}

/// A chat budget stops the next call once used up: one notice, no model request, and the
/// next window serves again.
#[tokio::test]
async fn a_chat_budget_stops_the_next_call_with_one_notice_until_the_window_moves() {
    let fake = FakeOpenAi::start().await;
    fake.report_usage(40, 20);
    let extra = budget(
        "room-minute",
        "scope = \"chat\"\nmatch = { chat = \"room\" }\ntokens = 100\nwindow = \"3s\"",
    );
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["a"], &extra), &db).await;

    ask(&gw, "room", "a", "one").await;
    ask(&gw, "room", "a", "two").await;
    assert_eq!(
        fake.requests().len(),
        2,
        "60 then 120 tokens: both calls were made"
    );
    ask(&gw, "room", "a", "three").await;
    ask(&gw, "room", "a", "four").await;
    assert_eq!(
        fake.requests().len(),
        2,
        "a used-up budget makes no model call"
    );
    let said = notices(&gw, "room", "a").await;
    assert_eq!(
        said,
        [
            "a has used its budget `room-minute`: 100 tokens. An admin can raise it with `/baton budget`."
        ],
        "one notice per budget and window"
    );
    let transcript = gw.transcript("bot:a:local:a:room").await;
    let refusals = transcript
        .iter()
        .filter(|e| e["kind"] == "failure" && e["meta"]["budget"] == "room-minute")
        .count();
    assert_eq!(
        refusals, 2,
        "each refused turn is recorded: {transcript:#?}"
    );
    assert!(
        gw.metrics()
            .await
            .contains("baton_budget_refusals_total{budget=\"room-minute\"} 2")
    );

    // Another chat is not this budget's.
    ask(&gw, "elsewhere", "a", "hello").await;
    assert_eq!(fake.requests().len(), 3);

    // The window rolls past the two calls: served again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    ask(&gw, "room", "a", "five").await;
    assert_eq!(fake.requests().len(), 4, "the next window serves");
    gw.stop().await;
}

/// Spend and the notice's record are in the store: after a restart the budget is still used
/// up, and the notice is not posted again.
#[tokio::test]
async fn spend_and_the_notice_survive_a_restart() {
    let fake = FakeOpenAi::start().await;
    fake.report_usage(40, 20);
    let extra = budget(
        "a-daily",
        "scope = \"bot\"\nmatch = { bot = \"a\" }\ntokens = 50\nwindow = \"1d\"",
    );
    let config = config_text(&fake.base_url, &["a"], &extra);
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config, &db).await;
    ask(&gw, "room", "a", "one").await;
    ask(&gw, "room", "a", "two").await;
    assert_eq!(fake.requests().len(), 1);
    assert_eq!(notices(&gw, "room", "a").await.len(), 1);
    gw.stop().await;

    let gw = TestGateway::start(&config, &db).await;
    ask(&gw, "room", "a", "three").await;
    assert_eq!(fake.requests().len(), 1, "still used up after the restart");
    assert_eq!(
        notices(&gw, "room", "a").await.len(),
        1,
        "the notice went out before the restart (the room keeps it); not again"
    );
    gw.stop().await;
}

/// A trigger budget follows a delegation: the target's call is refused, the sender's tool
/// result says `budget`, the sender's own next model call (after its tools ran) is checked and
/// not made either, and a new human message (a new trigger) is served.
#[tokio::test]
async fn a_trigger_budget_refuses_the_delegated_call_and_a_new_message_is_served() {
    let fake = FakeOpenAi::start().await;
    fake.report_usage(80, 20);
    fake.script(
        "a",
        Step::tool_call(
            "sessions_send",
            json!({"target": "b", "message": "review it"}),
        ),
    );
    let extra = budget("per-message", "scope = \"trigger\"\ntokens = 100");
    let gw = World::agents(&fake, &["a", "b"], &extra).await;

    ask(&gw, "room", "a", "get this reviewed").await;
    assert!(fake.requests_for("b").is_empty(), "b's call was not made");
    assert_eq!(
        fake.requests_for("a").len(),
        1,
        "a's call after its tool ran was refused too"
    );
    let transcript = gw.transcript("bot:a:local:a:room").await;
    let results: Vec<Value> = transcript
        .iter()
        .filter(|e| e["kind"] == "tool_result")
        .map(|e| serde_json::from_str(e["text"].as_str().unwrap()).unwrap())
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["status"], "refused");
    assert_eq!(results[0]["reason"], "budget");
    assert_eq!(results[0]["budget"], "per-message");
    assert!(
        transcript
            .iter()
            .any(|e| e["kind"] == "failure" && e["meta"]["budget"] == "per-message"),
        "{transcript:#?}"
    );
    assert_eq!(
        notices(&gw, "room", "b").await.len(),
        1,
        "b posts the notice in the chat the trigger came from"
    );

    // A new human message is a new trigger.
    fake.script("a", Step::reply("hello again"));
    ask(&gw, "room", "a", "hi").await;
    let said: Vec<Value> = gw.said_by("room", "a").await;
    assert_eq!(said.last().unwrap()["text"], "hello again");
    gw.stop().await;
}

/// A chain set going by one message is one trigger: its first turn uses the trigger budget up,
/// and the next participant's turn makes no model call.
#[tokio::test]
async fn a_trigger_budget_stops_a_chains_later_turn() {
    let fake = FakeOpenAi::start().await;
    fake.report_usage(80, 20);
    fake.script("a", Step::reply("first thoughts"));
    fake.script("b", Step::reply("second thoughts"));
    let extra = format!(
        "\n[chains]\nrounds = 1\n{}",
        budget("per-message", "scope = \"trigger\"\ntokens = 100")
    );
    let bots = [("a", ""), ("b", "")];
    let gw = World::start(&config_with(&fake.base_url, &bots, &extra)).await;

    gw.say("room", "admin", "/baton chain start @a @b weigh the plan")
        .await;
    gw.settle().await;
    assert_eq!(fake.requests_for("a").len(), 1, "a's turn was served");
    assert!(
        fake.requests_for("b").is_empty(),
        "b's turn is charged to the same trigger, used up"
    );
    assert_eq!(notices(&gw, "room", "b").await.len(), 1);
    gw.stop().await;
}

/// A warn budget lets every call through and tells the admins at 80 % and at 100 %, once each.
#[tokio::test]
async fn a_warn_budget_warns_twice_at_most() {
    let fake = FakeOpenAi::start().await;
    fake.report_usage(30, 15);
    let extra = budget(
        "a-soft",
        "match = { bot = \"a\" }\ntokens = 100\nwindow = \"1d\"\non_exceed = \"warn\"",
    );
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["a"], &extra), &db).await;
    for n in 0..6 {
        ask(&gw, "room", "a", &format!("call {n}")).await;
    }
    assert_eq!(fake.requests().len(), 6, "warn never stops a call");
    // The admin (`admin` on the local platform) gets each warning directly.
    let warned: Vec<String> = gw
        .said_by("admin", "a")
        .await
        .into_iter()
        .map(|m| m["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(warned.len(), 2, "{warned:#?}");
    assert!(warned[0].contains("is at 80%"), "{warned:#?}");
    assert!(warned[1].contains("is at 100%"), "{warned:#?}");
    assert!(notices(&gw, "room", "a").await.is_empty());
    gw.stop().await;
}

/// `GET /api/usage` sums exactly what the model reported, and the cost is tokens × price;
/// a streamed turn (asked with `stream_options.include_usage`) is counted like the others.
#[tokio::test]
async fn usage_sums_are_exact_and_cost_is_tokens_times_price_streamed_or_not() {
    let fake = FakeOpenAi::start().await;
    fake.report_usage(1000, 250);
    let extra = "\n[prices.\"a\"]\nprompt = 2.0\ncompletion = 8.0\n";
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["a", "b"], extra), &db).await;
    ask(&gw, "room", "a", "one").await;
    ask(&gw, "room", "a", "two").await;
    ask(&gw, "room", "b", "three").await;
    let streamed = gw
        .http
        .post(format!("{}/v1/chat/completions", gw.base))
        .json(&json!({"model": "a", "stream": true, "user": "ann",
                      "messages": [{"role": "user", "content": "stream it"}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(streamed.contains("[DONE]"), "{streamed}");
    gw.settle().await;
    let stream_request = fake.requests().last().unwrap().clone();
    assert_eq!(stream_request["stream_options"]["include_usage"], true);

    let usage = gw.get("/api/usage?group_by=bot").await;
    let rows = usage["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{usage}");
    let a = &rows[0];
    assert_eq!(a["bot"], "a");
    assert_eq!(
        (
            a["prompt_tokens"].as_i64(),
            a["completion_tokens"].as_i64(),
            a["total_tokens"].as_i64()
        ),
        (Some(3000), Some(750), Some(3750)),
        "three calls of a, one of them streamed"
    );
    let cost = a["cost_usd"].as_f64().unwrap();
    let expected = (3000.0 * 2.0 + 750.0 * 8.0) / 1_000_000.0;
    assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");
    assert_eq!(a["estimated"], false);
    let b = &rows[1];
    assert_eq!(
        (b["bot"].as_str(), b["total_tokens"].as_i64()),
        (Some("b"), Some(1250))
    );
    assert_eq!(b["cost_usd"], Value::Null, "b's model has no price");

    let by_chat = gw.get("/api/usage?group_by=chat&bot=a").await;
    assert_eq!(by_chat["rows"][0]["chat"], "local:room");
    assert_eq!(by_chat["rows"][0]["total_tokens"], 2500);
    let metrics = gw.metrics().await;
    assert!(
        metrics.contains("baton_tokens_total{bot=\"a\",kind=\"prompt\"} 3000"),
        "{metrics}"
    );
    assert!(metrics.contains("baton_tokens_total{bot=\"a\",kind=\"completion\"} 750"));
    let bad = gw.get("/api/usage?group_by=room").await;
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .contains("bot, chat, trigger or model")
    );
    gw.stop().await;
}

/// `/baton budget` shows the chat's budgets, `/baton budget set` raises one (audited), and the
/// bot is served again at once.
#[tokio::test]
async fn an_admin_sees_the_budget_and_raises_it() {
    let fake = FakeOpenAi::start().await;
    fake.report_usage(40, 20);
    let extra = budget(
        "a-daily",
        "match = { bot = \"a\" }\ntokens = 50\nwindow = \"1d\"",
    );
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config_text(&fake.base_url, &["a"], &extra), &db).await;
    ask(&gw, "room", "a", "one").await;
    ask(&gw, "room", "a", "two").await;
    assert_eq!(fake.requests().len(), 1);

    gw.say("room", "admin", "/baton budget").await;
    gw.settle().await;
    let last = |said: Vec<Value>| said.last().unwrap()["text"].as_str().unwrap().to_owned();
    let shown = last(gw.said_by("room", "a").await);
    assert!(
        shown.contains(
            "a-daily (bot): 60 tokens of 50 tokens (120%), rolling 1d, frees up in 23h 59m"
        ),
        "{shown}"
    );

    gw.say("room", "admin", "/baton budget set a-daily tokens 1000")
        .await;
    gw.settle().await;
    assert_eq!(
        last(gw.said_by("room", "a").await),
        "Budget `a-daily`: tokens limit is now 1000."
    );
    gw.say("room", "admin", "/baton budget set nope tokens 1")
        .await;
    gw.settle().await;
    assert!(last(gw.said_by("room", "a").await).contains("no budget is named `nope`"));
    let audit = gw.gateway.store().audit_log(10).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|a| a.command == "/baton budget set a-daily tokens 1000" && a.outcome == "ok"),
        "{audit:#?}"
    );

    ask(&gw, "room", "a", "three").await;
    assert_eq!(fake.requests().len(), 2, "the raised limit serves again");
    gw.stop().await;
}
