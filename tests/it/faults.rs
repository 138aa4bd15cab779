//! Fault tests (issue 9): what baton does when things break underneath it.
//!
//! - The real binary is killed with SIGKILL at random points, 20 times in a row, while a fake
//!   Slack keeps redelivering every event it has not seen acknowledged. Every message is
//!   answered exactly once or recorded as failed; none is answered twice or lost.
//! - A store that cannot write (a file size limit, which fails writes the way a full disk
//!   does) makes the gateway refuse new work loudly: readiness false, an error in the log, a
//!   503 to the caller, and no answer without a transcript. Writes coming back heal it. The
//!   same for a database that cannot grow (the readiness probe's rewrite still fits), and for
//!   PostgreSQL gone.
//! - Deterministically: an event left in the inbox by a stop is answered at the next start; one
//!   that was being run each of the last three times the gateway died is given up on, with a
//!   failure in the bot's transcript.
//! - A backend that hangs is cut off at `gateway.turn_timeout_seconds`, with the failure
//!   recorded and the error reply posted, and the session's lane is free for the next message.
//!
//! Waits poll for a state with a deadline; nothing sleeps to synchronise. The kill points come
//! from a seeded RNG; the seed is printed so a failure can be replayed (`BATON_FAULT_SEED`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::fake_slack::{FakeSlack, event_body, signed_headers, unix_now};
use crate::support::gateway::{TestGateway, config_text, temp_db};
use crate::support::process::{
    EXIT_DEADLINE, Running, START_DEADLINE, STEP_DEADLINE, baton, eventually, fault_rng,
};

const SECRET: &str = "fault-signing-secret";
/// How many times the gateway is killed.
const KILLS: usize = 20;
/// How many messages the fake Slack delivers over the run.
const MESSAGES: usize = 200;

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// The Slack side of the kill test: the messages, which were acknowledged, and where the
/// gateway listens now (it moves with every restart).
#[derive(Default)]
struct Redeliverer {
    base: Option<String>,
    /// How many messages are out (the rest come later, so kills land mid-stream).
    released: usize,
    acked: Vec<bool>,
    attempts: Vec<u32>,
}

fn ts(n: usize) -> String {
    format!("1700000000.{n:06}")
}

/// The run id of snark's answer to message `n`.
fn run_of(n: usize) -> String {
    format!("in:slack:snark:C1:{}", ts(n))
}

fn job(n: usize) -> String {
    format!("job {n}")
}

/// The Events API body for message `n`, mentioning snark. Each comes from another person, so
/// the per-sender rate limit stays out of the way.
fn message(n: usize) -> String {
    let event = json!({
        "user": format!("U_{n}"), "text": format!("<@U_SNARK> {}", job(n)), "ts": ts(n),
        "channel": "C1", "event_ts": ts(n), "channel_type": "channel",
    });
    event_body("A_snark", &format!("Ev{n}"), "app_mention", event).to_string()
}

/// Keep offering every unacknowledged released message, as Slack does, until all are acked.
async fn redeliver(state: Arc<Mutex<Redeliverer>>) {
    let http = http();
    loop {
        let (base, due) = {
            let s = state.lock().unwrap();
            let due: Vec<(usize, u32)> = (0..s.released)
                .filter(|&n| !s.acked[n])
                .map(|n| (n, s.attempts[n]))
                .collect();
            (s.base.clone(), due)
        };
        let Some(base) = base else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        for (n, attempt) in due {
            let body = message(n);
            let mut request = http
                .post(format!("{base}/hooks/slack/snark"))
                .header("content-type", "application/json")
                .body(body.clone());
            for (k, v) in signed_headers(SECRET, unix_now(), &body) {
                request = request.header(k, v);
            }
            if attempt > 0 {
                request = request
                    .header("x-slack-retry-num", attempt.to_string())
                    .header("x-slack-retry-reason", "http_error");
            }
            let ok = matches!(request.send().await, Ok(r) if r.status() == 200);
            let mut s = state.lock().unwrap();
            s.attempts[n] += 1;
            s.acked[n] |= ok;
        }
        // Slack's own pace between redeliveries is seconds; a few ms keeps the test short.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn slack_config(slack: &FakeSlack) -> String {
    format!(
        "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 2\n\n\
         # Every message goes to one chat, as fast as the fake can send: no \"busy\" here.\n\
         [lanes]\nmax_queued_per_session = {MESSAGES}\n\n\
         [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n\n\
         [[bots]]\nid = \"snark\"\nbackend = \"echo\"\n\n\
         [[accounts]]\nbot = \"snark\"\nplatform = \"slack\"\nmode = \"events\"\n\
         bot_token_env = \"SNARK_SLACK_BOT_TOKEN\"\nsigning_secret_env = \"SNARK_SLACK_SIGNING_SECRET\"\n\
         api_url = \"{}\"\n",
        slack.api_url
    )
}

fn start_slack_gateway(
    dir: &Path,
    config: &Path,
    db: &Path,
) -> (Running, tokio::process::ChildStdout) {
    let mut cmd = baton(dir);
    cmd.arg("run")
        .arg("--config")
        .arg(config)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--database")
        .arg(db)
        .env("SNARK_SLACK_BOT_TOKEN", "xoxb-snark")
        .env("SNARK_SLACK_SIGNING_SECRET", SECRET);
    Running::spawn(cmd)
}

/// Run ids of the runs that recorded a failure, from the store file.
fn failed_runs(db: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT run_id FROM transcript WHERE kind = 'failure' AND run_id IS NOT NULL")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn count(db: &Path, sql: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_twenty_times_answers_every_message_once_or_records_its_failure() {
    let (seed, mut rng) = fault_rng();

    let slack = FakeSlack::start().await;
    slack.app("snark", "U_SNARK");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("baton.toml");
    std::fs::write(&config, slack_config(&slack)).unwrap();
    let db = dir.path().join("baton.db");

    let state = Arc::new(Mutex::new(Redeliverer {
        acked: vec![false; MESSAGES],
        attempts: vec![0; MESSAGES],
        ..Redeliverer::default()
    }));
    let redeliverer = tokio::spawn(redeliver(Arc::clone(&state)));

    for kill in 0..KILLS {
        let (mut gateway, out) = start_slack_gateway(dir.path(), &config, &db);
        let base = gateway.base_url(out).await;
        {
            let mut s = state.lock().unwrap();
            s.base = Some(base);
            s.released = (MESSAGES * (kill + 1) / KILLS).max(s.released);
        }
        // Anywhere from before the first event is taken to well into the stream.
        let after = Duration::from_millis(rng.random_range(0..150));
        tokio::time::sleep(after).await; // the fault's timing, not a synchronisation
        gateway.kill();
        gateway.wait(EXIT_DEADLINE).await;
        state.lock().unwrap().base = None;
    }

    // The last start: it must finish everything the kills left behind.
    let (mut gateway, out) = start_slack_gateway(dir.path(), &config, &db);
    let base = gateway.base_url(out).await;
    {
        let mut s = state.lock().unwrap();
        s.base = Some(base);
        s.released = MESSAGES;
    }
    let unsettled = |slack: &FakeSlack| -> Vec<usize> {
        let posts = slack.posts();
        let failed = failed_runs(&db);
        (0..MESSAGES)
            .filter(|&n| {
                let answered = posts.iter().any(|p| p.text.ends_with(&job(n)));
                !answered && !failed.contains(&run_of(n))
            })
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let unacked = state.lock().unwrap().acked.iter().filter(|a| !**a).count();
        let open = unsettled(&slack);
        if unacked == 0 && open.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "seed {seed}: {unacked} messages unacknowledged, these neither answered nor failed: \
             {open:?}\n--- stderr ---\n{}",
            gateway.logs()
        );
        tokio::time::sleep(crate::support::process::POLL).await;
    }
    eventually(STEP_DEADLINE, "the inbox to empty", || {
        std::future::ready((count(&db, "SELECT count(*) FROM inbox") == 0).then_some(()))
    })
    .await;
    gateway.terminate();
    let status = gateway.wait(EXIT_DEADLINE).await;
    assert!(status.success(), "{status:?}\n{}", gateway.logs());
    redeliverer.abort();

    let posts = slack.posts();
    let failed = failed_runs(&db);
    let mut answered: HashMap<usize, usize> = HashMap::new();
    for post in &posts {
        let n = (0..MESSAGES).find(|&n| post.text.ends_with(&job(n)));
        let n = n.unwrap_or_else(|| panic!("a post that answers nothing: {post:?}"));
        *answered.entry(n).or_default() += 1;
    }
    let mut failures = 0;
    for n in 0..MESSAGES {
        let times = answered.get(&n).copied().unwrap_or(0);
        assert!(
            times <= 1,
            "{} was answered {times} times (seed {seed})",
            job(n)
        );
        if times == 0 {
            let run = format!("in:slack:snark:C1:{}", ts(n));
            assert!(
                failed.contains(&run),
                "{} lost without a record (seed {seed})",
                job(n)
            );
            failures += 1;
        }
    }
    let s = state.lock().unwrap();
    let redeliveries: u32 = s.attempts.iter().map(|a| a.saturating_sub(1)).sum();
    println!(
        "{MESSAGES} messages, {KILLS} kills, {redeliveries} redeliveries, {} answered, {failures} recorded as failed",
        answered.len()
    );
}

/// A local-only config: one echo bot, open rooms.
const ECHO_CONFIG: &str = "[gateway]\nsilent_token = \"NO_REPLY\"\ndrain_seconds = 2\n\n\
    [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n\n\
    [[bots]]\nid = \"snark\"\nbackend = \"echo\"\n";

/// Ask snark through `/v1/chat/completions`: the status and the reply (or error message).
async fn ask(http: &reqwest::Client, base: &str, text: &str) -> (u16, String) {
    let body = json!({"model": "snark", "messages": [{"role": "user", "content": text}]});
    let response = http
        .post(format!("{base}/v1/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let value: Value = response.json().await.unwrap_or(Value::Null);
    let text = value["choices"][0]["message"]["content"]
        .as_str()
        .or(value["error"]["message"].as_str())
        .unwrap_or_default()
        .to_owned();
    (status, text)
}

async fn readyz(http: &reqwest::Client, base: &str) -> (u16, Value) {
    let response = http.get(format!("{base}/readyz")).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Post a room message of 8 KiB with `message_id`: the status.
async fn post_room(http: &reqwest::Client, base: &str, message_id: String) -> u16 {
    let text = format!("@snark {message_id} {}", "x".repeat(8 * 1024));
    let body = json!({"sender": "alice", "text": text, "message_id": &message_id});
    let response = http
        .post(format!("{base}/api/local/rooms/ops/messages"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    if status == 503 {
        assert!(
            response.headers().contains_key("retry-after"),
            "503 without Retry-After"
        );
    }
    status
}

/// Set the child's file size limit (`None`: unlimited). Writes past it fail with EFBIG, which
/// SQLite reports as an I/O error, as it does ENOSPC on a full disk.
fn limit_file_size(pid: u32, bytes: Option<u64>) {
    use rustix::process::{Pid, Resource, Rlimit, prlimit};
    let pid = Pid::from_raw(pid as i32).expect("a child pid is positive");
    let limit = Rlimit {
        current: bytes,
        maximum: None,
    };
    prlimit(Some(pid), Resource::Fsize, limit).expect("prlimit on our own child");
}

/// The texts of a kind of transcript entry in the store file.
fn entries(db: &Path, kind: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT text FROM transcript WHERE kind = ?1")
        .unwrap();
    stmt.query_map([kind], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[tokio::test]
async fn a_store_that_cannot_write_refuses_work_loudly_and_answers_nothing_unrecorded() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("baton.toml");
    std::fs::write(&config, ECHO_CONFIG).unwrap();
    let db = dir.path().join("baton.db");
    let mut cmd = baton(dir.path());
    cmd.arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--database")
        .arg(&db);
    let (mut gateway, out) = Running::spawn(cmd);
    let base = gateway.base_url(out).await;
    let http = http();
    eventually(START_DEADLINE, "ready", || async {
        (readyz(&http, &base).await.0 == 200).then_some(())
    })
    .await;
    assert_eq!(
        ask(&http, &base, "before").await,
        (200, "before".to_owned())
    );

    // Room to grow by a little only: the readiness probe's one-row rewrite and a lone post
    // still fit, a burst of posts committed together does not. A refused post means not ready.
    let size = |path: &Path| std::fs::metadata(path).map_or(0, |m| m.len());
    let wal = dir.path().join("baton.db-wal");
    limit_file_size(gateway.pid, Some(size(&db).max(size(&wal)) + 256 * 1024));
    let deadline = std::time::Instant::now() + STEP_DEADLINE;
    for round in 0.. {
        let burst = (0..64).map(|i| post_room(&http, &base, format!("grow-{round}-{i}")));
        if futures::future::join_all(burst).await.contains(&503) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "every burst taken by a database that cannot grow"
        );
    }
    let (status, body) = readyz(&http, &base).await;
    assert_eq!(status, 503, "ready while posts are refused: {body}");
    assert!(
        body["store_error"].as_str().is_some_and(|e| !e.is_empty()),
        "not ready without the reason: {body}"
    );

    // Writes now fail as on a full disk.
    limit_file_size(gateway.pid, Some(0));
    let mut answered = vec!["before".to_owned()];
    let mut n = 0;
    let deadline = std::time::Instant::now() + STEP_DEADLINE;
    let refusal = loop {
        n += 1;
        let text = format!("while full {n}");
        let (status, reply) = ask(&http, &base, &text).await;
        if status != 200 {
            break (status, reply);
        }
        answered.push(text);
        assert!(
            std::time::Instant::now() < deadline,
            "no message refused within {STEP_DEADLINE:?} of writes failing"
        );
    };
    assert_eq!(refusal.0, 503, "{refusal:?}");
    assert!(refusal.1.contains("store"), "{refusal:?}");
    let (status, body) = readyz(&http, &base).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["store"], false, "{body}");
    assert!(
        body["store_error"].as_str().is_some_and(|e| !e.is_empty()),
        "not ready without the reason: {body}"
    );
    // A room post is not 202 either: that would mean recorded.
    let post = http
        .post(format!("{base}/api/local/rooms/ops/messages"))
        .json(&json!({"sender": "alice", "text": "@snark while full", "message_id": "full-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 503, "a room post took while full");
    assert!(post.headers().contains_key("retry-after"));
    let body: Value = post.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("not recorded"),
        "{body}"
    );
    let logs = gateway.logs();
    assert!(logs.contains("event refused"), "no error logged:\n{logs}");
    assert!(logs.contains("ERROR"), "not logged as an error:\n{logs}");

    // Space comes back: ready again, and answering.
    limit_file_size(gateway.pid, None);
    eventually(STEP_DEADLINE, "ready again", || async {
        (readyz(&http, &base).await.0 == 200).then_some(())
    })
    .await;
    assert_eq!(ask(&http, &base, "after").await, (200, "after".to_owned()));
    answered.push("after".to_owned());
    gateway.terminate();
    assert!(
        gateway.wait(EXIT_DEADLINE).await.success(),
        "{}",
        gateway.logs()
    );

    // Every answer the caller got is in the transcript; the refused one is not.
    let replies = entries(&db, "reply");
    for text in &answered {
        assert!(
            replies.contains(text),
            "{text:?} answered without a transcript: {replies:?}"
        );
    }
    let refused = format!("while full {n}");
    assert!(
        !replies.contains(&refused),
        "a refused message was answered"
    );
}

/// Runs `sql` on the test cluster as its superuser (`url` names a database of it).
async fn as_superuser(url: &str, sql: String) {
    let admin = url
        .split(' ')
        .map(|kv| {
            if kv.starts_with("dbname=") {
                "dbname=postgres"
            } else {
                kv
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    tokio::task::spawn_blocking(move || {
        let mut client = postgres::Client::connect(&admin, postgres::NoTls).unwrap();
        client.batch_execute(&sql).unwrap();
    })
    .await
    .unwrap();
}

/// PostgreSQL going away (its database takes no connection and the gateway's are cut, as when
/// the server stops) refuses room posts with 503 and makes `/readyz` say why; its coming back
/// heals both.
#[tokio::test]
async fn with_postgresql_gone_room_posts_are_refused_and_not_ready_until_it_is_back() {
    use crate::support::postgres::{URL_ENV, database};
    let url = database().await;
    let name = url
        .split(' ')
        .find_map(|kv| kv.strip_prefix("dbname="))
        .unwrap()
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("baton.toml");
    let text = ECHO_CONFIG.replacen(
        "[gateway]\n",
        &format!("[gateway]\ndatabase_url_env = \"{URL_ENV}\"\n"),
        1,
    );
    std::fs::write(&config, text).unwrap();
    let mut cmd = baton(dir.path());
    cmd.env(URL_ENV, &url)
        .arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--listen")
        .arg("127.0.0.1:0");
    let (mut gateway, out) = Running::spawn(cmd);
    let base = gateway.base_url(out).await;
    let http = http();
    eventually(START_DEADLINE, "ready", || async {
        (readyz(&http, &base).await.0 == 200).then_some(())
    })
    .await;
    assert_eq!(post_room(&http, &base, "up-1".into()).await, 202);

    as_superuser(
        &url,
        format!(
            "ALTER DATABASE {name} ALLOW_CONNECTIONS false;
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
        ),
    )
    .await;
    let mut n = 0;
    eventually(STEP_DEADLINE, "a room post refused", || {
        n += 1;
        let id = format!("down-{n}");
        let (http, base) = (&http, &base);
        async move { (post_room(http, base, id).await == 503).then_some(()) }
    })
    .await;
    let (status, body) = readyz(&http, &base).await;
    assert_eq!(status, 503, "ready with PostgreSQL gone: {body}");
    assert_eq!(body["store"], false, "{body}");
    assert!(
        body["store_error"].as_str().is_some_and(|e| !e.is_empty()),
        "not ready without the reason: {body}"
    );

    as_superuser(
        &url,
        format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true"),
    )
    .await;
    eventually(STEP_DEADLINE, "ready again", || async {
        (readyz(&http, &base).await.0 == 200).then_some(())
    })
    .await;
    assert_eq!(post_room(&http, &base, "back-1".into()).await, 202);
    gateway.terminate();
    assert!(
        gateway.wait(EXIT_DEADLINE).await.success(),
        "{}",
        gateway.logs()
    );
}

#[tokio::test]
async fn a_hung_backend_is_cut_off_at_the_turn_timeout_and_the_lane_is_freed() {
    let fake = FakeOpenAi::start().await;
    fake.hold();
    let config = config_text(&fake.base_url, &["snark"], "").replace(
        "drain_seconds = 5",
        "drain_seconds = 5\nturn_timeout_seconds = 1",
    );
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&config, &db).await;

    gw.say("ops", "alice", "@snark are you there?").await;
    gw.settle().await;
    let said: Vec<Value> = gw.said_by("ops", "snark").await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0]["text"], "Sorry, my model backend failed.");
    let session = "bot:snark:local:snark:ops";
    let transcript = gw.transcript(session).await;
    let failure = transcript
        .iter()
        .find(|e| e["kind"] == "failure")
        .unwrap_or_else(|| panic!("no failure recorded: {transcript:?}"));
    assert!(
        failure["text"]
            .as_str()
            .unwrap()
            .contains("longer than 1 s"),
        "{failure}"
    );

    // The hung call was dropped at the limit, so its lane slot is free: the next message in
    // the same session is answered.
    fake.release();
    fake.script("snark", Step::reply("still here"));
    gw.say("ops", "alice", "@snark and now?").await;
    gw.settle().await;
    let texts: Vec<Value> = gw
        .said_by("ops", "snark")
        .await
        .into_iter()
        .map(|m| m["text"].clone())
        .collect();
    assert_eq!(
        texts,
        [
            json!("Sorry, my model backend failed."),
            json!("still here")
        ]
    );
    gw.stop().await;
}

/// A store file in which the local account `snark` accepted "@snark left over" in room `ops`
/// and never finished it, as after a kill; it was already run again `attempts` times.
async fn store_with_a_left_over_event(db: &Path, attempts: u32) {
    use baton::store::Store;
    let event = crate::support::left_over::mention_of_snark("@snark left over");
    let store = Store::open(db.to_str().unwrap()).await.unwrap();
    // Filed as a gateway files it (`tests/it/files_out.rs` files one as JSON, as before schema 22).
    let filed = store
        .file(baton::store::Filing::of(&event), 1, None)
        .await
        .unwrap();
    let filed = filed.expect("a fresh event");
    for _ in 0..attempts {
        store.inbox_attempt(filed).await.unwrap();
    }
    store.close().await.unwrap();
}

#[tokio::test]
async fn an_event_left_unfinished_is_answered_at_the_next_start() {
    let fake = FakeOpenAi::start().await;
    fake.script("snark", Step::reply("answered after the restart"));
    let (_dir, db) = temp_db();
    store_with_a_left_over_event(&db, 1).await;

    let gw = TestGateway::start(&config_text(&fake.base_url, &["snark"], ""), &db).await;
    crate::support::process::eventually(STEP_DEADLINE, "the left-over answer", || async {
        let said = gw.said_by("ops", "snark").await;
        (!said.is_empty()).then_some(())
    })
    .await;
    gw.settle().await;
    let said = gw.said_by("ops", "snark").await;
    assert_eq!(said.len(), 1, "{said:?}");
    assert_eq!(said[0]["text"], "answered after the restart");
    let left = gw.gateway.store().inbox_left("local:snark").await.unwrap();
    assert!(left.is_empty(), "still in the inbox: {left:?}");
    gw.stop().await;
}

#[tokio::test]
async fn a_replayed_event_keeps_one_inbound_line_and_the_model_is_given_it_once() {
    use baton::store::{EntryKind, NewEntry, Origin, Store};
    let fake = FakeOpenAi::start().await;
    fake.script("snark", Step::reply("answered after the restart"));
    let (_dir, db) = temp_db();
    store_with_a_left_over_event(&db, 1).await;
    // The run that was cut off had written its inbound line already.
    let session = "bot:snark:local:snark:ops";
    let store = Store::open(db.to_str().unwrap()).await.unwrap();
    let first = NewEntry {
        session: session.parse().unwrap(),
        ts_ms: 1,
        kind: EntryKind::Inbound,
        speaker: "alice".into(),
        origin: Origin::Human,
        text: "@snark left over".into(),
        platform_message_id: Some("m-left".into()),
        run_id: Some("in:local:snark:m-left".into()),
        idempotency_key: None,
        meta: json!({"name": "alice"}),
    };
    store.append(first).await.unwrap();
    store.close().await.unwrap();

    let gw = TestGateway::start(&config_text(&fake.base_url, &["snark"], ""), &db).await;
    crate::support::process::eventually(STEP_DEADLINE, "the left-over answer", || async {
        let said = gw.said_by("ops", "snark").await;
        (!said.is_empty()).then_some(())
    })
    .await;
    gw.settle().await;
    let transcript = gw.transcript(session).await;
    let inbound = transcript
        .iter()
        .filter(|e| e["kind"] == "inbound" && e["platform_message_id"] == "m-left")
        .count();
    assert_eq!(inbound, 1, "{transcript:#?}");
    assert!(
        transcript.iter().any(|e| e["kind"] == "reply"),
        "{transcript:#?}"
    );
    // The model is given the message once, as the turn's current line, not also in the
    // session's tail where the cut-off run recorded it.
    let requests = fake.requests_for("snark");
    let messages = requests[0]["messages"].as_array().unwrap();
    let given = messages
        .iter()
        .filter(|m| m["content"].as_str().unwrap_or("").contains("left over"))
        .count();
    assert_eq!(given, 1, "{messages:#?}");
    gw.stop().await;
}

#[tokio::test]
async fn an_event_that_keeps_stopping_the_gateway_is_given_up_with_a_record() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    store_with_a_left_over_event(&db, 3).await;

    let gw = TestGateway::start(&config_text(&fake.base_url, &["snark"], ""), &db).await;
    let session = "bot:snark:local:snark:ops";
    let failure =
        crate::support::process::eventually(STEP_DEADLINE, "the give-up record", || async {
            let transcript = gw.transcript(session).await;
            transcript.into_iter().find(|e| e["kind"] == "failure")
        })
        .await;
    let text = failure["text"].as_str().unwrap();
    assert!(
        text.contains("m-left") && text.contains("3 times"),
        "{text}"
    );
    gw.settle().await;
    assert!(
        gw.said_by("ops", "snark").await.is_empty(),
        "it was run a fourth time"
    );
    assert!(fake.requests().is_empty(), "it was run a fourth time");
    let left = gw.gateway.store().inbox_left("local:snark").await.unwrap();
    assert!(left.is_empty(), "still in the inbox: {left:?}");
    gw.stop().await;
}
