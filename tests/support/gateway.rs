//! A real gateway in the test process: real store file, real local adapters, real HTTP on
//! 127.0.0.1:0, and bots on the `openai` backend pointed at a [`FakeOpenAi`](super::fake_openai).

use std::path::{Path, PathBuf};
use std::time::Duration;

use baton::config::Config;
use baton::gateway::{Gateway, ScheduleClock, StartOptions};
use serde_json::{Value, json};

/// How long any wait in these tests may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A config with `bots` (ids; each on the openai backend with `model = id`) talking to `fake`,
/// open local rooms, `admin` as the local admin, and `extra` TOML appended.
pub fn config_text(fake_url: &str, bots: &[&str], extra: &str) -> String {
    let bots: Vec<(&str, &str)> = bots.iter().map(|b| (*b, "")).collect();
    config_with(fake_url, &bots, extra)
}

/// [`config_text`] with more keys for some bots: `(id, "tools = [\"chain_*\"]")`.
pub fn config_with(fake_url: &str, bots: &[(&str, &str)], extra: &str) -> String {
    let mut text = String::from(
        r#"
[gateway]
silent_token = "NO_REPLY"
error_reply = "Sorry, my model backend failed."
drain_seconds = 5
timezone = "UTC"

[admins]
local = ["admin"]
"#,
    );
    for (bot, keys) in bots {
        text.push_str(&format!(
            "\n[[bots]]\nid = \"{bot}\"\nname = \"{bot}\"\nbackend = \"openai\"\nmodel = \"{bot}\"\nbase_url = \"{fake_url}\"\n{keys}\n"
        ));
    }
    text.push_str(extra);
    if !extra.contains("[chats_default]") {
        text.push_str("\n[chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n");
    }
    text
}

/// One echo bot, `snark` (tools: `bots_list`), with open local rooms and `gateway_keys` in
/// `[gateway]`: for tests of the HTTP edge, where the bot's answers do not matter.
pub fn echo_config(gateway_keys: &str) -> String {
    format!(
        r#"
[gateway]
drain_seconds = 5
{gateway_keys}

[[bots]]
id = "snark"
backend = "echo"
tools = ["bots_list"]

[chats_default]
group_policy = "open"
dm_policy = "open"
"#
    )
}

/// A running gateway and an HTTP client for it.
pub struct TestGateway {
    pub gateway: Gateway,
    pub base: String,
    pub http: reqwest::Client,
}

impl TestGateway {
    /// Start from config text, on the SQLite file `db`.
    pub async fn start(config: &str, db: &Path) -> TestGateway {
        Self::start_with_env(config, db, &|_| None).await
    }

    /// [`TestGateway::start`] with `env` as the process environment (for `*_env` keys).
    pub async fn start_with_env(
        config: &str,
        db: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> TestGateway {
        let config = Config::from_toml(config, Path::new("."), env)
            .unwrap_or_else(|problems| panic!("test config invalid: {problems:#?}"));
        let options = StartOptions {
            listen: Some("127.0.0.1:0".into()),
            database: Some(db.to_string_lossy().into_owned()),
            serve_http: true,
            // Tests drive heartbeats and cron entries with `tick`, at times they choose.
            clock: ScheduleClock::Manual,
        };
        let gateway = Gateway::start_with_env(config, options, env)
            .await
            .expect("gateway starts");
        let base = format!("http://{}", gateway.addr().expect("listening"));
        TestGateway {
            gateway,
            base,
            http: reqwest::Client::new(),
        }
    }

    /// The address the gateway listens on.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.gateway.addr().expect("listening")
    }

    /// Post into a local room; returns the room message (with its `id`).
    pub async fn post(&self, room: &str, body: Value) -> Value {
        let response = self
            .http
            .post(format!("{}/api/local/rooms/{room}/messages", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 202, "post refused");
        response.json().await.unwrap()
    }

    /// Post `text` as `sender`.
    pub async fn say(&self, room: &str, sender: &str, text: &str) -> Value {
        self.post(room, json!({"sender": sender, "text": text}))
            .await
    }

    /// Every message in the room.
    pub async fn messages(&self, room: &str) -> Vec<Value> {
        let all = self.get(&format!("/api/local/rooms/{room}/messages")).await;
        serde_json::from_value(all).unwrap()
    }

    /// `GET <path>` on the gateway, as JSON.
    pub async fn get(&self, path: &str) -> Value {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The messages `bot` posted in the room.
    pub async fn said_by(&self, room: &str, bot: &str) -> Vec<Value> {
        let all = self.messages(room).await;
        all.into_iter().filter(|m| m["author"] == bot).collect()
    }

    /// Wait until every posted event went through the pipeline and no turn is running.
    pub async fn settle(&self) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        // Idle must hold twice in a row a moment apart: an HTTP post may still be on its way.
        let mut idle_since = None;
        loop {
            if self.gateway.is_idle() {
                match idle_since {
                    Some(t) if tokio::time::Instant::now() - t > Duration::from_millis(50) => {
                        return;
                    }
                    None => idle_since = Some(tokio::time::Instant::now()),
                    _ => {}
                }
            } else {
                idle_since = None;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "gateway did not settle"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Run the scheduler's tick at `now` (tests drive the clock; nothing ticks on its own).
    pub async fn tick(&self, now: chrono::DateTime<chrono::Utc>) -> Vec<baton::schedule::Ticked> {
        self.gateway.scheduler().tick(now).await
    }

    /// `GET /metrics`, as text.
    pub async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// The value of an unlabelled gauge in `GET /metrics`.
    pub async fn gauge(&self, name: &str) -> u64 {
        let text = self.metrics().await;
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("no gauge {name} in /metrics:\n{text}"))
    }

    /// The transcript of a session, from the HTTP API.
    pub async fn transcript(&self, session: &str) -> Vec<Value> {
        self.http
            .get(format!("{}/api/transcript", self.base))
            .query(&[("session", session)])
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Stop it (drain, close the store).
    pub async fn stop(self) {
        self.gateway.shutdown().await;
    }
}

/// A fresh database path in a temp dir that lives as long as the returned guard.
pub fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("baton.db");
    (dir, db)
}
