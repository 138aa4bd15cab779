//! `baton run` and `baton chat`: a local room over HTTP, SIGTERM, metrics, start errors.

use super::*;

/// The room's messages, as `GET /api/local/rooms/{room}/messages` returns them.
pub(super) async fn room(http: &reqwest::Client, base: &str, room: &str) -> Vec<Value> {
    let response = http
        .get(format!("{base}/api/local/rooms/{room}/messages"))
        .send()
        .await
        .expect("GET room");
    assert_eq!(response.status(), 200);
    response.json().await.expect("room JSON")
}

#[tokio::test]
async fn run_serves_a_room_stops_on_sigterm_and_leaves_a_transcript() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let room_id = "cli-lobby";
    let mut cmd = baton(dir.path());
    cmd.arg("run")
        .arg("--config")
        .arg(demo_config())
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--database")
        .arg(&db);
    let (mut gateway, out) = Running::spawn(cmd);
    let base = gateway.base_url(out).await;

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    eventually(START_DEADLINE, "GET /readyz = 200", || async {
        let r = http.get(format!("{base}/readyz")).send().await.ok()?;
        (r.status() == 200).then_some(())
    })
    .await;
    let health = http.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);

    let models: Value = http
        .get(format!("{base}/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(ids, ["snark", "caid", "sec"], "{models}");

    // A human mentions snark in a local room; snark's echo reply appears in the room.
    let posted = http
        .post(format!("{base}/api/local/rooms/{room_id}/messages"))
        .json(&json!({"sender": "alice", "text": "@snark hello from the cli test"}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 202);
    let posted: Value = posted.json().await.unwrap();
    let reply = eventually(STEP_DEADLINE, "snark's reply in the room", || async {
        room(&http, &base, room_id)
            .await
            .into_iter()
            .find(|m| m["author"] == "snark" && m["is_bot"] == true)
    })
    .await;
    assert_eq!(reply["text"], "hello from the cli test", "{reply}");
    assert_eq!(reply["reply_to"], posted["id"], "{reply}");
    // Only snark was mentioned: caid and sec stay out of it.
    let authors: Vec<Value> = room(&http, &base, room_id)
        .await
        .into_iter()
        .map(|m| m["author"].clone())
        .collect();
    assert_eq!(authors, [json!("alice"), json!("snark")]);

    // The router delegates to the specialist with the echo `ask` directive.
    let posted = http
        .post(format!("{base}/api/local/rooms/{room_id}/messages"))
        .json(&json!({"sender": "alice", "text": "@snark ask caid: lint the diff"}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 202);
    eventually(STEP_DEADLINE, "snark relays caid's answer", || async {
        room(&http, &base, room_id)
            .await
            .into_iter()
            .find(|m| m["author"] == "snark" && m["text"] == "lint the diff")
    })
    .await;

    // The OpenAI-compatible endpoint reaches the same bot.
    let completion: Value = http
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model": "snark", "user": "bob",
                      "messages": [{"role": "user", "content": "ping over http"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        completion["choices"][0]["message"]["content"], "ping over http",
        "{completion}"
    );

    // SIGTERM: drain and exit 0.
    gateway.terminate();
    let status = gateway.wait(EXIT_DEADLINE).await;
    assert_eq!(
        status.code(),
        Some(0),
        "baton run exited with {status:?}\n--- stderr ---\n{}",
        gateway.logs()
    );

    // The transcript, as text: who said what.
    let view = |args: &[&str]| {
        let mut cmd = baton(dir.path());
        cmd.args(args)
            .arg("--config")
            .arg(demo_config())
            .arg("--database")
            .arg(&db);
        cmd
    };
    let out = output(view(&["transcript", "--bot", "snark", "--chat", room_id])).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.contains("alice") && l.contains("@snark hello from the cli test")),
        "the human's line, attributed to alice, is missing:\n{text}"
    );
    assert!(
        text.lines().any(|l| l.contains(" snark ")
            && l.ends_with(": hello from the cli test")
            && !l.contains("alice")),
        "snark's reply, attributed to snark, is missing:\n{text}"
    );

    // As JSON lines.
    let out = output(view(&[
        "transcript",
        "--bot",
        "snark",
        "--chat",
        room_id,
        "--format",
        "jsonl",
    ]))
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let entries: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(entries.len() >= 2, "{entries:?}");
    let session = format!("bot:snark:local:snark:{room_id}");
    assert!(entries.iter().all(|e| e["session"] == session.as_str()));
    assert!(
        entries.iter().any(|e| e["speaker"] == "alice"
            && e["origin"] == "human"
            && e["text"] == "@snark hello from the cli test"),
        "{entries:#?}"
    );
    assert!(
        entries.iter().any(|e| e["speaker"] == "snark"
            && e["kind"] == "reply"
            && e["text"] == "hello from the cli test"),
        "{entries:#?}"
    );

    // The delegation, in the deliveries table.
    let out = output(view(&["deliveries"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("run_"))
        .unwrap_or_else(|| panic!("no delivery listed:\n{text}"))
        .split_whitespace()
        .collect();
    assert_eq!(&row[1..4], ["snark", "caid", "delivered"], "{text}");
    // The columns line up: each value starts under its heading (ids honour the width).
    let header = text.lines().next().unwrap();
    let line = text.lines().find(|l| l.starts_with("run_")).unwrap();
    for (heading, value) in [("FROM", "snark"), ("TO", "caid"), ("STATE", "delivered")] {
        assert_eq!(
            header.find(&format!(" {heading} ")).map(|at| at + 1),
            line.find(&format!(" {value} ")).map(|at| at + 1),
            "{heading} column:\n{text}"
        );
    }
    assert!(text.contains("lint the diff"), "{text}");

    // The session list.
    let out = output(view(&["sessions"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().next() == Some(session.as_str())),
        "{session} not listed:\n{text}"
    );
}

#[tokio::test]
async fn chat_answers_from_stdin_and_exits_at_eof() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    let mut cmd = baton(dir.path());
    cmd.arg("chat")
        .arg("snark")
        .arg("--config")
        .arg(demo_config())
        .arg("--database")
        .arg(&db)
        .stdin(Stdio::piped());
    let (mut chat, out) = Running::spawn(cmd);
    let mut stdin = chat
        .child
        .as_mut()
        .and_then(|c| c.stdin.take())
        .expect("stdin is piped");
    stdin.write_all(b"hello snark\n").await.unwrap();
    drop(stdin); // EOF

    let mut text = String::new();
    let read = tokio::time::timeout(STEP_DEADLINE, async {
        let mut out = out;
        out.read_to_string(&mut text).await
    })
    .await;
    assert!(
        matches!(read, Ok(Ok(_))),
        "stdout not closed within {STEP_DEADLINE:?}:\n{text}\n--- stderr ---\n{}",
        chat.logs()
    );
    let status = chat.wait(EXIT_DEADLINE).await;
    assert_eq!(
        status.code(),
        Some(0),
        "{status:?}\n{text}\n--- stderr ---\n{}",
        chat.logs()
    );
    assert!(
        text.contains("snark: hello snark"),
        "snark's echo reply is missing:\n{text}\n--- stderr ---\n{}",
        chat.logs()
    );
    assert!(db.exists(), "the conversation was not stored in --database");
}

#[tokio::test]
async fn metrics_show_every_family_at_start_and_bad_bodies_get_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = baton(dir.path());
    cmd.arg("run")
        .arg("--config")
        .arg(demo_config())
        .args(["--listen", "127.0.0.1:0", "--database"])
        .arg(dir.path().join("b.db"));
    let (_gateway, out) = Running::spawn(cmd);
    let base = _gateway.base_url(out).await;
    let http = reqwest::Client::new();

    let metrics = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for series in [
        "baton_events_in_total{platform=\"slack\"} 0",
        "baton_dedupe_hits_total{platform=\"local\"} 0",
        "baton_events_refused_total{platform=\"discord\"} 0",
        "baton_events_recovered_total{outcome=\"given-up\"} 0",
        "baton_turns_total{outcome=\"failed\"} 0",
        "baton_bot_message_refusals_total{reason=\"bot_reply_chain\"} 0",
        "baton_scheduled_runs_total{kind=\"heartbeat\"} 0",
        "baton_scheduled_skips_total{reason=\"quiet-hours\"} 0",
        "baton_scheduled_suppressed_total{reason=\"heartbeat-ok\"} 0",
        "baton_send_refusals_total{reason=",
        "baton_turn_seconds_count 0",
    ] {
        assert!(metrics.contains(series), "`{series}` missing:\n{metrics}");
    }

    let bad = |path: &str| {
        http.post(format!("{base}{path}"))
            .header("content-type", "application/json")
            .body("{\"sender\": \"alice\", \"text\": ")
            .send()
    };
    let api = bad("/api/local/rooms/lobby/messages").await.unwrap();
    assert_eq!(api.status(), 400);
    let body: Value = api.json().await.expect("a JSON body");
    assert!(body["error"].as_str().unwrap().contains("JSON"), "{body}");

    let v1 = bad("/v1/chat/completions").await.unwrap();
    assert_eq!(v1.status(), 400);
    let body: Value = v1.json().await.expect("a JSON body");
    let error = &body["error"];
    assert_eq!(error["type"], "invalid_request_error", "{body}");
    assert!(
        error["message"].as_str().unwrap().contains("JSON"),
        "{body}"
    );
    assert!(
        error.get("param").is_some() && error.get("code").is_some(),
        "{body}"
    );
}

#[tokio::test]
async fn start_errors_are_said_once_with_the_right_advice() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = baton(dir.path());
    cmd.args(["run", "--listen", "127.0.0.1:0", "--database"])
        .arg(dir.path())
        .arg("--config")
        .arg(demo_config());
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(text.matches("is a directory").count(), 1, "{text}");
    assert!(text.contains("baton.db"), "{text}");
    assert!(
        !text.contains("writable"),
        "not a permissions problem: {text}"
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mut cmd = baton(dir.path());
    cmd.args(["run", "--database", ":memory:", "--listen", &addr])
        .arg("--config")
        .arg(demo_config());
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(text.matches("os error").count(), 1, "{text}");
    assert!(text.contains(&format!("cannot listen on {addr}")), "{text}");
}

#[tokio::test]
async fn an_unreachable_postgres_stops_the_start_naming_host_port_and_sslmode_never_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let config = super::store_commands::postgres_config(dir.path());
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let mut cmd = baton(dir.path());
    cmd.args(["run", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .env(
            crate::support::postgres::URL_ENV,
            format!("postgres://baton:pw-s3cret@127.0.0.1:{port}/baton?sslmode=require"),
        );
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let text = all_output(&out);
    assert!(
        text.contains(&format!("127.0.0.1:{port}/baton?sslmode=require")),
        "{text}"
    );
    assert!(!text.contains("pw-s3cret"), "{text}");
}
