//! The database file's upkeep, through the real `baton` binary: one gateway per database (a
//! second `baton run` exits 1 naming the holder, read-only commands still work), and
//! `baton prune` with `baton transcript --all --format jsonl` as the export before it.
//!
//! Nothing here sleeps to synchronise: every wait polls for the awaited state with a deadline.

use std::path::Path;

use baton::store::{EntryKind, NewAudit, NewEntry, Origin, Store};
use serde_json::Value;
use tokio::process::Command;

use crate::support::process::{
    EXIT_DEADLINE, Running, STEP_DEADLINE, baton, demo_config, output, show,
};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

fn run_on(dir: &Path, db: &Path) -> Command {
    let mut cmd = baton(dir);
    cmd.arg("run")
        .arg("--config")
        .arg(demo_config())
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--database")
        .arg(db);
    cmd
}

#[tokio::test]
async fn a_second_run_on_one_database_exits_1_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("one.db");
    let (mut first, out) = Running::spawn(run_on(dir.path(), &db));
    let _base = first.base_url(out).await;

    let second = output(run_on(dir.path(), &db)).await;
    assert_eq!(second.status.code(), Some(1), "{}", show(&second));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&format!("pid {}", first.pid)),
        "the holder is not named: {}",
        show(&second)
    );
    assert!(
        stderr.contains("one.db.lock") && stderr.contains("--database"),
        "{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&second.stdout).is_empty(),
        "the second run started something: {}",
        show(&second)
    );

    // Reading beside the running gateway needs no lock.
    let mut sessions = baton(dir.path());
    sessions.arg("sessions").arg("--database").arg(&db);
    let out = output(sessions).await;
    assert!(out.status.success(), "{}", show(&out));

    // Once the first stops, the database is free again, and no large WAL was left behind.
    first.terminate();
    assert!(
        first.wait(EXIT_DEADLINE).await.success(),
        "{}",
        first.logs()
    );
    let wal = dir.path().join("one.db-wal");
    let wal_len = std::fs::metadata(&wal).map_or(0, |m| m.len());
    assert!(
        wal_len < 64 * 1024,
        "{wal_len} bytes of WAL after a clean stop"
    );
    let (mut again, out) = Running::spawn(run_on(dir.path(), &db));
    let _base = again.base_url(out).await;
    again.terminate();
    assert!(
        again.wait(EXIT_DEADLINE).await.success(),
        "{}",
        again.logs()
    );
}

fn entry(session: &str, ts_ms: i64, text: &str) -> NewEntry {
    NewEntry {
        session: session.parse().unwrap(),
        ts_ms,
        kind: EntryKind::Inbound,
        speaker: "alice".into(),
        origin: Origin::Human,
        text: text.into(),
        platform_message_id: Some(format!("m-{text}")),
        run_id: Some(format!("run-{text}")),
        idempotency_key: None,
        meta: serde_json::json!({"said": text}),
    }
}

fn audit(ts_ms: i64, command: &str) -> NewAudit {
    NewAudit {
        ts_ms,
        platform: "cli".into(),
        chat: "-".into(),
        user: "ops".into(),
        command: command.into(),
        outcome: "ok".into(),
    }
}

/// Every entry `baton transcript --all --format jsonl` prints, each line parsed on its own.
async fn export(dir: &Path, db: &str) -> Vec<Value> {
    let mut cmd = baton(dir);
    cmd.args(["transcript", "--all", "--format", "jsonl", "--database", db]);
    let out = output(cmd).await;
    assert!(out.status.success(), "{}", show(&out));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

#[tokio::test]
async fn prune_deletes_old_rows_keeps_newer_ones_and_the_export_has_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.db");
    let db = db.to_str().unwrap();
    let now = baton::timing::now_ms();
    let store = Store::open(db).await.unwrap();
    for (session, age_ms, text) in [
        ("bot:snark:local:snark:a", 100 * DAY_MS, "ancient"),
        ("bot:snark:local:snark:b", 40 * DAY_MS, "old"),
        ("bot:snark:local:snark:a", DAY_MS / 2, "recent"),
        ("bot:caid:local:caid:a", 0, "today"),
    ] {
        store
            .append(entry(session, now - age_ms, text))
            .await
            .unwrap();
    }
    store.audit(audit(now - 60 * DAY_MS, "old")).await.unwrap();
    store.audit(audit(now - DAY_MS / 2, "new")).await.unwrap();
    store.close().await.unwrap();

    // The export: one object per line, every field, in the order written, across sessions.
    let all = export(dir.path(), db).await;
    let texts: Vec<&str> = all.iter().filter_map(|e| e["text"].as_str()).collect();
    assert_eq!(texts, ["ancient", "old", "recent", "today"]);
    let first = all[0].as_object().unwrap();
    for field in [
        "id",
        "session",
        "ts_ms",
        "kind",
        "speaker",
        "origin",
        "text",
        "platform_message_id",
        "run_id",
        "idempotency_key",
        "meta",
    ] {
        assert!(first.contains_key(field), "no `{field}` in {first:?}");
    }
    assert_eq!(all[0]["meta"]["said"], "ancient");
    assert_eq!(all[0]["run_id"], "run-ancient");

    // Only the audit table first: the transcript is untouched.
    let mut audit_only = baton(dir.path());
    audit_only.args([
        "prune",
        "--before",
        "30d",
        "--table",
        "audit",
        "--database",
        db,
    ]);
    let out = output(audit_only).await;
    assert!(out.status.success(), "{}", show(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("audit: 1 row(s) deleted"), "{said}");
    assert!(!said.contains("transcripts"), "{said}");
    assert_eq!(export(dir.path(), db).await.len(), 4);

    // Everything older than 30 days.
    let mut prune = baton(dir.path());
    prune.args(["prune", "--before", "30d", "--database", db]);
    let out = output(prune).await;
    assert!(out.status.success(), "{}", show(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("transcripts: 2 row(s) deleted"), "{said}");

    let left = export(dir.path(), db).await;
    let texts: Vec<&str> = left.iter().filter_map(|e| e["text"].as_str()).collect();
    assert_eq!(texts, ["recent", "today"]);
    let store = Store::open(db).await.unwrap();
    let log = store.audit_log(10).await.unwrap();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0].command, "new");

    // A date too recent is moved back to a day ago, and says so; a bad one says what to write.
    let mut recent = baton(dir.path());
    recent.args(["prune", "--before", "2999-01-01", "--database", db]);
    let out = output(recent).await;
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("younger than a day are never pruned"),
        "{}",
        show(&out)
    );
    assert_eq!(
        export(dir.path(), db).await.len(),
        2,
        "the recent rows stay"
    );
    let mut bad = baton(dir.path());
    bad.args(["prune", "--before", "last week", "--database", db]);
    let out = output(bad).await;
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("2026-01-31"),
        "{}",
        show(&out)
    );
}

#[tokio::test]
async fn run_applies_retention_at_start_and_keeps_what_is_set_to_keep() {
    use crate::support::process::eventually;
    use baton::config::Config;
    use baton::gateway::{Gateway, ScheduleClock, StartOptions};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kept.db");
    let now = baton::timing::now_ms();
    let store = Store::open(db.to_str().unwrap()).await.unwrap();
    store.audit(audit(now - 90 * DAY_MS, "old")).await.unwrap();
    store.audit(audit(now, "new")).await.unwrap();
    store
        .append(entry("bot:snark:local:snark:a", now - 90 * DAY_MS, "old"))
        .await
        .unwrap();
    store.close().await.unwrap();

    let text = "[retention]\naudit = \"30d\"\n";
    let config = Config::from_toml(text, dir.path(), &|_| None).expect("valid config");
    let options = StartOptions {
        database: Some(db.to_string_lossy().into_owned()),
        clock: ScheduleClock::Manual,
        ..StartOptions::default()
    };
    let gateway = Gateway::start(config, options).await.unwrap();
    let store = gateway.store().clone();
    eventually(STEP_DEADLINE, "the old audit row pruned at start", || {
        let store = store.clone();
        async move {
            let log = store.audit_log(10).await.ok()?;
            (log.len() == 1 && log[0].command == "new").then_some(())
        }
    })
    .await;
    let kept = store
        .transcript(baton::store::TranscriptQuery::session(
            "bot:snark:local:snark:a".parse().unwrap(),
        ))
        .await
        .unwrap();
    assert_eq!(kept.len(), 1, "transcripts default to keep: {kept:?}");
    gateway.shutdown().await;
}
