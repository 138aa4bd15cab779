//! Several `baton run` processes sharing one PostgreSQL database (README "Running several
//! instances"), each a real child process that a test can kill -9, pause (SIGSTOP, a network
//! pause), resume and start again under its instance id, with Slack Socket Mode accounts on a
//! [`FakeSlack`](super::fake_slack::FakeSlack).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::fake_slack::{FakeSlack, event_body};
use super::gateway::DEADLINE;
use super::postgres::{URL_ENV, database};
use super::process::{Running, baton};

/// The shortest lease `baton check` accepts: failover in a few seconds.
pub const LEASE_SECONDS: u64 = 3;

/// One database, one config, any number of instances.
pub struct Instances {
    dir: tempfile::TempDir,
    url: String,
    body: String,
    apps: Vec<String>,
}

/// One running `baton run`.
pub struct Instance {
    /// Its `cluster.instance_id`.
    pub id: String,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    pub process: Running,
}

impl Instances {
    /// A fresh database and the config every instance runs: each of `apps` (registered on
    /// `slack`) is a bot on the `echo` backend (or `backend`, TOML lines for `[[bots]]`) with a
    /// Socket Mode account; leases of [`LEASE_SECONDS`]; `extra` TOML appended.
    pub async fn new(slack: &FakeSlack, apps: &[&str], backend: &str, extra: &str) -> Instances {
        Instances::on(database().await, slack, apps, backend, extra)
    }

    /// [`Instances::new`] on the database at `url`.
    pub fn on(
        url: String,
        slack: &FakeSlack,
        apps: &[&str],
        backend: &str,
        extra: &str,
    ) -> Instances {
        let mut body = format!(
            "[gateway]\ndatabase_url_env = \"{URL_ENV}\"\nsilent_token = \"NO_REPLY\"\n\
             drain_seconds = 1\n\n[chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\n"
        );
        for app in apps {
            let backend = if backend.is_empty() {
                "backend = \"echo\"".to_owned()
            } else {
                backend.replace("{bot}", app)
            };
            let upper = app.to_uppercase();
            body.push_str(&format!(
                "\n[[bots]]\nid = \"{app}\"\n{backend}\n\n\
                 [[accounts]]\nbot = \"{app}\"\nplatform = \"slack\"\nmode = \"socket\"\n\
                 app_token_env = \"{upper}_SLACK_APP_TOKEN\"\nbot_token_env = \"{upper}_SLACK_BOT_TOKEN\"\n\
                 api_url = \"{}\"\n",
                slack.api_url
            ));
        }
        body.push_str(extra);
        Instances {
            dir: tempfile::tempdir().unwrap(),
            url,
            body,
            apps: apps.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// The database's connection settings.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Start instance `id` and wait for its listener.
    pub async fn start(&self, id: &str) -> Instance {
        self.start_with_env(id, &[]).await
    }

    /// [`Instances::start`] with more environment variables (`OTEL_*`).
    pub async fn start_with_env(&self, id: &str, env: &[(&str, &str)]) -> Instance {
        let config = self.config(id);
        let mut cmd = baton(self.dir.path());
        cmd.arg("run")
            .arg("--config")
            .arg(&config)
            .arg("--listen")
            .arg("127.0.0.1:0")
            .env(URL_ENV, &self.url)
            .env("RUST_LOG", "info,baton=debug");
        for app in &self.apps {
            let upper = app.to_uppercase();
            cmd.env(format!("{upper}_SLACK_APP_TOKEN"), format!("xapp-{app}"))
                .env(format!("{upper}_SLACK_BOT_TOKEN"), format!("xoxb-{app}"));
        }
        for (name, value) in env {
            cmd.env(name, value);
        }
        let (process, out) = Running::spawn(cmd);
        let base = process.base_url(out).await;
        Instance {
            id: id.to_owned(),
            base,
            process,
        }
    }

    fn config(&self, id: &str) -> PathBuf {
        let path = self.dir.path().join(format!("{id}.toml"));
        let text = format!(
            "{}\n[cluster]\ninstance_id = \"{id}\"\nlease_seconds = {LEASE_SECONDS}\n",
            self.body
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A store handle on the shared database, for what the tests read from it.
    pub async fn store(&self) -> baton::store::Store {
        let url = baton::store::PgUrl::parse(&self.url).unwrap();
        baton::store::Store::open_postgres(url).await.unwrap()
    }
}

impl Instance {
    /// GET `path` as JSON.
    pub async fn get(&self, path: &str) -> Value {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        http.get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The connection state this instance shows for `account` (`connected`, `standby`, ...).
    pub async fn state_of(&self, account: &str) -> String {
        let roster = self.get("/api/roster").await;
        let found = roster.to_string();
        let bots = roster["bots"].as_array().cloned().unwrap_or_default();
        bots.iter()
            .flat_map(|b| b["accounts"].as_array().cloned().unwrap_or_default())
            .find(|a| a["account"] == account)
            .and_then(|a| a["state"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("no account {account} in {found}"))
    }

    /// kill -9, and wait until it is gone.
    pub async fn kill(&mut self) {
        self.process.kill();
        self.process.wait(super::process::EXIT_DEADLINE).await;
    }
}

/// The accounts (`slack/<app>`) each instance holds now, by the database: `(instance, account)`.
pub async fn holders(store: &baton::store::Store) -> Vec<(String, String)> {
    let status = store.cluster_status().await.unwrap();
    let mut held = Vec::new();
    for instance in status.instances {
        for lease in instance.accounts {
            if lease.expires_ms > status.now_ms {
                held.push((
                    instance.id.clone(),
                    format!("{}/{}", lease.platform, lease.account),
                ));
            }
        }
    }
    held
}

/// `<@U_<APP>> job N`, from a person of its own (no per-sender rate limit in the way), in
/// channel C1 at a ts of its own: the Events API body of message `n` to `app`.
pub fn mention(app: &str, n: usize) -> Value {
    let upper = app.to_uppercase();
    let ts = format!("1700000000.{n:06}");
    let event = json!({
        "user": format!("U_{n}"), "text": format!("<@U_{upper}> {}", job(n)), "ts": ts,
        "channel": "C1", "event_ts": ts, "channel_type": "channel",
    });
    event_body(
        &format!("A_{app}"),
        &format!("Ev{app}{n}"),
        "app_mention",
        event,
    )
}

/// The text of message `n`; its answer ends with it.
pub fn job(n: usize) -> String {
    format!("job {n}")
}

/// The accounts each instance holds, as `/api/cluster` lists them.
pub fn held(cluster: &Value) -> Vec<(String, Vec<String>)> {
    cluster["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let accounts = i["accounts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| {
                    format!(
                        "{}/{}",
                        a["platform"].as_str().unwrap(),
                        a["account"].as_str().unwrap()
                    )
                })
                .collect();
            (i["id"].as_str().unwrap().to_owned(), accounts)
        })
        .collect()
}

/// Waits until `cond` holds, failing with `what` after the test deadline.
pub async fn until(what: &str, mut cond: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while !cond().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
