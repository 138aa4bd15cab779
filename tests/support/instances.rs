//! Several `baton run` processes sharing one PostgreSQL database (README "Running several
//! instances"), each a real child process that a test can kill -9, pause (SIGSTOP, a network
//! pause), resume and start again under its instance id, with Slack Socket Mode accounts on a
//! [`FakeSlack`](super::fake_slack::FakeSlack) and, when asked, Discord gateway accounts on a
//! [`FakeDiscord`](super::fake_discord::FakeDiscord) and Feishu long-connection accounts on a
//! [`FakeFeishu`](super::fake_feishu::FakeFeishu).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::fake_discord::FakeDiscord;
use super::fake_feishu::FakeFeishu;
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
    /// The accounts' tokens, as each instance's environment holds them.
    env: Vec<(String, String)>,
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
        let mut env = Vec::new();
        for app in apps {
            let upper = app.to_uppercase();
            body.push_str(&bot_toml(app, backend));
            body.push_str(&format!(
                "\n[[accounts]]\nbot = \"{app}\"\nplatform = \"slack\"\nmode = \"socket\"\n\
                 app_token_env = \"{upper}_SLACK_APP_TOKEN\"\nbot_token_env = \"{upper}_SLACK_BOT_TOKEN\"\n\
                 api_url = \"{}\"\n",
                slack.api_url
            ));
            env.push((format!("{upper}_SLACK_APP_TOKEN"), format!("xapp-{app}")));
            env.push((format!("{upper}_SLACK_BOT_TOKEN"), format!("xoxb-{app}")));
        }
        body.push_str(extra);
        Instances {
            dir: tempfile::tempdir().unwrap(),
            url,
            body,
            env,
        }
    }

    /// Add `bots` (`(id, application id)`), each on `backend` (as [`Instances::new`] takes it)
    /// with a Discord gateway account on `discord`, its token `token-<id>` registered there.
    pub fn with_discord(
        mut self,
        discord: &FakeDiscord,
        bots: &[(&str, &str)],
        backend: &str,
    ) -> Instances {
        for (bot, user) in bots {
            let (upper, token) = (bot.to_uppercase(), format!("token-{bot}"));
            discord.bot(&token, user, bot);
            self.body.push_str(&bot_toml(bot, backend));
            self.body.push_str(&format!(
                "\n[[accounts]]\nbot = \"{bot}\"\nplatform = \"discord\"\n\
                 bot_token_env = \"{upper}_DISCORD_TOKEN\"\napplication_id = \"{user}\"\n\
                 api_url = \"{}\"\n",
                discord.api_url
            ));
            self.env.push((format!("{upper}_DISCORD_TOKEN"), token));
        }
        self
    }

    /// Add `bots` (each registered on `slack` as an app), each on `backend` with a Slack Events
    /// API account (webhooks at `/hooks/slack/<id>`, which every instance serves), its requests
    /// signed with `secret`.
    pub fn with_slack_events(
        mut self,
        slack: &FakeSlack,
        bots: &[&str],
        backend: &str,
        secret: &str,
    ) -> Instances {
        for bot in bots {
            let upper = bot.to_uppercase();
            self.body.push_str(&bot_toml(bot, backend));
            self.body.push_str(&format!(
                "\n[[accounts]]\nbot = \"{bot}\"\nplatform = \"slack\"\nmode = \"events\"\n\
                 bot_token_env = \"{upper}_SLACK_BOT_TOKEN\"\nsigning_secret_env = \"{upper}_SLACK_SIGNING_SECRET\"\n\
                 api_url = \"{}\"\n",
                slack.api_url
            ));
            self.env
                .push((format!("{upper}_SLACK_BOT_TOKEN"), format!("xoxb-{bot}")));
            self.env
                .push((format!("{upper}_SLACK_SIGNING_SECRET"), secret.to_owned()));
        }
        self
    }

    /// Add `bots`, each on `backend` with a Feishu long-connection account on `feishu`: app
    /// `cli_<id>`, its bot's open id `ou_<id>_self`.
    pub fn with_feishu(mut self, feishu: &FakeFeishu, bots: &[&str], backend: &str) -> Instances {
        for bot in bots {
            let upper = bot.to_uppercase();
            feishu.app(bot, &format!("ou_{bot}_self"));
            self.body.push_str(&bot_toml(bot, backend));
            self.body.push_str(&format!(
                "\n[[accounts]]\nbot = \"{bot}\"\nplatform = \"feishu\"\nmode = \"websocket\"\n\
                 app_id = \"cli_{bot}\"\napp_secret_env = \"{upper}_FEISHU_APP_SECRET\"\n\
                 api_url = \"{}\"\n",
                feishu.api_url
            ));
            self.env.push((
                format!("{upper}_FEISHU_APP_SECRET"),
                format!("secret-{bot}"),
            ));
        }
        self
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
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
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

/// `[[bots]]` `id` on the `echo` backend, or on `backend` (TOML lines, `{bot}` standing for the id).
fn bot_toml(id: &str, backend: &str) -> String {
    let backend = if backend.is_empty() {
        "backend = \"echo\"".to_owned()
    } else {
        backend.replace("{bot}", id)
    };
    format!("\n[[bots]]\nid = \"{id}\"\n{backend}\n")
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
    mention_in("C1", app, n)
}

/// [`mention`] in `channel`.
pub fn mention_in(channel: &str, app: &str, n: usize) -> Value {
    let upper = app.to_uppercase();
    let ts = format!("1700000000.{n:06}");
    let event = json!({
        "user": format!("U_{n}"), "text": format!("<@U_{upper}> {}", job(n)), "ts": ts,
        "channel": channel, "event_ts": ts, "channel_type": "channel",
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
