//! The real `baton` binary, end to end, on loopback and in temporary directories:
//! `check` (good and broken configs), `run` (HTTP, a local room, SIGTERM), `transcript`,
//! `sessions`, `chat`, and what a missing config file gets.
//!
//! Nothing here sleeps to synchronise: every wait polls for the awaited state with a deadline.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use support::process::{
    EXIT_DEADLINE, Running, START_DEADLINE, STEP_DEADLINE, baton, demo_config, eventually, output,
    show,
};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stdout and stderr together, for "the output mentions X" checks.
fn all_output(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn check_accepts_the_demo_and_prints_the_roster() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = baton(dir.path());
    cmd.arg("check").arg("--config").arg(demo_config());
    let out = output(cmd).await;
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let text = stdout(&out);
    for bot in ["snark", "caid", "sec"] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(bot)),
            "roster line for {bot} missing:\n{text}"
        );
        assert!(
            text.contains(&format!("local/{bot} -> bot {bot}")),
            "local account of {bot} missing:\n{text}"
        );
    }
    assert!(text.contains("config OK"), "{text}");
    assert!(
        text.contains(" echo model=") && text.contains("group_policy=open dm_policy=open"),
        "config spellings, not Rust's: {text}"
    );
}

#[tokio::test]
async fn check_honours_baton_config_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = baton(dir.path());
    cmd.arg("check").env("BATON_CONFIG", demo_config());
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(stdout(&out).contains("snark"), "{}", show(&out));
}

/// Environment variables the broken config names. Unique to this test file, so the developer's
/// own environment cannot interfere.
const UNSET_VAR: &str = "BATON_CLI_TEST_NEVER_SET_KEY";
const TOKEN_VAR: &str = "BATON_CLI_TEST_API_TOKEN";
const TOKEN_SECRET: &str = "tok-5ecret-must-never-be-printed-81c2";
const KEY_VAR: &str = "BATON_CLI_TEST_ORACLE_KEY";
const KEY_SECRET: &str = "sk-cli-test-also-secret-3f9d7e";

fn broken_config() -> String {
    format!(
        r#"[gateway]
listen = "127.0.0.1:0"
api_token_env = "{TOKEN_VAR}"
lisen = "127.0.0.1:1"

[backends.openai]
api_key_env = "{UNSET_VAR}"

[[bots]]
id = "snark"
backend = "echo"

[[bots]]
id = "oracle"
backend = "openai"
model = "some-model"
api_key_env = "{KEY_VAR}"

[[bots]]
id = "snark"
backend = "echo"

[[accounts]]
bot = "ghost"
platform = "local"

[[chats]]
platform = "local"
id = "lobby-[oops"
"#
    )
}

/// The 1-based line of the first line of `text` that starts with `prefix`, after `after`.
fn line_of(text: &str, prefix: &str, after: usize) -> usize {
    text.lines()
        .enumerate()
        .skip(after)
        .find(|(_, l)| l.starts_with(prefix))
        .map(|(n, _)| n + 1)
        .unwrap_or_else(|| panic!("`{prefix}` not in the test config"))
}

#[tokio::test]
async fn check_lists_every_problem_with_its_key_and_never_a_secret() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.toml");
    let text = broken_config();
    std::fs::write(&path, &text).unwrap();

    let second_snark = {
        let first = line_of(&text, "id = \"snark\"", 0);
        line_of(&text, "id = \"snark\"", first)
    };
    // (key, line, a word of the message): each problem names its key, and its line.
    let expected = [
        ("gateway.lisen", line_of(&text, "lisen", 0), "unknown key"),
        (
            "backends.openai.api_key_env",
            line_of(&text, &format!("api_key_env = \"{UNSET_VAR}\""), 0),
            UNSET_VAR,
        ),
        ("bots[2].id", second_snark, "unique"),
        (
            "accounts[0].bot",
            line_of(&text, "bot = \"ghost\"", 0),
            "ghost",
        ),
        (
            "chats[0].id",
            line_of(&text, "id = \"lobby-[oops\"", 0),
            "glob",
        ),
    ];

    let mut cmd = baton(dir.path());
    cmd.arg("check")
        .arg("--config")
        .arg(&path)
        .env_remove(UNSET_VAR)
        .env(TOKEN_VAR, TOKEN_SECRET)
        .env(KEY_VAR, KEY_SECRET);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let all = all_output(&out);
    for (key, line, word) in expected {
        let found = all.lines().any(|l| {
            l.contains(&format!("{key}:"))
                && l.contains(&format!("line {line}"))
                && l.contains(word)
        });
        assert!(
            found,
            "no problem reported for `{key}` (line {line}, mentioning `{word}`):\n{all}"
        );
    }
    // The variables that are set are not problems, and their values are never echoed.
    assert!(!all.contains("gateway.api_token_env"), "{all}");
    assert!(!all.contains("bots[1].api_key_env"), "{all}");
    assert!(!all.contains(TOKEN_SECRET), "a secret leaked:\n{all}");
    assert!(!all.contains(KEY_SECRET), "a secret leaked:\n{all}");
    assert!(!all.contains("config OK"), "{all}");

    // `baton run` refuses the same config the same way, and starts nothing: no database file.
    let db = dir.path().join("never.db");
    let mut cmd = baton(dir.path());
    cmd.arg("run")
        .arg("--config")
        .arg(&path)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--database")
        .arg(&db)
        .env_remove(UNSET_VAR)
        .env(TOKEN_VAR, TOKEN_SECRET)
        .env(KEY_VAR, KEY_SECRET);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let all = all_output(&out);
    for (key, _, _) in expected {
        assert!(
            all.contains(key),
            "`baton run` did not report {key}:\n{all}"
        );
    }
    assert!(
        !all.contains(TOKEN_SECRET) && !all.contains(KEY_SECRET),
        "{all}"
    );
    assert!(!all.contains("listening"), "{all}");
    assert!(
        !db.exists(),
        "a refused config still created {}",
        db.display()
    );
}

#[tokio::test]
async fn a_missing_config_file_says_how_to_name_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = baton(dir.path());
    cmd.arg("check").arg("--config").arg("/nonexistent.toml");
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let all = all_output(&out);
    assert!(all.contains("/nonexistent.toml"), "{all}");
    assert!(
        all.contains("--config") && all.contains("BATON_CONFIG"),
        "the message should say to pass --config or set BATON_CONFIG:\n{all}"
    );

    // Without --config or BATON_CONFIG the default is ./baton.toml; an empty directory has none.
    let mut cmd = baton(dir.path());
    cmd.arg("run").arg("--listen").arg("127.0.0.1:0");
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let all = all_output(&out);
    assert!(all.contains("baton.toml"), "{all}");
    assert!(
        all.contains("--config") && all.contains("BATON_CONFIG"),
        "{all}"
    );
}

/// The room's messages, as `GET /api/local/rooms/{room}/messages` returns them.
async fn room(http: &reqwest::Client, base: &str, room: &str) -> Vec<Value> {
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

/// A store file in `dir` holding one chain: snark coordinates, caid was given the turn and
/// posted. Returns the database path and the chain id.
async fn store_with_a_chain(dir: &Path) -> (PathBuf, String) {
    use baton::store::{ChainOrigin, Handed, Handoff, NewChain, Store};
    let db = dir.join("baton.db");
    let store = Store::open(db.to_str().unwrap()).await.unwrap();
    let new = NewChain {
        name: "launch review".into(),
        coordinator: Some("snark".into()),
        participants: vec!["caid".into()],
        origin: ChainOrigin {
            platform: "local".into(),
            chat: "room".into(),
            thread: None,
            anchor: None,
            account: "snark".into(),
        },
        started_by: "alice".into(),
    };
    let chain = store.create_chain(new, 1).await.unwrap();
    let handoff = Handoff {
        chain: chain.id.clone(),
        by: "snark".into(),
        to: "caid".into(),
        prompt: "risks?".into(),
        add: false,
        max_rounds: 10,
    };
    let Handed::Given(_) = store.chain_hand(handoff, 2).await.unwrap() else {
        panic!("not capped");
    };
    store
        .chain_post(&chain.id, "caid", "the migration", 3)
        .await
        .unwrap();
    store.close().await.unwrap();
    (db, chain.id)
}

#[tokio::test]
async fn chains_lists_the_chains_and_shows_one_with_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    let (db, id) = store_with_a_chain(dir.path()).await;
    let db = db.to_str().unwrap();

    let mut list = baton(dir.path());
    list.args(["chains", "--database", db]);
    let out = output(list).await;
    assert!(out.status.success(), "{}", show(&out));
    let table = stdout(&out);
    let row = table.lines().find(|l| l.starts_with(&id)).expect("a row");
    for part in ["open", "snark", "launch review (caid)"] {
        assert!(row.contains(part), "{part}: {table}");
    }

    let mut one = baton(dir.path());
    one.args(["chains", &id, "--database", db]);
    let out = output(one).await;
    assert!(out.status.success(), "{}", show(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!("chain {id} \"launch review\"")),
        "{text}"
    );
    assert!(text.contains("snark holds the turn"), "{text}");
    assert!(
        text.contains("turn   1 handoff  snark → caid: risks?"),
        "{text}"
    );
    assert!(
        text.contains("turn   1 message  caid: the migration"),
        "{text}"
    );

    let mut missing = baton(dir.path());
    missing.args(["chains", "ch-nope22", "--database", db]);
    let out = output(missing).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(all_output(&out).contains("no chain `ch-nope22`; `baton chains` lists them"));
}

#[tokio::test]
async fn artifacts_lists_by_run_and_by_session_with_what_each_was_made_from() {
    use baton::store::{NewArtifact, Put, Store};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("baton.db");
    let store = Store::open(db.to_str().unwrap()).await.unwrap();
    let session: baton::session::SessionKey = "bot:caid:local:caid:room".parse().unwrap();
    let put = |name: &str, run: &str, inputs: Vec<String>| NewArtifact {
        name: name.into(),
        media_type: "application/json".into(),
        content: name.as_bytes().to_vec(),
        bot: "caid".parse().unwrap(),
        session: session.clone(),
        run_id: Some(run.into()),
        inputs,
        created_ms: 1,
    };
    let Put::Stored(first) = store
        .artifact_put(put("a.json", "run_1", vec![]))
        .await
        .unwrap()
    else {
        panic!("stored")
    };
    let made_from = vec![first.id.clone()];
    let Put::Stored(second) = store
        .artifact_put(put("b.json", "run_2", made_from))
        .await
        .unwrap()
    else {
        panic!("stored")
    };
    store.close().await.unwrap();
    let db = db.to_str().unwrap();

    let mut by_run = baton(dir.path());
    by_run.args(["artifacts", "--run", "run_2", "--database", db]);
    let out = output(by_run).await;
    assert!(out.status.success(), "{}", show(&out));
    let table = stdout(&out);
    assert!(
        !table.contains(&format!("{} ", first.id)),
        "only run_2's: {table}"
    );
    let row = table
        .lines()
        .find(|l| l.starts_with(&second.id))
        .expect("a row");
    for part in [
        "b.json",
        "application/json",
        "caid",
        "run_2",
        &format!("(from {})", first.id),
    ] {
        assert!(row.contains(part), "{part}: {table}");
    }

    let mut by_session = baton(dir.path());
    by_session.args([
        "artifacts",
        "--session",
        &session.render(),
        "--database",
        db,
    ]);
    let out = output(by_session).await;
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(stdout(&out).lines().count(), 3, "a header and both rows");
}

#[tokio::test]
async fn pairing_approve_on_the_command_line_is_audited_and_an_expired_code_fails_clearly() {
    use baton::store::{CODE_TTL_MS, Pairing, Store};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("baton.db");
    let db = db.to_str().unwrap();
    let store = Store::open(db).await.unwrap();
    let now = baton::mirror::now_ms();
    let code = |p: Pairing| match p {
        Pairing::Pending { code, .. } => code,
        other => panic!("{other:?}"),
    };
    let old = code(
        store
            .pairing("slack", "snark", "U_OLD", now - CODE_TTL_MS - 1)
            .await
            .unwrap(),
    );
    let fresh = code(store.pairing("slack", "snark", "U_NEW", now).await.unwrap());
    store.close().await.unwrap();

    let approve = |code: &str| {
        let mut cmd = baton(dir.path());
        cmd.args(["pairing", "approve", code, "--database", db]);
        cmd
    };
    let out = output(approve(&fresh)).await;
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        stdout(&out).starts_with("Approved U_NEW on slack"),
        "{}",
        show(&out)
    );
    let out = output(approve(&old)).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let said = all_output(&out);
    assert!(
        said.contains(&format!("Code {old}")) && said.contains("has expired"),
        "{said}"
    );
    assert!(
        said.contains("message the bot again for a new code"),
        "{said}"
    );

    let mut list = baton(dir.path());
    list.args(["pairing", "list", "--database", db]);
    let table = stdout(&output(list).await);
    assert!(
        table
            .lines()
            .any(|l| l.contains("U_OLD") && l.ends_with("expired")),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.contains("U_NEW") && l.ends_with("approved")),
        "{table}"
    );

    let store = Store::open(db).await.unwrap();
    let audit = store.audit_log(10).await.unwrap();
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[1].platform, "cli");
    assert_eq!(audit[1].command, format!("baton pairing approve {fresh}"));
    assert_eq!(audit[1].outcome, "ok");
    assert!(
        audit[0].outcome.starts_with("error: Code"),
        "{:?}",
        audit[0]
    );
}

#[tokio::test]
async fn read_commands_refuse_a_missing_database_and_create_none() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("baton.toml");
    std::fs::write(
        &config,
        std::fs::read_to_string(demo_config())
            .unwrap()
            .replace("baton-demo.db", "missing/nowhere.db"),
    )
    .unwrap();
    let reads: [&[&str]; 5] = [
        &["sessions"],
        &["transcript", "--session", "bot:snark:local:snark:lobby"],
        &["deliveries"],
        &["chains"],
        &["pairing", "list"],
    ];
    for args in reads {
        let mut cmd = baton(dir.path());
        cmd.args(args).arg("--config").arg(&config);
        let out = output(cmd).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
        let text = all_output(&out);
        assert!(
            text.contains("missing/nowhere.db") && text.contains("`gateway.database`"),
            "{args:?} names the path and the key: {text}"
        );
    }
    let mut cmd = baton(dir.path());
    cmd.args(["sessions", "--database", "typo.db", "--config"])
        .arg(&config);
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(all_output(&out).contains("typo.db (named by --database)"));
    assert!(
        !dir.path().join("typo.db").exists(),
        "no database was created"
    );
    assert!(
        !dir.path().join("missing").exists(),
        "no directory was created"
    );
}

#[tokio::test]
async fn an_unknown_session_is_an_error_offering_the_nearest_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let mut chat = baton(dir.path());
    chat.args(["chat", "snark", "--user", "alice", "--database"])
        .arg(&db)
        .arg("--config")
        .arg(demo_config())
        .stdin(Stdio::piped());
    let mut child = chat.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"hello\n").await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(STEP_DEADLINE, child.wait_with_output())
        .await
        .expect("chat ends at EOF")
        .unwrap();
    assert!(out.status.success(), "{}", show(&out));

    let typo = "bot:snark:local:snark:dm:alcie";
    for args in [
        vec!["transcript", "--session", typo],
        vec!["deliveries", "--session", typo],
    ] {
        let mut cmd = baton(dir.path());
        cmd.args(&args)
            .arg("--database")
            .arg(&db)
            .arg("--config")
            .arg(demo_config());
        let out = output(cmd).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", show(&out));
        let text = all_output(&out);
        assert!(
            text.contains(&format!("no session `{typo}`"))
                && text.contains("did you mean:\n  bot:snark:local:snark:dm:alice"),
            "{args:?}: {text}"
        );
    }
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
