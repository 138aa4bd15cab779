//! The commands that read (or approve in) the store: `chains`, `artifacts`, `pairing approve`,
//! `transcript`/`sessions` on a missing database or an unknown session.

use super::*;

/// A store file in `dir` holding one chain: snark coordinates, caid was given the turn and
/// posted. Returns the database path and the chain id.
pub(super) async fn store_with_a_chain(dir: &Path) -> (PathBuf, String) {
    use baton::store::{ChainOrigin, Handed, Handoff, NewChain, Store};
    let db = dir.join("baton.db");
    let store = Store::open(db.to_str().unwrap()).await.unwrap();
    let new = NewChain {
        name: "launch review".into(),
        coordinator: Some("snark".parse().unwrap()),
        participants: vec!["caid".parse().unwrap()],
        origin: ChainOrigin {
            platform: baton_contract::Platform::Local,
            chat: "room".into(),
            thread: None,
            anchor: None,
            account: "snark".into(),
        },
        started_by: "alice".into(),
        trigger: None,
    };
    let chain = store.create_chain(new, 1).await.unwrap();
    let handoff = Handoff {
        chain: chain.id.clone(),
        by: "snark".into(),
        to: "caid".parse().unwrap(),
        prompt: "risks?".into(),
        add: false,
        max_rounds: 10,
    };
    let Handed::Given(_) = store.chain_hand(handoff, 2).await.unwrap() else {
        panic!("not capped");
    };
    store
        .chain_post(&chain.id, &"caid".parse().unwrap(), "the migration", 3)
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
    let now = baton::timing::now_ms();
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
async fn transcript_into_a_reader_that_stops_early_ends_quietly() {
    use baton::store::{EntryKind, NewEntry, Origin, Store};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("baton.db");
    let store = Store::open(db.to_str().unwrap()).await.unwrap();
    // Far more than a pipe holds, so the writes after `head` has gone fail.
    for n in 0..3_000 {
        let entry = NewEntry {
            session: "bot:snark:local:snark:room".parse().unwrap(),
            ts_ms: 1_700_000_000_000 + n,
            kind: EntryKind::Inbound,
            speaker: "alice".into(),
            origin: Origin::Human,
            text: format!("message {n}: {}", "words ".repeat(20)),
            platform_message_id: None,
            run_id: None,
            idempotency_key: None,
            meta: serde_json::json!({}),
        };
        store.append(entry).await.unwrap();
    }
    store.close().await.unwrap();
    let mut cmd = tokio::process::Command::new("bash");
    cmd.current_dir(dir.path())
        .arg("-c")
        .arg(format!(
            "{} transcript --all --database {} | head -n 2; echo \"baton exited ${{PIPESTATUS[0]}}\"",
            crate::support::process::BATON,
            db.display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = output(cmd).await;
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 3, "{}", show(&out));
    assert!(text.ends_with("baton exited 0\n"), "{}", show(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        !said.contains("panicked") && !said.contains("error"),
        "{}",
        show(&out)
    );
}

/// The demo config on the PostgreSQL database named by [`crate::support::postgres::URL_ENV`], written
/// in `dir`.
pub(super) fn postgres_config(dir: &Path) -> PathBuf {
    let demo = std::fs::read_to_string(demo_config()).unwrap();
    let config = demo.replace(
        "[gateway]\n",
        &format!(
            "[gateway]\ndatabase_url_env = \"{}\"\n",
            crate::support::postgres::URL_ENV
        ),
    );
    assert_ne!(config, demo, "the demo config has a [gateway] section");
    let path = dir.join("baton.toml");
    std::fs::write(&path, config).unwrap();
    path
}

#[tokio::test]
async fn the_read_commands_read_the_configured_postgres_database() {
    let dir = tempfile::tempdir().unwrap();
    let config = postgres_config(dir.path());
    let url = crate::support::postgres::database().await;
    let command = |args: &[&str]| {
        let mut cmd = baton(dir.path());
        cmd.args(args)
            .arg("--config")
            .arg(&config)
            .env(crate::support::postgres::URL_ENV, &url);
        cmd
    };

    // A gateway on the database: snark delegates to caid in a local room.
    let (mut gateway, out) = Running::spawn(command(&["run", "--listen", "127.0.0.1:0"]));
    let base = gateway.base_url(out).await;
    let http = reqwest::Client::new();
    let posted = http
        .post(format!("{base}/api/local/rooms/pg-room/messages"))
        .json(&json!({"sender": "alice", "text": "@snark ask caid: lint the diff"}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 202);
    let posted: Value = posted.json().await.unwrap();
    let asked = posted["id"].as_str().unwrap().to_owned();
    eventually(STEP_DEADLINE, "snark relays caid's answer", || async {
        super::run::room(&http, &base, "pg-room")
            .await
            .into_iter()
            .find(|m| m["author"] == "snark" && m["text"] == "lint the diff")
    })
    .await;
    gateway.terminate();
    assert_eq!(gateway.wait(EXIT_DEADLINE).await.code(), Some(0));

    // No SQLite file was written; every read command finds the run in PostgreSQL.
    assert!(!dir.path().join("baton-demo.db").exists());
    let session = "bot:snark:local:snark:pg-room";
    let expected = [
        (vec!["sessions"], session),
        (
            vec!["transcript", "--session", session],
            "@snark ask caid: lint the diff",
        ),
        (vec!["deliveries"], "delivered"),
        (
            vec!["why", "--message", &asked],
            "from alice: turn replied: mentioned",
        ),
        (vec!["why", "--message", &asked], "caid"),
        (
            vec!["export", "--chat", "local:pg-room"],
            r#""author":"alice","author_kind":"person""#,
        ),
        (
            vec!["export", "--chat", "local:pg-room"],
            r#""kind":"delivery""#,
        ),
    ];
    for (args, shows) in expected {
        let out = output(command(&args)).await;
        assert!(out.status.success(), "{args:?}: {}", show(&out));
        let text = stdout(&out);
        assert!(text.contains(shows), "{args:?} shows no `{shows}`:\n{text}");
    }
    // With nothing of theirs to show they still succeed: on the SQLite file, missing, they
    // would fail.
    for args in [["chains"].as_slice(), &["usage", "--since", "1h"]] {
        let out = output(command(args)).await;
        assert!(out.status.success(), "{args:?}: {}", show(&out));
    }
}
