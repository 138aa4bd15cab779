//! Bots talking to bots: `sessions_send` end to end through a real gateway
//! (store file, local rooms, HTTP on loopback) with bots on the openai backend, answered by a
//! scripted fake model server. Assertions are on what the fake model received (tool results, how
//! many turns each bot took), the transcripts, the deliveries table and the room.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{DEADLINE, TestGateway, temp_db};
use crate::support::world::{World, agents_config};

fn send(target: &str, message: &str) -> Step {
    Step::tool_call(
        "sessions_send",
        json!({"target": target, "message": message}),
    )
}

fn send_with(args: Value) -> Step {
    Step::tool_call("sessions_send", args)
}

async fn deliveries(gw: &TestGateway) -> Value {
    gw.get("/api/deliveries").await
}

fn entries<'a>(transcript: &'a [Value], kind: &str) -> Vec<&'a Value> {
    transcript.iter().filter(|e| e["kind"] == kind).collect()
}

const A_ROOM: &str = "bot:a:local:a:room";
const B_FROM_A: &str = "bot:b:local:b:a2a:a";

/// A session named by a client is read once, where it arrives: one that is not a session key
/// is answered 400 with the form to use, not an empty list.
#[tokio::test]
async fn a_session_that_is_not_a_key_is_a_bad_request_naming_the_form() {
    let fake = FakeOpenAi::start().await;
    let gw = World::agents(&fake, &["a", "b"], "").await;
    let http = reqwest::Client::new();
    for path in ["/api/transcript?session=b", "/api/deliveries?session=b"] {
        let response = http
            .get(format!("http://{}{path}", gw.addr()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{path}");
        let body: Value = response.json().await.unwrap();
        let error = body["error"].as_str().unwrap_or_default();
        assert!(
            error.contains("`b` is not a session key: write bot:<bot>:<platform>"),
            "{path}: {body}"
        );
    }
    let fine = http
        .get(format!(
            "http://{}/api/transcript?session={A_ROOM}",
            gw.addr()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(fine.status(), 200);
}

#[tokio::test]
async fn a_delegates_to_b_and_gets_the_reply_inside_its_turn() {
    let fake = FakeOpenAi::start().await;
    fake.script("a", send("b", "review this diff"));
    fake.script("b", Step::reply("looks good to me"));
    fake.script("a", Step::reply("b says it looks good"));
    let gw = World::agents(&fake, &["a", "b"], "").await;

    gw.say("room", "alice", "@a please get this reviewed").await;
    gw.settle().await;

    let results = fake.tool_results("a");
    assert_eq!(results.len(), 1, "{results:?}");
    let result = &results[0];
    assert_eq!(result["status"], "ok");
    assert_eq!(result["reply"], "looks good to me");
    assert_eq!(result["bot"], "b");
    assert_eq!(result["model"], "b");
    assert!(result["elapsed_ms"].is_u64());
    let run_id = result["run_id"].as_str().unwrap().to_owned();
    assert_eq!(
        fake.woken_by("b"),
        ["Message from bot 'a': review this diff"],
        "b sees who is asking"
    );
    let said: Vec<Value> = gw.said_by("room", "a").await;
    assert_eq!(said.len(), 1);
    assert_eq!(said[0]["text"], "b says it looks good");
    assert!(
        gw.said_by("room", "b").await.is_empty(),
        "b's answer is not posted"
    );

    let b = gw.transcript(B_FROM_A).await;
    let inbound = entries(&b, "inbound");
    assert_eq!(inbound.len(), 1);
    assert_eq!(inbound[0]["speaker"], "bot:a");
    assert_eq!(inbound[0]["origin"], "bot");
    assert_eq!(inbound[0]["run_id"], run_id.as_str());
    assert_eq!(inbound[0]["meta"]["sender"], "a");
    let answer = entries(&b, "answer");
    assert_eq!(answer.len(), 1);
    assert_eq!(answer[0]["text"], "looks good to me");

    let a = gw.transcript(A_ROOM).await;
    assert_eq!(entries(&a, "tool_call").len(), 1);
    let recorded = entries(&a, "tool_result");
    assert_eq!(recorded.len(), 1);
    assert!(recorded[0]["text"].as_str().unwrap().contains(&run_id));

    let listed = deliveries(&gw).await;
    let row = &listed["deliveries"][0];
    assert_eq!(row["run_id"], run_id.as_str());
    assert_eq!(row["state"], "delivered");
    assert_eq!(row["reply"], "looks good to me");
    assert_eq!(row["depth"], 2);
    gw.stop().await;
}

#[tokio::test]
async fn a_timed_out_send_is_in_flight_its_retry_runs_nothing_and_the_late_reply_wakes_the_sender()
{
    let fake = FakeOpenAi::start().await;
    let ask = json!({"target": "b", "message": "slow job", "timeout_seconds": 1});
    fake.script("a", send_with(ask.clone()));
    fake.script("a", send_with(ask));
    fake.script("a", Step::reply("b is still on it"));
    fake.script(
        "b",
        Step::Delay(
            Duration::from_millis(2500),
            Box::new(Step::reply("slow answer")),
        ),
    );
    fake.script("a", Step::reply("b finally answered: slow answer"));
    let gw = World::agents(&fake, &["a", "b"], "").await;

    gw.say("room", "alice", "@a run the slow job").await;
    gw.settle().await;

    let results = fake.tool_results("a");
    assert_eq!(results.len(), 2, "{results:?}");
    let first = &results[0];
    assert_eq!(first["status"], "timeout");
    assert_eq!(first["in_flight"], true);
    assert!(
        first["warning"]
            .as_str()
            .unwrap()
            .contains("Do not send it again")
    );
    let retry = &results[1];
    assert_eq!(
        retry["run_id"], first["run_id"],
        "the retry found the first run"
    );
    assert_eq!(retry["deduplicated"], true);
    assert_eq!(fake.requests_for("b").len(), 1, "b worked once");

    let run_id = first["run_id"].as_str().unwrap();
    let a = gw.transcript(A_ROOM).await;
    let late: Vec<&Value> = entries(&a, "inbound")
        .into_iter()
        .filter(|e| e["speaker"] == "bot:b")
        .collect();
    assert_eq!(late.len(), 1, "the late reply reached a's session: {a:#?}");
    assert!(late[0]["text"].as_str().unwrap().contains("slow answer"));
    assert_eq!(late[0]["origin"], "bot");
    assert_eq!(late[0]["run_id"], format!("reply:{run_id}"));
    let woke = fake.woken_by("a");
    assert!(
        woke.last().unwrap().starts_with("Message from bot 'b': "),
        "{woke:?}"
    );
    let said: Vec<String> = gw
        .said_by("room", "a")
        .await
        .iter()
        .map(|m| m["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        said,
        ["b is still on it", "b finally answered: slow answer"]
    );
    let row = &deliveries(&gw).await["deliveries"][0];
    assert_eq!(
        (row["state"].as_str(), row["notify"].as_str()),
        (Some("delivered"), Some("done"))
    );
    gw.stop().await;
}

#[tokio::test]
async fn fire_and_forget_returns_at_once_and_the_result_lands_later() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "a",
        send_with(json!({"target": "b", "message": "index the repo", "timeout_seconds": 0})),
    );
    fake.script("a", Step::reply("asked b"));
    fake.script(
        "b",
        Step::Delay(Duration::from_millis(300), Box::new(Step::reply("indexed"))),
    );
    fake.script("a", Step::reply("b reports: indexed"));
    let gw = World::agents(&fake, &["a", "b"], "").await;

    gw.say("room", "alice", "@a index it").await;
    gw.settle().await;

    let result = &fake.tool_results("a")[0];
    assert_eq!(result["status"], "accepted");
    assert!(result["run_id"].as_str().unwrap().starts_with("run_"));
    assert!(result.get("reply").is_none(), "it did not wait");
    let said: Vec<Value> = gw.said_by("room", "a").await;
    assert_eq!(said.len(), 2);
    assert_eq!(said[1]["text"], "b reports: indexed");
    let a = gw.transcript(A_ROOM).await;
    assert!(
        entries(&a, "inbound")
            .iter()
            .any(|e| e["speaker"] == "bot:b" && e["text"].as_str().unwrap().contains("indexed"))
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_chain_of_sends_is_refused_past_max_depth() {
    let fake = FakeOpenAi::start().await;
    fake.script("a", send("b", "go"));
    fake.script("b", send("c", "go on"));
    fake.script("c", send("d", "and on"));
    fake.script("c", Step::reply("c stops here"));
    fake.script("b", Step::reply("b done"));
    fake.script("a", Step::reply("a done"));
    let extra = "\n[limits]\nmax_depth = 3\n";
    let gw = World::agents(&fake, &["a", "b", "c", "d"], extra).await;

    gw.say("room", "alice", "@a start").await;
    gw.settle().await;

    assert_eq!(fake.tool_results("a")[0]["status"], "ok");
    assert_eq!(fake.tool_results("b")[0]["status"], "ok");
    let c = &fake.tool_results("c")[0];
    assert_eq!(c["status"], "refused");
    assert_eq!(c["reason"], "max-depth");
    assert!(fake.requests_for("d").is_empty(), "d never ran");
    let refused: Vec<Value> = deliveries(&gw).await["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["state"] == "refused")
        .cloned()
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["reason"], "max-depth");
    assert_eq!(deliveries(&gw).await["refusals"]["max-depth"], 1);
    gw.stop().await;
}

#[tokio::test]
async fn the_target_cannot_send_back_to_its_sender_during_the_request() {
    let fake = FakeOpenAi::start().await;
    fake.script("a", send("b", "question"));
    fake.script("b", send("a", "counter-question"));
    fake.script("b", Step::reply("answer"));
    fake.script("a", Step::reply("done"));
    let gw = World::agents(&fake, &["a", "b"], "").await;

    gw.say("room", "alice", "@a ask b").await;
    gw.settle().await;

    let b = &fake.tool_results("b")[0];
    assert_eq!(b["status"], "refused");
    assert_eq!(b["reason"], "passive-reply");
    assert_eq!(fake.tool_results("a")[0]["reply"], "answer");
    assert_eq!(fake.requests_for("a").len(), 2, "a was not woken by b");
    gw.stop().await;
}

#[tokio::test]
async fn self_sends_and_disallowed_pairs_are_refused() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "a",
        Step::ToolCalls(vec![
            (
                "sessions_send".into(),
                json!({"target": "a", "message": "me?"}),
            ),
            (
                "sessions_send".into(),
                json!({"target": "c", "message": "hi c"}),
            ),
            (
                "bots_send_message".into(),
                json!({"target": "b", "message": "hi b"}),
            ),
        ]),
    );
    fake.script("a", Step::reply("done"));
    let extra = "\n[agent_to_agent]\nallow = [\"a\", \"b\"]\n";
    let gw = World::agents(&fake, &["a", "b", "c"], extra).await;

    gw.say("room", "alice", "@a try everyone").await;
    gw.settle().await;

    let results = fake.tool_results("a");
    let reasons: Vec<&str> = results
        .iter()
        .map(|r| {
            r["reason"]
                .as_str()
                .unwrap_or(r["status"].as_str().unwrap())
        })
        .collect();
    assert_eq!(reasons, ["self-send", "not-allowed", "ok"]);
    assert!(fake.requests_for("c").is_empty());
    assert_eq!(fake.requests_for("b").len(), 1, "the alias reached b");
    gw.stop().await;
}

#[tokio::test]
async fn the_eleventh_send_in_a_minute_and_the_sixth_new_target_in_the_window_are_refused() {
    let fake = FakeOpenAi::start().await;
    let to_b: Vec<(String, Value)> = (1..=11)
        .map(|n| {
            let args = json!({"target": "b", "message": format!("job {n}"), "timeout_seconds": 0});
            ("sessions_send".to_owned(), args)
        })
        .collect();
    fake.script("a", Step::ToolCalls(to_b));
    fake.script("a", Step::reply("sent to b"));
    let fan: Vec<(String, Value)> = ["t1", "t2", "t3", "t4", "t5", "t6"]
        .iter()
        .map(|t| {
            let args = json!({"target": t, "message": "ping", "timeout_seconds": 0});
            ("sessions_send".to_owned(), args)
        })
        .collect();
    fake.script("c", Step::ToolCalls(fan));
    fake.script("c", Step::reply("fanned out"));
    let bots = ["a", "b", "c", "t1", "t2", "t3", "t4", "t5", "t6"];
    let gw = World::agents(&fake, &bots, "").await;

    gw.say("room", "alice", "@a send b a lot").await;
    gw.say("room", "alice", "@c tell everyone").await;
    gw.settle().await;

    let statuses = |model| -> Vec<String> {
        fake.tool_results(model)
            .iter()
            .map(|r| {
                r["reason"]
                    .as_str()
                    .unwrap_or(r["status"].as_str().unwrap())
                    .to_owned()
            })
            .collect()
    };
    let a = statuses("a");
    assert_eq!(a.len(), 11);
    assert!(a[..10].iter().all(|s| s == "accepted"), "{a:?}");
    assert_eq!(a[10], "pair-rate");
    assert_eq!(fake.requests_for("b").len(), 10);
    let c = statuses("c");
    assert_eq!(
        c,
        [
            "accepted", "accepted", "accepted", "accepted", "accepted", "fan-out"
        ]
    );
    assert!(fake.requests_for("t6").is_empty());
    let counts = &deliveries(&gw).await["refusals"];
    assert_eq!(
        (counts["pair-rate"].as_u64(), counts["fan-out"].as_u64()),
        (Some(1), Some(1))
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_ping_pong_stops_at_max_turns_or_at_reply_skip() {
    let fake = FakeOpenAi::start().await;
    fake.script("a", send("b", "draft a plan"));
    fake.script("b", Step::reply("plan v1"));
    fake.script("a", Step::reply("got plan v1"));
    fake.script("a", Step::reply("tighten step 2"));
    fake.script("b", Step::reply("plan v2"));
    let extra = "\n[limits]\nmax_ping_pong_turns = 2\n";
    let gw = World::agents(&fake, &["a", "b"], extra).await;

    gw.say("room", "alice", "@a plan it").await;
    gw.settle().await;
    assert_eq!(
        fake.woken_by("b"),
        [
            "Message from bot 'a': draft a plan",
            "Message from bot 'a': tighten step 2"
        ]
    );
    assert_eq!(
        fake.requests_for("a").len(),
        3,
        "a: tool round, answer, one exchange"
    );
    assert_eq!(fake.woken_by("a")[2], "Message from bot 'b': plan v1");
    assert_eq!(
        gw.said_by("room", "a").await.len(),
        1,
        "exchanges are not posted"
    );
    gw.stop().await;

    let fake = FakeOpenAi::start().await;
    fake.script("a", send("b", "draft a plan"));
    fake.script("b", Step::reply("plan v1"));
    fake.script("a", Step::reply("got plan v1"));
    fake.script("a", Step::reply("REPLY_SKIP"));
    let extra = "\n[limits]\nmax_ping_pong_turns = 4\n";
    let gw = World::agents(&fake, &["a", "b"], extra).await;
    gw.say("room", "alice", "@a plan it").await;
    gw.settle().await;
    assert_eq!(fake.requests_for("b").len(), 1, "a ended the exchange");
    assert_eq!(fake.requests_for("a").len(), 3);
    let a = gw.transcript(A_ROOM).await;
    assert!(
        entries(&a, "silent")
            .iter()
            .any(|e| e["meta"]["reason"] == "REPLY_SKIP"),
        "{a:#?}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_restart_fails_an_interrupted_run_and_resumes_a_queued_one_on_the_record() {
    let fake = FakeOpenAi::start().await;
    fake.script(
        "a",
        send_with(json!({"target": "b", "message": "long job", "timeout_seconds": 0})),
    );
    fake.script("a", Step::reply("started b"));
    fake.script(
        "b",
        Step::Delay(Duration::from_secs(60), Box::new(Step::reply("never seen"))),
    );
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&agents_config(&fake, &["a", "b", "c"], ""), &db).await;
    gw.say("room", "alice", "@a start the long job").await;
    fake.wait_for_requests(3, DEADLINE).await;
    assert_eq!(fake.requests_for("b").len(), 1, "b is working");
    let running = deliveries(&gw).await["deliveries"][0].clone();
    assert_eq!(running["state"], "running");
    let run_id = running["run_id"].as_str().unwrap().to_owned();
    gw.stop().await;

    queue_a_delivery(&db, "c").await;
    let fake = FakeOpenAi::start().await;
    fake.script("c", Step::reply("queued job done"));
    let gw = TestGateway::start(&agents_config(&fake, &["a", "b", "c"], ""), &db).await;
    gw.settle().await;

    let rows = deliveries(&gw).await["deliveries"]
        .as_array()
        .unwrap()
        .clone();
    let by_run = |id: &str| rows.iter().find(|d| d["run_id"] == id).unwrap().clone();
    let interrupted = by_run(&run_id);
    assert_eq!(interrupted["state"], "failed");
    // The stop past the drain interrupted b's turn and put that on record at once.
    let reason = interrupted["reason"].as_str().unwrap();
    assert!(reason.contains("interrupted"), "{reason}");
    assert_eq!(interrupted["notify"], "done");
    assert!(fake.requests_for("b").is_empty(), "b was not run again");
    let resumed = by_run("run_queued");
    assert_eq!(resumed["state"], "delivered");
    assert_eq!(resumed["reply"], "queued job done");
    assert_eq!(fake.woken_by("c"), ["Message from bot 'a': queued work"]);

    let a = gw.transcript(A_ROOM).await;
    let told: Vec<&str> = entries(&a, "inbound")
        .iter()
        .filter(|e| e["origin"] != "human")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(told.len(), 2, "{told:?}");
    assert!(
        told.iter()
            .any(|t| t.contains(&run_id) && t.contains("ended failed"))
    );
    assert!(told.iter().any(|t| t.contains("queued job done")));
    gw.stop().await;
}

/// A delivery from `a` to `target` written as queued, as a crash right after the send would
/// leave it.
async fn queue_a_delivery(db: &Path, target: &str) {
    let store = baton::store::Store::open(db.to_str().unwrap())
        .await
        .unwrap();
    let new = baton::store::NewDelivery {
        run_id: "run_queued".into(),
        sender: "a".parse().unwrap(),
        sender_session: A_ROOM.parse().unwrap(),
        target: target.parse().unwrap(),
        target_session: format!("bot:{target}:local:{target}:a2a:a")
            .parse()
            .unwrap(),
        message: "queued work".into(),
        idempotency_key: None,
        depth: 2,
        origin: Some(A_ROOM.parse().unwrap()),
        trigger: None,
        trace_parent: None,
        mode: baton::store::SendMode::Wait,
        artifacts_in: Vec::new(),
        expect: None,
        created_ms: baton::timing::now_ms(),
    };
    store.delivery_begin(new, 0, None).await.unwrap();
    store.close().await.unwrap();
}

#[tokio::test]
async fn the_read_tools_show_the_roster_sessions_and_transcripts() {
    let fake = FakeOpenAi::start().await;
    fake.script("a", send("b", "remember the number 42"));
    fake.script("b", Step::reply("noted: 42"));
    fake.script(
        "a",
        Step::ToolCalls(vec![
            ("bots_list_available".into(), json!({})),
            ("sessions_list".into(), json!({"bot": "b"})),
            (
                "sessions_history".into(),
                json!({"session": "b", "limit": 5}),
            ),
            ("session_status".into(), json!({"session": B_FROM_A})),
            ("sessions_history".into(), json!({"session": "nobody"})),
        ]),
    );
    fake.script("a", Step::reply("done"));
    let gw = World::agents(&fake, &["a", "b"], "").await;

    gw.say("room", "alice", "@a look around").await;
    gw.settle().await;

    let results = fake.tool_results("a");
    assert_eq!(results.len(), 6, "{results:#?}");
    let bots = &results[1]["bots"];
    let ids: Vec<&str> = bots
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(bots[1]["backend"], "openai");
    assert_eq!(bots[1]["model"], "b");
    assert_eq!(bots[1]["platforms"], json!(["local"]));
    let sessions = results[2]["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["session"], B_FROM_A);
    let history = &results[3];
    assert_eq!(history["session"], B_FROM_A);
    let texts: Vec<&str> = history["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        ["Message from bot 'a': remember the number 42", "noted: 42"]
    );
    let status = &results[4];
    assert_eq!(status["exists"], true);
    assert_eq!(status["entries"], 2);
    assert_eq!(status["deliveries_in_flight"], json!([]));
    assert_eq!(results[5]["status"], "error");
    gw.stop().await;
}

#[tokio::test]
async fn tools_outside_the_bots_list_are_not_offered_or_run() {
    let fake = FakeOpenAi::start().await;
    fake.script("a", send("b", "hi"));
    fake.script("a", Step::reply("done"));
    let text = agents_config(&fake, &["b"], "").replace("\n[[bots]]", &format!(
        "\n[[bots]]\nid = \"a\"\nbackend = \"openai\"\nmodel = \"a\"\nbase_url = \"{}\"\ntools = [\"bots_list\"]\n\n[[bots]]",
        fake.base_url
    ));
    let gw = World::start(&text).await;

    gw.say("room", "alice", "@a hi").await;
    gw.settle().await;

    let offered: Vec<String> = fake.requests_for("a")[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(offered, ["bots_list"]);
    let result = &fake.tool_results("a")[0];
    assert_eq!(result["status"], "error");
    assert!(result["error"].as_str().unwrap().contains("not available"));
    assert!(fake.requests_for("b").is_empty());
    gw.stop().await;
}
