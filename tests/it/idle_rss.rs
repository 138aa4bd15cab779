//! Idle memory of the `baton` binary with one Slack (Socket Mode), one Discord, one Feishu
//! (websocket) and one Telegram (long polling) account, each connected to its fake on 127.0.0.1: the process is started, every
//! account is waited for until `/api/roster` says `connected`, it sits idle, and its
//! `/proc/<pid>/status` is printed, with the resident KiB of each mapping (the binary's code,
//! its relocated data, the libraries, the heap). A measurement for BENCHMARKS.md, never asserted
//! (it depends on the build profile and the allocator's mood), so it is ignored unless asked for:
//!
//! ```sh
//! cargo build --release --bin baton
//! BATON_RSS_BIN=$PWD/target/release/baton cargo test --test it idle_rss::idle_rss -- --ignored --nocapture
//! ```
//!
//! The path must be absolute: the gateway runs in a directory of its own. `scripts/dist` also
//! runs this test, with `BATON_RSS_BIN` a wrapper that starts the binary under callgrind and
//! `BATON_RSS_BEFORE_STOP` a shell command run after the measurement, before the clean stop.
//!
//! `BATON_RSS_IDLE_SECONDS` (default 3) is how long it sits idle; any other environment (say
//! `MALLOC_ARENA_MAX`, `TOKIO_WORKER_THREADS`) is passed through, to try a lever without a build.

use std::time::Duration;

use serde_json::Value;
use tokio::process::Command;

use crate::support::fake_discord::FakeDiscord;
use crate::support::fake_feishu::FakeFeishu;
use crate::support::fake_slack::FakeSlack;
use crate::support::fake_telegram::FakeTelegram;
use crate::support::process::{EXIT_DEADLINE, Running, START_DEADLINE, eventually};

const CAID: &str = "100000000000000002";

/// The four accounts, on the fakes, each with an echo bot of its own.
fn config(
    slack: &FakeSlack,
    discord: &FakeDiscord,
    feishu: &FakeFeishu,
    telegram: &FakeTelegram,
) -> String {
    format!(
        "[gateway]\ndrain_seconds = 1\n\n\
         [chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n\n\
         [[bots]]\nid = \"snark\"\nbackend = \"echo\"\n\n\
         [[bots]]\nid = \"caid\"\nbackend = \"echo\"\n\n\
         [[bots]]\nid = \"lark\"\nbackend = \"echo\"\n\n\
         [[bots]]\nid = \"tg\"\nbackend = \"echo\"\n\n\
         [[accounts]]\nbot = \"snark\"\nplatform = \"slack\"\nmode = \"socket\"\n\
         app_token_env = \"APP\"\nbot_token_env = \"BOT\"\napi_url = \"{}\"\n\n\
         [[accounts]]\nbot = \"caid\"\nplatform = \"discord\"\nbot_token_env = \"DISCORD\"\n\
         application_id = \"{CAID}\"\napi_url = \"{}\"\n\n\
         [[accounts]]\nbot = \"lark\"\nplatform = \"feishu\"\nmode = \"websocket\"\n\
         app_id = \"cli_lark\"\napp_secret_env = \"SECRET\"\napi_url = \"{}\"\n\n\
         [[accounts]]\nbot = \"tg\"\nplatform = \"telegram\"\nbot_token_env = \"TELEGRAM\"\n\
         api_url = \"{}\"\n",
        slack.api_url, discord.api_url, feishu.api_url, telegram.api_url
    )
}

/// The lines of `/proc/<pid>/status` this measurement is about.
fn memory_of(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .filter(|l| {
            ["VmRSS", "RssAnon", "RssFile", "VmHWM", "Threads"]
                .iter()
                .any(|k| l.starts_with(k))
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Resident KiB per mapping of `/proc/<pid>/smaps`, largest first: which part of the binary (its
/// code, its read-only data, the relocated data) or which library or anonymous region it is.
fn mappings_of(pid: u32) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).expect("proc smaps");
    let mut rows: Vec<(u64, String)> = Vec::new();
    for line in smaps.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first().is_some_and(|f| f.contains('-')) && fields.len() >= 5 {
            let name = fields.get(5).copied().unwrap_or("[anon]");
            let name = name.rsplit('/').next().unwrap_or(name);
            rows.push((0, format!("{name} {}", fields[1])));
        } else if fields.first() == Some(&"Rss:")
            && let Some(row) = rows.last_mut()
        {
            row.0 += fields[1].parse::<u64>().unwrap_or(0);
        }
    }
    let mut merged: Vec<(u64, String)> = Vec::new();
    for (kib, name) in rows {
        match merged.iter_mut().find(|(_, n)| *n == name) {
            Some(row) => row.0 += kib,
            None => merged.push((kib, name)),
        }
    }
    merged.sort_by_key(|row| std::cmp::Reverse(row.0));
    merged
        .iter()
        .take_while(|(kib, _)| *kib >= 64)
        .map(|(kib, name)| format!("{kib:>6} KiB  {name}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
#[ignore = "a measurement for BENCHMARKS.md: run it with --ignored on a release binary"]
async fn idle_rss_with_an_account_on_each_of_four_platforms_connected() {
    let slack = FakeSlack::start().await;
    slack.app("snark", "U_SNARK");
    let discord = FakeDiscord::start().await;
    discord.bot("token-caid", CAID, "caid");
    let feishu = FakeFeishu::start().await;
    feishu.app("lark", "ou_lark_self");
    let telegram = FakeTelegram::start().await;
    telegram.bot("tg", 7009, "tg_bot");
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("baton.toml");
    std::fs::write(&config_path, config(&slack, &discord, &feishu, &telegram)).unwrap();

    let bin =
        std::env::var("BATON_RSS_BIN").unwrap_or_else(|_| crate::support::process::BATON.into());
    let mut cmd = Command::new(&bin);
    cmd.current_dir(dir.path())
        .env_remove("BATON_CONFIG")
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "warn")
        .env("APP", "xapp-snark")
        .env("BOT", "xoxb-snark")
        .env("DISCORD", "token-caid")
        .env("SECRET", "secret-lark")
        .env("TELEGRAM", "tok-tg")
        .arg("run")
        .arg("--config")
        .arg(&config_path)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--database")
        .arg(dir.path().join("baton.db"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let (mut gateway, out) = Running::spawn(cmd);
    let base = gateway.base_url(out).await;

    let http = reqwest::Client::new();
    eventually(START_DEADLINE, "every account connected", || async {
        let answer = http.get(format!("{base}/api/roster")).send().await.ok()?;
        let roster: Value = answer.json().await.ok()?;
        let states: Vec<String> = roster["bots"]
            .as_array()?
            .iter()
            .flat_map(|b| b["accounts"].as_array().cloned().unwrap_or_default())
            .map(|a| a["state"].as_str().unwrap_or_default().to_owned())
            .collect();
        (states.len() >= 4 && states.iter().all(|s| s == "connected")).then_some(())
    })
    .await;
    let idle: u64 = std::env::var("BATON_RSS_IDLE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    // Not a synchronisation: the measurement is of a gateway that has sat idle this long.
    tokio::time::sleep(Duration::from_secs(idle)).await;
    println!(
        "## idle, Slack + Discord + Feishu + Telegram accounts connected to the fakes, {idle}s: {} ({bin})",
        memory_of(gateway.pid)
    );
    println!("{}", mappings_of(gateway.pid));
    // `scripts/dist` runs this under callgrind and has it write what ran so far here (the code
    // of a running gateway), then what a clean stop adds as the process exits.
    if let Ok(command) = std::env::var("BATON_RSS_BEFORE_STOP") {
        let done = std::process::Command::new("sh")
            .args(["-c", &command])
            .status()
            .expect("run BATON_RSS_BEFORE_STOP");
        assert!(done.success(), "BATON_RSS_BEFORE_STOP `{command}`: {done}");
    }
    gateway.terminate();
    let status = gateway.wait(EXIT_DEADLINE).await;
    assert!(status.success(), "{status}\n{}", gateway.logs());
}

/// The gateway's memory while 50 agent turns run at once: 50 rooms each wake caid, a `command`
/// bot whose agent works for five minutes (`sleep`). The figure is the gateway's own process
/// (the agents are processes of their own), idle first, then with the 50 turns in flight; then
/// a clean stop, which must end every agent. A measurement for BENCHMARKS.md:
///
/// ```sh
/// BATON_RSS_BIN=$PWD/target/release/baton cargo test --test it idle_rss::rss_with_fifty -- --ignored --nocapture
/// ```
#[tokio::test]
#[ignore = "a measurement for BENCHMARKS.md: run it with --ignored"]
async fn rss_with_fifty_long_agent_turns_in_flight() {
    const TURNS: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let config_path = dir.path().join("baton.toml");
    std::fs::write(
        &config_path,
        format!(
            "[gateway]\ndrain_seconds = 1\n\n[lanes]\nmain = 64\n\n\
             [chats_default]\ngroup_policy = \"open\"\n\n\
             [[bots]]\nid = \"caid\"\nbackend = \"command\"\nturn_timeout_seconds = 3600\n\
             command = [\"sh\", \"-c\", \"cat >/dev/null; echo $$ >> {}; exec sleep 300\"]\n",
            pids.display()
        ),
    )
    .unwrap();
    let bin =
        std::env::var("BATON_RSS_BIN").unwrap_or_else(|_| crate::support::process::BATON.into());
    let mut cmd = Command::new(&bin);
    cmd.current_dir(dir.path())
        .env_remove("BATON_CONFIG")
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "warn")
        .args(["run", "--config"])
        .arg(&config_path)
        .args(["--listen", "127.0.0.1:0", "--database"])
        .arg(dir.path().join("baton.db"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let (mut gateway, out) = Running::spawn(cmd);
    let base = gateway.base_url(out).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = memory_of(gateway.pid);
    let http = reqwest::Client::new();
    for n in 0..TURNS {
        let url = format!("{base}/api/local/rooms/room{n}/messages");
        let sender = format!("user{n}");
        let body = serde_json::json!({"sender": sender, "text": "@caid take an hour"});
        let answer = http.post(url).json(&body).send().await.unwrap();
        assert_eq!(answer.status(), 202);
    }
    let running: Vec<u32> = eventually(START_DEADLINE, "every agent running", || async {
        let text = std::fs::read_to_string(&pids).unwrap_or_default();
        let found: Vec<u32> = text.lines().filter_map(|l| l.parse().ok()).collect();
        (found.len() >= TURNS).then_some(found)
    })
    .await;
    // Not a synchronisation: the turns have settled into waiting on their agents.
    tokio::time::sleep(Duration::from_secs(2)).await;
    println!("## {TURNS} agent turns: idle {idle}");
    println!(
        "## {TURNS} agent turns: in flight {} ({bin})",
        memory_of(gateway.pid)
    );
    gateway.terminate();
    let status = gateway.wait(EXIT_DEADLINE).await;
    assert!(status.success(), "{status}\n{}", gateway.logs());
    let left: Vec<&u32> = running
        .iter()
        .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        .collect();
    assert!(left.is_empty(), "agents left after the stop: {left:?}");
}
