//! Chains end to end in a local group room: a real gateway on a store file, bots
//! on a scripted fake model. Assertions are on what each bot's model was sent (its context, how
//! many turns it took), the chain's log (`/api/chains/<id>`) and what the room shows.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::chain_steps::on_chain;
use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{DEADLINE, TestGateway, config_with, temp_db};

/// The coordinator may steer chains; the others may post with `chain_message`.
fn bots() -> Vec<(&'static str, &'static str)> {
    vec![
        ("snark", "tools = [\"chain_*\"]"),
        ("caid", "tools = [\"chain_message\"]"),
        ("sec", "tools = [\"chain_message\"]"),
        ("doc", "tools = [\"chain_message\"]"),
    ]
}

fn config(fake: &FakeOpenAi, chains: &str) -> String {
    config_with(&fake.base_url, &bots(), &format!("\n[chains]\n{chains}\n"))
}

/// What woke each turn of `model`: the last user line of its requests, once per turn (the
/// requests of one turn's tool rounds share it).
fn woken_by(fake: &FakeOpenAi, model: &str) -> Vec<String> {
    let mut woken = fake.woken_by(model);
    woken.dedup();
    woken
}

/// The only chain in the store, with its messages.
async fn the_chain(gw: &TestGateway) -> (Value, Vec<Value>) {
    let all = gw.get("/api/chains").await;
    let chains = all["chains"].as_array().cloned().unwrap_or_default();
    assert_eq!(chains.len(), 1, "{all:#}");
    let id = chains[0]["id"].as_str().unwrap();
    let one = gw.get(&format!("/api/chains/{id}")).await;
    let messages = one["messages"].as_array().cloned().unwrap();
    (one["chain"].clone(), messages)
}

/// `(kind, sender, recipient, turn)` of each log entry.
fn shape(messages: &[Value]) -> Vec<(String, String, String, i64)> {
    messages
        .iter()
        .map(|m| {
            (
                m["kind"].as_str().unwrap().to_owned(),
                m["sender"].as_str().unwrap().to_owned(),
                m["recipient"].as_str().unwrap_or("").to_owned(),
                m["turn"].as_i64().unwrap(),
            )
        })
        .collect()
}

fn entry(kind: &str, sender: &str, to: &str, turn: i64) -> (String, String, String, i64) {
    (kind.into(), sender.into(), to.into(), turn)
}

/// The room's texts by `author`.
async fn said_by(gw: &TestGateway, author: &str) -> Vec<String> {
    gw.said_by("room", author)
        .await
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_owned())
        .collect()
}

/// What `bot` said in the room in its chain turns: without its answers to `/baton chain`
/// commands, which come from whichever bot in the room claimed the command first.
async fn turns_said_by(gw: &TestGateway, bot: &str) -> Vec<String> {
    said_by(gw, bot)
        .await
        .into_iter()
        .filter(|text| !text.starts_with("Started chain ") && !text.starts_with("Stopped chain "))
        .collect()
}

#[tokio::test]
async fn a_coordinator_and_three_bots_take_turns_and_chain_close_completes_it() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "snark",
        Step::tool_call(
            "chain_create",
            json!({"name": "launch review", "participants": ["caid", "sec"]}),
        ),
    );
    fake.script(
        "snark",
        on_chain(
            "chain_pass",
            json!({"bot": "caid", "prompt": "What are the risks?"}),
        ),
    );
    fake.script("snark", Step::reply("NO_REPLY"));
    fake.script("caid", Step::reply("The migration is the risk."));
    fake.script(
        "snark",
        on_chain(
            "chain_pass",
            json!({"bot": "sec", "prompt": "How do we mitigate it?"}),
        ),
    );
    fake.script("snark", Step::reply("NO_REPLY"));
    fake.script("sec", Step::reply("Run it on a canary first."));
    fake.script(
        "snark",
        on_chain(
            "chain_add",
            json!({"bot": "doc", "prompt": "Write the plan down."}),
        ),
    );
    fake.script("snark", Step::reply("NO_REPLY"));
    fake.script(
        "doc",
        on_chain(
            "chain_message",
            json!({"content": "Runbook: canary, then everyone."}),
        ),
    );
    fake.script("doc", Step::reply("done, posted it"));
    fake.script("snark", on_chain("chain_status", json!({})));
    fake.script(
        "snark",
        on_chain(
            "chain_close",
            json!({"summary": "reviewed and written down"}),
        ),
    );
    fake.script("snark", Step::reply("NO_REPLY"));
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config(&fake, "turn_timeout_seconds = 20"), &db).await;

    gw.say(
        "room",
        "alice",
        "@snark run a review of the launch with the others",
    )
    .await;
    gw.settle().await;

    let (chain, messages) = the_chain(&gw).await;
    assert_eq!(chain["state"], "completed", "{chain:#}");
    assert_eq!(chain["coordinator"], "snark");
    assert_eq!(chain["participants"], json!(["caid", "sec", "doc"]));
    assert_eq!(
        shape(&messages),
        [
            entry("system", "baton", "", 0),
            entry("handoff", "snark", "caid", 1),
            entry("message", "caid", "", 1),
            entry("handoff", "snark", "sec", 3),
            entry("message", "sec", "", 3),
            entry("handoff", "snark", "doc", 5),
            entry("message", "doc", "", 5),
            entry("system", "baton", "", 6),
        ],
        "after each post the turn went back to snark, who handed it on: {messages:#?}"
    );

    // Each bot spoke once, on its turn, and saw everything said before it.
    assert_eq!(fake.requests_for("caid").len(), 1);
    assert_eq!(fake.requests_for("sec").len(), 1);
    assert_eq!(
        fake.requests_for("doc").len(),
        2,
        "a tool call, then its last word"
    );
    let sec_saw = &woken_by(&fake, "sec")[0];
    assert!(
        sec_saw.contains("caid: The migration is the risk."),
        "{sec_saw}"
    );
    assert!(sec_saw.contains("It is your turn (sec, turn 3). How do we mitigate it?"));
    let doc_saw = &woken_by(&fake, "doc")[0];
    let caid_at = doc_saw
        .find("caid: The migration is the risk.")
        .expect("caid's post");
    let sec_at = doc_saw
        .find("sec: Run it on a canary first.")
        .expect("sec's post");
    assert!(caid_at < sec_at, "in order: {doc_saw}");
    // snark was woken after every post, with the news and the whole chain.
    let snark_woke = woken_by(&fake, "snark");
    let back: Vec<&String> = snark_woke
        .iter()
        .filter(|w| w.contains("You coordinate this chain and the turn is yours"))
        .collect();
    assert_eq!(back.len(), 3, "{snark_woke:#?}");
    assert!(back[0].contains("caid posted."));
    assert!(back[2].contains("doc: Runbook: canary, then everyone."));
    let status = fake
        .tool_results("snark")
        .into_iter()
        .find(|r| r["messages"].is_array())
        .expect("chain_status answered");
    assert_eq!(status["holder"], "snark");
    assert_eq!(
        status["participants"],
        json!(["caid", "sec", "doc"]),
        "doc joined"
    );
    assert_eq!(status["messages"].as_array().unwrap().len(), 7);
    let doc_results = fake.tool_results("doc");
    assert_eq!(doc_results[0]["status"], "ok", "{doc_results:?}");
    assert_eq!(doc_results[0]["holder"], "snark");

    // The room shows each post once, under its bot's own name, all answering the announcement.
    assert_eq!(said_by(&gw, "caid").await, ["The migration is the risk."]);
    assert_eq!(said_by(&gw, "sec").await, ["Run it on a canary first."]);
    assert_eq!(
        said_by(&gw, "doc").await,
        ["Runbook: canary, then everyone."],
        "doc's last word after posting is not posted again"
    );
    let snark_lines = gw.said_by("room", "snark").await;
    let announcement = snark_lines
        .iter()
        .find(|m| m["text"].as_str().unwrap().starts_with("Chain ch-"))
        .expect("the chain was announced");
    let anchor = announcement["id"].clone();
    for bot in ["caid", "sec", "doc"] {
        for m in gw.said_by("room", bot).await {
            assert_eq!(
                m["reply_to"], anchor,
                "{bot}'s post follows the announcement"
            );
        }
    }
    assert!(
        snark_lines.iter().any(|m| m["text"]
            .as_str()
            .unwrap()
            .contains("completed: reviewed and written down")),
        "{snark_lines:#?}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_non_holders_chain_message_is_refused_with_the_reason() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "snark",
        Step::tool_call(
            "chain_create",
            json!({"name": "naming", "participants": ["caid"]}),
        ),
    );
    fake.script("snark", Step::reply("Chain started; I hold the turn."));
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config(&fake, ""), &db).await;
    gw.say("room", "alice", "@snark start a naming chain").await;
    gw.settle().await;
    let (chain, _) = the_chain(&gw).await;
    let id = chain["id"].as_str().unwrap().to_owned();

    fake.script(
        "caid",
        Step::tool_call(
            "chain_message",
            json!({"chain": id, "content": "me first!"}),
        ),
    );
    fake.script("caid", Step::reply("I could not post."));
    gw.say("room", "alice", "@caid say something in the chain")
        .await;
    gw.settle().await;

    let results = fake.tool_results("caid");
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["status"], "refused");
    assert_eq!(results[0]["reason"], "not-holder");
    let why = results[0]["message"].as_str().unwrap();
    assert!(why.contains("snark holds turn 0"), "{why}");
    let (_, messages) = the_chain(&gw).await;
    assert!(
        messages.iter().all(|m| m["kind"] != "message"),
        "nothing was posted in the chain: {messages:#?}"
    );
    assert!(!said_by(&gw, "caid").await.contains(&"me first!".to_owned()));
    // The refusal is counted where admins look for what the guards did lately.
    gw.say("room", "admin", "/baton limits").await;
    gw.settle().await;
    let room = gw.messages("room").await;
    let limits = room
        .iter()
        .find_map(|m| {
            m["text"]
                .as_str()
                .filter(|t| t.starts_with("Limits in local:room"))
        })
        .expect("limits answered");
    assert!(limits.contains("chain/not-holder ×1"), "{limits}");
    gw.stop().await;
}

#[tokio::test]
async fn a_stalled_turn_times_out_back_to_the_coordinator() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "snark",
        on_chain("chain_pass", json!({"bot": "caid", "prompt": "Go."})),
    );
    fake.script("snark", Step::reply("NO_REPLY"));
    fake.script(
        "caid",
        Step::Delay(Duration::from_secs(4), Box::new(Step::reply("too late"))),
    );
    fake.script("snark", on_chain("chain_close", json!({})));
    fake.script("snark", Step::reply("NO_REPLY"));
    let (_dir, db) = temp_db();
    let chains = "coordinator = \"snark\"\nturn_timeout_seconds = 1";
    let gw = TestGateway::start(&config(&fake, chains), &db).await;

    gw.say("room", "admin", "/baton chain start @caid @sec pick a name")
        .await;
    gw.settle().await;

    let (chain, messages) = the_chain(&gw).await;
    assert_eq!(chain["state"], "completed", "{chain:#} {messages:#?}");
    let timed_out = messages
        .iter()
        .find(|m| m["kind"] == "system" && m["turn"] == 1)
        .expect("a system entry for the stalled turn");
    assert_eq!(timed_out["content"], "caid's turn timed out after 1 s");
    let snark_woke = woken_by(&fake, "snark");
    assert_eq!(
        snark_woke.len(),
        2,
        "the kick-off, then the hand-back: {snark_woke:#?}"
    );
    assert!(snark_woke[0].contains("admin started this chain: \"pick a name\""));
    assert!(snark_woke[1].contains("caid's turn timed out after 1 s"));
    assert!(
        !said_by(&gw, "caid").await.contains(&"too late".to_owned()),
        "a turn past its time is not posted"
    );
    assert!(
        fake.requests_for("sec").is_empty(),
        "sec was never given the turn"
    );
    gw.stop().await;
}

#[tokio::test]
async fn the_round_cap_closes_the_chain() {
    let fake = FakeOpenAi::start().await;
    for _ in 0..2 {
        fake.script(
            "snark",
            on_chain("chain_pass", json!({"bot": "caid", "prompt": "Again."})),
        );
        fake.script("snark", Step::reply("NO_REPLY"));
    }
    fake.script("caid", Step::reply("first and only"));
    let (_dir, db) = temp_db();
    let chains = "coordinator = \"snark\"\nmax_rounds = 1";
    let gw = TestGateway::start(&config(&fake, chains), &db).await;

    gw.say("room", "admin", "/baton chain start @caid loop forever")
        .await;
    gw.settle().await;

    let (chain, _) = the_chain(&gw).await;
    assert_eq!(chain["state"], "capped", "{chain:#}");
    assert!(
        chain["closed_reason"]
            .as_str()
            .unwrap()
            .contains("max_rounds = 1")
    );
    let results = fake.tool_results("snark");
    assert_eq!(results.last().unwrap()["status"], "closed", "{results:?}");
    assert_eq!(results.last().unwrap()["state"], "capped");
    assert_eq!(turns_said_by(&gw, "caid").await, ["first and only"]);
    assert_eq!(fake.requests_for("caid").len(), 1, "no second round");
    gw.stop().await;
}

#[tokio::test]
async fn without_a_coordinator_baton_goes_round_robin_then_closes() {
    let fake = FakeOpenAi::start().await;
    for (bot, said) in [("caid", "c1"), ("sec", "s1"), ("caid", "c2"), ("sec", "s2")] {
        fake.script(bot, Step::reply(said));
    }
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config(&fake, "rounds = 2"), &db).await;

    gw.say(
        "room",
        "admin",
        "/baton chain start @caid @sec name the project",
    )
    .await;
    gw.settle().await;

    let (chain, messages) = the_chain(&gw).await;
    assert_eq!(chain["state"], "completed", "{chain:#}");
    assert_eq!(chain["coordinator"], Value::Null, "baton coordinates");
    let posts: Vec<(String, String)> = messages
        .iter()
        .filter(|m| m["kind"] == "message")
        .map(|m| {
            (
                m["sender"].as_str().unwrap().into(),
                m["content"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        posts,
        [
            ("caid".into(), "c1".into()),
            ("sec".into(), "s1".into()),
            ("caid".into(), "c2".into()),
            ("sec".into(), "s2".into())
        ]
    );
    let second = &woken_by(&fake, "caid")[1];
    assert!(
        second.contains("Round 2 of 2. The topic: name the project"),
        "{second}"
    );
    assert!(
        second.contains("caid: c1") && second.contains("sec: s1"),
        "{second}"
    );
    assert!(
        messages.last().unwrap()["content"]
            .as_str()
            .unwrap()
            .contains("every participant had its turn (2 rounds)")
    );
    // The admin's command was answered first; the posts follow it, under each bot's name.
    let room = gw.messages("room").await;
    let command = room.iter().find(|m| m["author"] == "admin").unwrap();
    let answer = room
        .iter()
        .position(|m| m["text"].as_str().unwrap().starts_with("Started chain ch-"))
        .expect("the command was answered");
    let first_post = room.iter().position(|m| m["text"] == "c1").unwrap();
    assert!(answer < first_post, "{room:#?}");
    assert_eq!(room[first_post]["author"], "caid");
    assert_eq!(room[first_post]["reply_to"], command["id"]);
    gw.stop().await;
}

#[tokio::test]
async fn any_human_in_the_chat_can_stop_a_chain_and_a_running_turn_posts_nothing() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "caid",
        Step::Delay(
            Duration::from_secs(2),
            Box::new(Step::reply("still talking")),
        ),
    );
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config(&fake, ""), &db).await;

    gw.say(
        "room",
        "admin",
        "/baton chain start @caid @sec talk it over",
    )
    .await;
    fake.wait_for_requests(1, DEADLINE).await;
    gw.say("room", "alice", "ok that is enough, /baton chain stop")
        .await;
    gw.settle().await;

    let (chain, messages) = the_chain(&gw).await;
    assert_eq!(chain["state"], "stopped", "{chain:#}");
    assert!(
        messages.iter().all(|m| m["kind"] != "message"),
        "{messages:#?}"
    );
    assert!(
        turns_said_by(&gw, "caid").await.is_empty(),
        "the running turn posted nothing"
    );
    assert!(fake.requests_for("sec").is_empty(), "nothing new started");
    let answered = gw
        .messages("room")
        .await
        .iter()
        .any(|m| m["text"].as_str().unwrap().starts_with("Stopped chain ch-"));
    assert!(answered);
    let audit = gw.gateway.store().audit_log(10).await.unwrap();
    assert_eq!(audit[0].user, "alice");
    assert_eq!(audit[0].command, "/baton chain stop");
    assert_eq!(audit[0].outcome, "ok");
    gw.stop().await;
}

#[tokio::test]
async fn a_chain_interrupted_by_a_restart_goes_on_from_where_its_turn_stood() {
    use baton::store::{ChainOrigin, Handoff, NewChain, Store};
    let fake = FakeOpenAi::start().await;
    fake.script("sec", Step::reply("picking up"));
    let (_dir, db) = temp_db();
    // The last run: baton gave caid the turn, and stopped before caid answered.
    let store = Store::open(db.to_str().unwrap()).await.unwrap();
    let new = NewChain {
        name: "interrupted".into(),
        coordinator: None,
        participants: vec!["caid".parse().unwrap(), "sec".parse().unwrap()],
        origin: ChainOrigin {
            platform: baton_contract::Platform::Local,
            chat: "room".into(),
            thread: None,
            anchor: None,
            account: "snark".into(),
        },
        started_by: "admin".into(),
        trigger: None,
    };
    let chain = store.create_chain(new, 1).await.unwrap();
    let handoff = Handoff {
        chain: chain.id.clone(),
        by: "baton".into(),
        to: "caid".parse().unwrap(),
        prompt: "go".into(),
        add: false,
        max_rounds: 10,
    };
    store.chain_hand(handoff, 2).await.unwrap();
    store.close().await.unwrap();

    let gw = TestGateway::start(&config(&fake, ""), &db).await;
    gw.settle().await;

    let (chain, messages) = the_chain(&gw).await;
    assert_eq!(chain["state"], "completed", "{chain:#} {messages:#?}");
    assert!(
        messages
            .iter()
            .any(|m| m["content"]
                == "baton restarted during caid's turn; the turn goes back to baton"),
        "{messages:#?}"
    );
    assert!(
        fake.requests_for("caid").is_empty(),
        "caid's interrupted turn is not run again"
    );
    assert_eq!(said_by(&gw, "sec").await, ["picking up"]);
    gw.stop().await;
}

/// The id in the last tool result `request` carries.
fn last_result_id(request: &Value) -> String {
    let lines = request["messages"].as_array().unwrap();
    let result = lines.iter().rev().find(|l| l["role"] == "tool").unwrap();
    let parsed: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    parsed["id"].as_str().expect("an artifact id").to_owned()
}

/// The artifact id in the turn text `request` answers.
fn handed_id(request: &Value) -> String {
    let woken = woken_by_one(request);
    let at = woken.find("art-").expect("an artifact named in the prompt");
    woken[at..at + 28].to_owned()
}

fn woken_by_one(request: &Value) -> String {
    let lines = request["messages"].as_array().unwrap();
    let user = lines.iter().rev().find(|l| l["role"] == "user").unwrap();
    user["content"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_turns_artifacts_in_and_out_show_under_it_in_the_api_and_the_cli() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "snark",
        Step::tool_call(
            "chain_create",
            json!({"name": "plan the launch", "participants": ["caid"]}),
        ),
    );
    fake.script(
        "snark",
        Step::tool_call(
            "artifact_put",
            json!({"name": "brief.md", "text": "launch on friday"}),
        ),
    );
    fake.script(
        "snark",
        Step::tool_call_with("chain_pass", |request| {
            json!({"chain": crate::support::chain_steps::chain_id(request), "bot": "caid",
                   "prompt": format!("Plan it from {}.", last_result_id(request))})
        }),
    );
    fake.script("snark", Step::reply("NO_REPLY"));
    fake.script(
        "caid",
        Step::tool_call_with("artifact_put", |request| {
            json!({"name": "plan.json", "text": "{\"day\":\"friday\"}",
                   "inputs": [handed_id(request)]})
        }),
    );
    fake.script("caid", Step::reply("The plan is kept."));
    fake.script(
        "snark",
        on_chain("chain_close", json!({"summary": "planned"})),
    );
    fake.script("snark", Step::reply("NO_REPLY"));
    let bots = [
        ("snark", "tools = [\"chain_*\", \"artifact_put\"]"),
        ("caid", "tools = [\"chain_message\", \"artifact_put\"]"),
    ];
    let config = config_with(
        &fake.base_url,
        &bots,
        "\n[chains]\nturn_timeout_seconds = 20\n",
    );
    let (dir, db) = temp_db();
    let gw = TestGateway::start(&config, &db).await;

    gw.say("room", "alice", "@snark plan the launch with caid")
        .await;
    gw.settle().await;

    let (chain, _) = the_chain(&gw).await;
    assert_eq!(chain["state"], "completed", "{chain:#}");
    let id = chain["id"].as_str().unwrap().to_owned();
    let one = gw.get(&format!("/api/chains/{id}")).await;
    let steps = one["steps"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        steps.len(),
        1,
        "only caid's turn took or made artifacts: {one:#}"
    );
    let step = &steps[0];
    assert_eq!(step["turn"], 1, "{step:#}");
    assert_eq!(step["bot"], "caid");
    assert_eq!(step["run_id"], format!("chain:{id}:t1"));
    let brief = &step["artifacts_in"][0];
    assert_eq!(brief["name"], "brief.md", "{step:#}");
    assert_eq!(brief["bot"], "snark", "made by the coordinator");
    let plan = &step["artifacts_out"][0];
    assert_eq!(plan["name"], "plan.json", "{step:#}");
    assert_eq!(plan["bot"], "caid");
    assert_eq!(plan["run_id"], format!("chain:{id}:t1"));
    assert_eq!(plan["inputs"], json!([brief["id"]]), "made from the brief");
    let (brief, plan) = (brief["id"].as_str().unwrap(), plan["id"].as_str().unwrap());
    gw.stop().await;

    let mut cli = crate::support::process::baton(dir.path());
    cli.args(["chains", &id, "--database", db.to_str().unwrap()]);
    let out = crate::support::process::output(cli).await;
    let shown = crate::support::process::show(&out);
    assert!(out.status.success(), "{shown}");
    for line in [
        format!("turn   1 caid took {brief} `brief.md` (text/markdown, 16 bytes, made by snark)"),
        format!("turn   1 caid made {plan} `plan.json` (application/json, 16 bytes) from {brief}"),
    ] {
        assert!(shown.contains(&line), "{line}\n{shown}");
    }
}

#[tokio::test]
async fn the_demos_echo_bots_answer_a_chain_turn_with_its_topic() {
    let (_dir, db) = temp_db();
    let demo =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/demo.toml")).unwrap();
    let gw = TestGateway::start(&demo, &db).await;
    gw.say(
        "lobby",
        "admin",
        "/baton chain start @caid @sec review the plan",
    )
    .await;
    gw.settle().await;
    let (chain, messages) = the_chain(&gw).await;
    assert_eq!(chain["state"], "completed", "{chain:#}");
    let posts: Vec<(&str, &str)> = messages
        .iter()
        .filter(|m| m["kind"] == "message")
        .map(|m| {
            (
                m["sender"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        posts,
        [("caid", "review the plan"), ("sec", "review the plan")],
        "the topic, not baton's turn instructions"
    );
    let room = gw.messages("lobby").await;
    assert!(
        room.iter()
            .all(|m| !m["text"].as_str().unwrap().contains("It is your turn")),
        "{room:#?}"
    );
    gw.stop().await;
}

/// A chain a bot creates with its tool, in the turn a human message woke it, is that message's
/// trigger: every model call of it, the coordinator's later turns and the participant's turn
/// included, is charged to the one trigger (`GET /api/usage?group_by=trigger`).
#[tokio::test]
async fn a_chain_a_bot_creates_carries_the_trigger_of_the_message_that_woke_it() {
    let fake = FakeOpenAi::start().await;
    fake.report_usage(10, 5);
    fake.script(
        "snark",
        Step::tool_call(
            "chain_create",
            json!({"name": "launch review", "participants": ["caid"]}),
        ),
    );
    fake.script(
        "snark",
        on_chain("chain_pass", json!({"bot": "caid", "prompt": "Any risk?"})),
    );
    fake.script("snark", Step::reply("NO_REPLY"));
    fake.script("caid", Step::reply("The migration is the risk."));
    fake.script("snark", on_chain("chain_close", json!({})));
    fake.script("snark", Step::reply("NO_REPLY"));
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config(&fake, "turn_timeout_seconds = 20"), &db).await;

    gw.say("room", "alice", "@snark have caid look at the launch")
        .await;
    gw.settle().await;
    let (chain, _) = the_chain(&gw).await;
    assert_eq!(chain["state"], "completed", "{chain:#}");
    assert_eq!(fake.requests_for("caid").len(), 1, "caid took its turn");

    let calls = i64::try_from(fake.requests().len()).unwrap();
    let by_trigger = gw.get("/api/usage?group_by=trigger").await;
    let rows = by_trigger["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "one trigger: {by_trigger:#}");
    assert_eq!(rows[0]["total_tokens"], calls * 15, "{by_trigger:#}");
    let caids = gw.get("/api/usage?group_by=trigger&bot=caid").await;
    assert_eq!(caids["rows"][0]["trigger"], rows[0]["trigger"]);
    assert_eq!(caids["rows"][0]["total_tokens"], 15);
    gw.stop().await;
}
