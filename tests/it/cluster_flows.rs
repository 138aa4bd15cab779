//! Flows between instances (README "Running several instances"): two gateways in this process
//! on one PostgreSQL database (the test support's throwaway cluster), `baton-a` and `baton-b`,
//! each bot with a Slack Socket Mode account on the fake Slack, answered by one scripted fake
//! model. The accounts spread over the instances (asker on a, helper on b), so a delivery from
//! asker to helper crosses from a to b and its reply comes back through the database's
//! notifications. Every wait is on a condition with a deadline.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::fake_slack::FakeSlack;
use crate::support::gateway::{TestGateway, temp_db};
use crate::support::instances::{held, until};
use crate::support::postgres::{URL_ENV, database};

const ASKER_ROOM: &str = "bot:asker:local:asker:room";

/// asker and helper, each with a Slack socket account; leases of 3 s (the shortest), so the
/// second instance gets its share within a couple of seconds.
fn config(id: &str, model: &FakeOpenAi, slack: &FakeSlack) -> String {
    let mut text = format!(
        "[gateway]\ndrain_seconds = 1\ndatabase_url_env = \"{URL_ENV}\"\nsilent_token = \"NO_REPLY\"\n\n\
         [cluster]\ninstance_id = \"{id}\"\nlease_seconds = 3\n\n\
         [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n\n\
         [admins]\nlocal = [\"admin\"]\n\n[chains]\nrounds = 1\n"
    );
    for bot in ["asker", "helper"] {
        let upper = bot.to_uppercase();
        text.push_str(&format!(
            "\n[[bots]]\nid = \"{bot}\"\nname = \"{bot}\"\nbackend = \"openai\"\nmodel = \"{bot}\"\n\
             base_url = \"{}\"\ntools = [\"*\"]\n\n\
             [[accounts]]\nbot = \"{bot}\"\nplatform = \"slack\"\nmode = \"socket\"\n\
             app_token_env = \"{upper}_SLACK_APP_TOKEN\"\nbot_token_env = \"{upper}_SLACK_BOT_TOKEN\"\n\
             api_url = \"{}\"\n",
            model.base_url, slack.api_url
        ));
    }
    text
}

/// Two instances on one fresh database, each holding one of the two socket accounts.
struct Pair {
    a: TestGateway,
    b: TestGateway,
    /// The database's connection settings.
    url: String,
    _dirs: [tempfile::TempDir; 2],
}

/// Instance `id` on the database at `url`, with its own (unused) SQLite path.
async fn instance(
    id: &str,
    url: &str,
    model: &FakeOpenAi,
    slack: &FakeSlack,
) -> (TestGateway, tempfile::TempDir) {
    let url = url.to_owned();
    let env = move |name: &str| -> Option<String> {
        if name == URL_ENV {
            return Some(url.clone());
        }
        let (bot, rest) = name.split_once("_SLACK_")?;
        let bot = bot.to_lowercase();
        match rest {
            "APP_TOKEN" => Some(format!("xapp-{bot}")),
            "BOT_TOKEN" => Some(format!("xoxb-{bot}")),
            _ => None,
        }
    };
    let (dir, db) = temp_db();
    let gw = TestGateway::start_with_env(&config(id, model, slack), &db, &env).await;
    (gw, dir)
}

impl Pair {
    async fn start(model: &FakeOpenAi, slack: &FakeSlack) -> Pair {
        Pair::start_on(&database().await, model, slack).await
    }

    /// [`Pair::start`] on the database at `url`.
    async fn start_on(url: &str, model: &FakeOpenAi, slack: &FakeSlack) -> Pair {
        slack.app("asker", "U_ASKER");
        slack.app("helper", "U_HELPER");
        let (a, dir_a) = instance("baton-a", url, model, slack).await;
        let (b, dir_b) = instance("baton-b", url, model, slack).await;
        until(
            "each instance holds one account (asker on a, helper on b)",
            async || {
                held(&a.get("/api/cluster").await)
                    == [
                        ("baton-a".to_owned(), vec!["slack/asker".to_owned()]),
                        ("baton-b".to_owned(), vec!["slack/helper".to_owned()]),
                    ]
            },
        )
        .await;
        Pair {
            a,
            b,
            url: url.to_owned(),
            _dirs: [dir_a, dir_b],
        }
    }

    async fn stop(self) {
        tokio::join!(self.a.stop(), self.b.stop());
    }
}

/// The instances `bot`'s model calls ran on, oldest first (each call's usage row names its
/// instance).
async fn ran_on(url: &str, bot: &str) -> Vec<String> {
    let (url, bot) = (url.to_owned(), bot.to_owned());
    tokio::task::spawn_blocking(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let rows = client
            .query(
                "SELECT instance FROM usage WHERE bot = $1 ORDER BY id",
                &[&bot],
            )
            .unwrap();
        rows.iter().map(|row| row.get(0)).collect()
    })
    .await
    .unwrap()
}

fn send(args: Value) -> Step {
    Step::tool_call("sessions_send", args)
}

/// The one delivery in the shared database.
async fn the_delivery(gw: &TestGateway) -> Value {
    let listed = gw.get("/api/deliveries").await;
    let rows = listed["deliveries"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{listed}");
    rows[0].clone()
}

#[tokio::test]
async fn a_send_from_a_bot_on_a_runs_on_the_targets_home_b_and_returns_the_reply() {
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    let ask = json!({"target": "helper", "message": "ping", "timeout_seconds": 20});
    model.script("asker", send(ask));
    model.script("helper", Step::reply("pong"));
    model.script("asker", Step::reply("helper says pong"));
    let pair = Pair::start(&model, &slack).await;

    pair.a.say("room", "alice", "@asker ask helper").await;
    until("asker answers in a's room", async || {
        !pair.a.said_by("room", "asker").await.is_empty()
    })
    .await;

    let results = model.tool_results("asker");
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["status"], "ok", "{results:?}");
    assert_eq!(results[0]["reply"], "pong", "{results:?}");
    let said = pair.a.said_by("room", "asker").await;
    assert_eq!(said[0]["text"], "helper says pong");
    let row = the_delivery(&pair.b).await;
    assert_eq!(row["state"], "delivered", "{row}");
    assert_eq!(
        row["runner"], "baton-b",
        "the target's turn ran on its home, b: {row}"
    );
    pair.stop().await;
}

#[tokio::test]
async fn a_late_reply_from_b_reaches_the_senders_session_on_a() {
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    let ask = json!({"target": "helper", "message": "slow job", "timeout_seconds": 1});
    model.script("asker", send(ask));
    model.script("asker", Step::reply("helper is still on it"));
    model.script(
        "helper",
        Step::Delay(
            Duration::from_millis(2500),
            Box::new(Step::reply("slow answer")),
        ),
    );
    model.script("asker", Step::reply("helper finally answered"));
    let pair = Pair::start(&model, &slack).await;

    pair.a.say("room", "alice", "@asker run the slow job").await;
    until(
        "the late reply is pushed and asker answers it in a's room",
        async || pair.a.said_by("room", "asker").await.len() == 2,
    )
    .await;

    let results = model.tool_results("asker");
    assert_eq!(results[0]["status"], "timeout", "{results:?}");
    let run_id = results[0]["run_id"].as_str().unwrap().to_owned();
    let transcript = pair.a.transcript(ASKER_ROOM).await;
    let late: Vec<&Value> = transcript
        .iter()
        .filter(|e| e["kind"] == "inbound" && e["speaker"] == "bot:helper")
        .collect();
    assert_eq!(
        late.len(),
        1,
        "the late reply reached asker's session: {transcript:#?}"
    );
    assert!(late[0]["text"].as_str().unwrap().contains("slow answer"));
    assert_eq!(late[0]["run_id"], format!("reply:{run_id}"));
    // The push is marked done once the woken turn has answered.
    until("the push is on record", async || {
        the_delivery(&pair.a).await["notify"] == "done"
    })
    .await;
    let row = the_delivery(&pair.a).await;
    assert_eq!(
        (
            row["state"].as_str(),
            row["notify"].as_str(),
            row["runner"].as_str()
        ),
        (Some("delivered"), Some("done"), Some("baton-b")),
        "ran on b, its late reply pushed to asker's session: {row}"
    );
    let ran = ran_on(&pair.url, "asker").await;
    assert!(
        !ran.is_empty() && ran.iter().all(|instance| instance == "baton-a"),
        "asker's woken turn ran on its home a, not on b: {ran:?}"
    );
    pair.stop().await;
}

/// A local room is the database's: a person's post through b, answered by asker, is in the
/// room read through either instance, each message once, and still there for an instance
/// started after both stopped.
#[tokio::test]
async fn a_local_room_is_shared_by_every_instance_and_outlasts_them() {
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    model.script("asker", Step::reply("hello from asker"));
    let pair = Pair::start(&model, &slack).await;

    let posted = pair.b.say("lobby", "alice", "@asker hi").await;
    until("asker's reply shows through a", async || {
        pair.a.said_by("lobby", "asker").await.len() == 1
    })
    .await;
    let through_a = pair.a.messages("lobby").await;
    assert_eq!(through_a, pair.b.messages("lobby").await, "one room");
    let texts = |messages: &[Value]| -> Vec<String> {
        let text = |m: &Value| m["text"].as_str().unwrap().to_owned();
        messages.iter().map(text).collect()
    };
    assert_eq!(texts(&through_a), ["@asker hi", "hello from asker"]);
    assert_eq!(through_a[0]["id"], posted["id"]);
    assert_eq!(
        (through_a[0]["seq"].as_u64(), through_a[1]["seq"].as_u64()),
        (Some(1), Some(2))
    );

    let url = pair.url.clone();
    pair.stop().await;
    let (c, _dir) = instance("baton-c", &url, &model, &slack).await;
    assert_eq!(c.messages("lobby").await, through_a, "kept across restarts");
    c.stop().await;
}

/// One session's turns, started on both instances at once: the second reaches the model only
/// after the first has finished. The fake model holds each request until two are in flight
/// (or 10 s pass): were the turns to overlap, both would be in flight together.
#[tokio::test]
async fn two_turns_of_one_session_on_two_instances_never_overlap() {
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    model.script("asker", Step::reply("first"));
    model.script("asker", Step::reply("second"));
    let pair = Pair::start(&model, &slack).await;
    model.hold_until_in_flight(2);

    // The same session on both: local room `room` of asker (the room, the session and its
    // transcript are the database's).
    let (one, two) = tokio::join!(
        pair.a.say("room", "alice", "@asker one"),
        pair.b.say("room", "bob", "@asker two"),
    );
    assert!(one["id"].is_string() && two["id"].is_string());
    until("both turns answered", async || {
        model.requests_for("asker").len() == 2 && pair.a.said_by("room", "asker").await.len() == 2
    })
    .await;
    assert_eq!(
        model.max_in_flight(),
        1,
        "the second turn waited for the first, across instances"
    );
    pair.stop().await;
}

/// An answer to asker's question, received by b (a human answering in the chat through b's
/// local room), wakes asker on its home a: the question is answered on record, asker's turn
/// hears it and answers into the room, where b shows it too (the rooms are the database's).
#[tokio::test]
async fn an_escalation_answer_received_on_b_wakes_the_asker() {
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    let question = json!({"message": "Which region should I deploy to?"});
    model.script("asker", Step::tool_call("escalate_to_user", question));
    model.script("asker", Step::reply("asked"));
    model.script("asker", Step::reply("deploying to eu-west"));
    let pair = Pair::start(&model, &slack).await;

    pair.a.say("room", "alice", "@asker deploy it").await;
    until("the question is asked", async || {
        pair.a.said_by("room", "asker").await.len() >= 2
    })
    .await;
    pair.b.say("room", "alice", "eu-west").await;
    until("asker is woken by the answer", async || {
        model.requests_for("asker").len() == 3
    })
    .await;
    let woke = model.woken_by("asker");
    assert!(woke[2].contains("eu-west"), "{woke:?}");
    until("asker's answer is posted in a's room", async || {
        pair.a
            .said_by("room", "asker")
            .await
            .iter()
            .any(|m| m["text"] == "deploying to eu-west")
    })
    .await;
    assert_eq!(
        ran_on(&pair.url, "asker").await.last().map(String::as_str),
        Some("baton-a"),
        "the woken turn ran on a, not on b, which received the answer"
    );
    assert_eq!(
        pair.b.messages("room").await,
        pair.a.messages("room").await,
        "one room, read through either instance"
    );
    let answered = pair
        .a
        .gateway
        .store()
        .escalations(Default::default())
        .await
        .unwrap();
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].state.as_str(), "answered", "{answered:?}");
    pair.stop().await;
}

/// A chain with no coordinator between helper and asker, posting in asker's local `room`.
fn chain_in_room(name: &str) -> baton::store::NewChain {
    baton::store::NewChain {
        name: name.into(),
        coordinator: None,
        participants: vec!["helper".parse().unwrap(), "asker".parse().unwrap()],
        origin: baton::store::ChainOrigin {
            platform: baton_contract::Platform::Local,
            chat: "room".into(),
            thread: None,
            anchor: None,
            account: "asker".into(),
        },
        started_by: "admin".into(),
        trigger: None,
    }
}

/// `id`'s chain and its log, as `gw` shows them.
async fn chain_of(gw: &TestGateway, id: &str) -> (Value, Vec<Value>) {
    let one = gw.get(&format!("/api/chains/{id}")).await;
    let messages = one["messages"].as_array().cloned().unwrap_or_default();
    (one["chain"].clone(), messages)
}

/// How many times a log says its turn was given again after a restart.
fn restarts(log: &[Value]) -> usize {
    log.iter()
        .filter(|m| {
            m["kind"] == "system"
                && m["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("baton restarted"))
        })
        .count()
}

/// The posts in a chain's log, as `(sender, content)`.
fn posts(log: &[Value]) -> Vec<(String, String)> {
    log.iter()
        .filter(|m| m["kind"] == "message")
        .map(|m| {
            (
                m["sender"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A starting instance gives a chain's turn again only when the instance running it is gone.
/// `baton-gone` gave helper the turn and died (its registration is gone): a, starting, picks
/// that chain up once, handing the turn on to asker without running helper's lost turn. Then a
/// chain started in a's room has helper's turn running (held in the model) when c starts: c
/// leaves it alone, and the turn ends as it would have without c.
#[tokio::test]
async fn a_starting_instance_gives_a_chains_turn_again_only_when_its_instance_is_gone() {
    use baton::store::{Handoff, PgUrl, Store};
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    let url = database().await;
    let seed = Store::open_postgres(PgUrl::parse(&url).unwrap())
        .await
        .unwrap();
    seed.instance_register("baton-gone", "test", 0)
        .await
        .unwrap();
    let left = seed
        .create_chain(chain_in_room("left behind"), 1)
        .await
        .unwrap();
    let handoff = Handoff {
        chain: left.id.clone(),
        by: "baton".into(),
        to: "helper".parse().unwrap(),
        prompt: "go".into(),
        add: false,
        max_rounds: 1,
    };
    seed.chain_hand(handoff, 2).await.unwrap();
    seed.instance_deregister("baton-gone").await.unwrap();
    seed.close().await.unwrap();
    model.script("asker", Step::reply("picking up"));

    let pair = Pair::start_on(&url, &model, &slack).await;
    until("the left chain goes on from asker's turn", async || {
        chain_of(&pair.a, &left.id).await.0["state"] == "completed"
    })
    .await;
    let (_, log) = chain_of(&pair.a, &left.id).await;
    assert_eq!(restarts(&log), 1, "picked up once: {log:#?}");
    assert_eq!(posts(&log), [("asker".into(), "picking up".into())]);
    assert!(
        model.requests_for("helper").is_empty(),
        "helper's lost turn is not run again"
    );

    model.script("helper", Step::reply("h1"));
    model.script("asker", Step::reply("a1"));
    model.hold();
    pair.a
        .say("room", "admin", "/baton chain start @helper @asker name it")
        .await;
    until("helper's turn is running", async || {
        model.requests_for("helper").len() == 1
    })
    .await;
    let chains = pair.a.get("/api/chains").await;
    let running = chains["chains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] != left.id.as_str())
        .expect("the new chain")["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // c's start looks for chains left by gone instances before it returns.
    let (c, _dir_c) = instance("baton-c", &url, &model, &slack).await;
    let (_, log) = chain_of(&c, &running).await;
    assert_eq!(restarts(&log), 0, "a live instance's chain: {log:#?}");
    model.release();
    until("the running chain completes", async || {
        chain_of(&c, &running).await.0["state"] == "completed"
    })
    .await;
    let (_, log) = chain_of(&c, &running).await;
    assert_eq!(restarts(&log), 0, "{log:#?}");
    assert_eq!(
        posts(&log),
        [
            ("helper".into(), "h1".into()),
            ("asker".into(), "a1".into())
        ],
        "each turn ran once"
    );
    assert_eq!(model.requests_for("helper").len(), 1);
    tokio::join!(c.stop(), pair.stop());
}
