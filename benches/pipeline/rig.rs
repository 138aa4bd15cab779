//! A real gateway in the benchmark process: the config parsed and validated from TOML, the
//! roster built by `baton::gateway` as `baton run` builds it, the echo backend, the SQLite
//! store in a file in a temporary directory (or, with `--postgres`, a new database on the
//! throwaway PostgreSQL cluster the store's tests use), and an in-memory adapter behind each
//! account.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use baton::config::Config;
use baton::gateway::{AdapterOverride, Gateway, ScheduleClock, StartError, StartOptions};
use baton_contract::{
    AccountId, Adapter, ChatId, ChatKind, InboundEvent, MessageId, Platform, Sender, UserId,
};

use super::adapter::{BenchAdapter, Injector, Recorder};

#[path = "../../src/store/testing/cluster.rs"]
#[allow(dead_code)]
mod cluster;

/// Whether gateways run on PostgreSQL (`--postgres`), set once before the first one starts.
static POSTGRES: OnceLock<bool> = OnceLock::new();

/// Whether that PostgreSQL syncs every commit to disk (`--durable`).
static DURABLE: OnceLock<bool> = OnceLock::new();

/// Run every gateway from here on on a new database of the throwaway PostgreSQL cluster; with
/// `durable`, of a cluster that syncs every commit to disk (`fsync`, `synchronous_commit` and
/// `full_page_writes` on, its files under the system temp dir).
pub(crate) fn use_postgres(durable: bool) {
    let _ = POSTGRES.set(true);
    let _ = DURABLE.set(durable);
}

/// The store the gateways run on, for the figures' headings.
pub(crate) fn engine() -> &'static str {
    match (on_postgres(), DURABLE.get().copied().unwrap_or(false)) {
        (false, _) => "SQLite",
        (true, false) => "PostgreSQL (fsync, synchronous_commit and full_page_writes off)",
        (true, true) => "PostgreSQL (fsync, synchronous_commit and full_page_writes on)",
    }
}

/// On PostgreSQL, a new database on the cluster: its URL. `None` on SQLite.
pub(crate) async fn new_database() -> Option<String> {
    if !on_postgres() {
        return None;
    }
    let url = tokio::task::spawn_blocking(|| {
        let cluster = if DURABLE.get().copied().unwrap_or(false) {
            cluster::durable_cluster()
        } else {
            cluster::cluster()
        };
        cluster.url(&cluster.create_database())
    })
    .await
    .expect("a PostgreSQL database for the bench");
    Some(url)
}

fn on_postgres() -> bool {
    POSTGRES.get().copied().unwrap_or(false)
}

/// The variable the bench config names in `database_url_env` on PostgreSQL.
const URL_VAR: &str = "BENCH_DATABASE_URL";

/// The variable a config with an API token names in `api_token_env` (and a peer in
/// `token_env`): set, like every `BENCH_` variable.
pub(crate) const API_TOKEN_VAR: &str = "BENCH_API_TOKEN";

/// Every bench account is a Slack account whose connection is the in-memory adapter; these
/// fake secrets only satisfy validation (nothing connects to Slack), and serve as the API
/// token where one is asked for. On PostgreSQL, [`URL_VAR`] is the gateway's database (`url`).
fn env(name: &str, url: Option<&str>) -> Option<String> {
    if name == URL_VAR {
        return url.map(str::to_owned);
    }
    name.starts_with("BENCH_").then(|| "xoxb-bench".to_owned())
}

/// The platform user id of a bench bot's account.
pub(crate) fn user_of(bot: &str) -> String {
    format!("U{}", bot.to_uppercase())
}

/// How a bench gateway is configured.
pub(crate) struct Setup<'a> {
    /// Echo bots; each gets one Slack account `<bot>` behind the in-memory adapter.
    pub(crate) bots: &'a [&'a str],
    /// `[lanes] main` (and `nested`).
    pub(crate) lanes: usize,
    /// Extra TOML for the `[[bots]]` entries, e.g. `tools = ["sessions_send"]`.
    pub(crate) bot_keys: &'a str,
    /// Room for this many event indexes in the recorder.
    pub(crate) capacity: usize,
    /// More TOML at the end of the config, e.g. a `[store]` section.
    pub(crate) extra_toml: &'a str,
    /// More `[gateway]` keys, e.g. `api_token_env`.
    pub(crate) gateway_keys: &'a str,
    /// The HTTP port on 127.0.0.1; 0 for any free one.
    pub(crate) port: u16,
}

/// The TOML a bench gateway runs with.
pub(crate) fn config_text(setup: &Setup<'_>) -> String {
    let (lanes, gateway_keys) = (setup.lanes, setup.gateway_keys);
    let database = if on_postgres() {
        format!("database_url_env = \"{URL_VAR}\"")
    } else {
        String::new()
    };
    // The guards and queue caps all run; their budgets are set so a benchmark's synthetic users
    // and bots stay within them (a refusal would end an event early and flatter the figures).
    let mut text = format!(
        r#"
[gateway]
timezone = "UTC"
{database}
{gateway_keys}

[lanes]
main = {lanes}
nested = {lanes}
max_queued = 1000000
max_queued_per_session = 1000000

[limits]
inbound_per_sender_per_minute = 1000000
send_per_pair_per_minute = 1000000
send_per_sender_per_minute = 1000000
fan_out_targets = 1000
max_depth = 3

[chats_default]
group_policy = "open"
dm_policy = "open"
activation = "mention"
history_limit = 50
"#
    );
    for bot in setup.bots {
        text.push_str(&format!(
            r#"
[[bots]]
id = "{bot}"
name = "{bot}"
backend = "echo"
{keys}

[[accounts]]
bot = "{bot}"
platform = "slack"
bot_token_env = "BENCH_SLACK_BOT_TOKEN"
app_token_env = "BENCH_SLACK_APP_TOKEN"
"#,
            keys = setup.bot_keys
        ));
    }
    text.push_str(setup.extra_toml);
    text.push_str(&budgets(
        std::env::var("BATON_BENCH_BUDGETS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
    ));
    text
}

/// `n` `[[budgets]]` of every scope that count every call and are never used up, so each turn
/// runs the whole check (`BATON_BENCH_BUDGETS=N`, docs/budgets.md).
fn budgets(n: usize) -> String {
    let scopes = ["bot", "chat", "trigger", "gateway"];
    (0..n)
        .map(|i| {
            let scope = scopes[i % scopes.len()];
            let window = if scope == "trigger" {
                ""
            } else {
                "window = \"1d\"\n"
            };
            format!(
                "\n[[budgets]]\nname = \"bench-{i}\"\nscope = \"{scope}\"\n\
                 tokens = 1000000000000\n{window}"
            )
        })
        .collect()
}

/// A port on 127.0.0.1 free a moment ago, for a gateway whose config must name its own
/// address before it listens (the port is let go just before the gateway binds it, so another
/// process may take it in between: [`is_port_taken`] tells that apart).
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port on 127.0.0.1")
        .port()
}

/// Whether a gateway did not start because its port, free a moment before, was taken.
pub(crate) fn is_port_taken(err: &StartError) -> bool {
    matches!(err, StartError::Listen { source, .. } if source.kind() == std::io::ErrorKind::AddrInUse)
}

/// A running gateway, its accounts' injectors and what they recorded.
pub(crate) struct Rig {
    /// The gateway.
    pub(crate) gateway: Gateway,
    /// Per bot id.
    pub(crate) injectors: HashMap<String, Injector>,
    /// Shared by every account.
    pub(crate) recorder: Arc<Recorder>,
    /// The database file.
    pub(crate) database: PathBuf,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// Start a gateway for `setup` on a fresh database file (or PostgreSQL database).
    pub(crate) async fn start(setup: &Setup<'_>) -> Rig {
        Rig::start_on(setup, new_database().await).await
    }

    /// Start a gateway for `setup` on the PostgreSQL database at `url` (from [`new_database`],
    /// shared by several gateways), or on a fresh SQLite file for `None`.
    pub(crate) async fn start_on(setup: &Setup<'_>, url: Option<String>) -> Rig {
        Rig::try_start_on(setup, url)
            .await
            .unwrap_or_else(|err| panic!("bench gateway starts: {err}"))
    }

    /// [`Rig::start`] on a fresh SQLite file, or why the gateway did not start.
    pub(crate) async fn try_start(setup: &Setup<'_>) -> Result<Rig, StartError> {
        Rig::try_start_on(setup, new_database().await).await
    }

    async fn try_start_on(setup: &Setup<'_>, url: Option<String>) -> Result<Rig, StartError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("bench.db");
        let env = |name: &str| env(name, url.as_deref());
        let text = config_text(setup);
        let config = Config::from_toml(&text, Path::new("."), &env)
            .unwrap_or_else(|problems| panic!("bench config invalid: {problems:#?}"));
        let recorder = Recorder::new(setup.capacity);
        let injectors = Arc::new(Mutex::new(HashMap::new()));
        let adapters = AdapterOverride::new({
            let recorder = Arc::clone(&recorder);
            let injectors = Arc::clone(&injectors);
            move |account| {
                let me = user_of(&account.bot);
                let (adapter, injector) = BenchAdapter::new(
                    account.platform,
                    account.account_id(),
                    &me,
                    Arc::clone(&recorder),
                );
                let mut injectors = injectors.lock().expect("injectors poisoned");
                injectors.insert(account.bot.clone(), injector);
                Some(adapter as Arc<dyn Adapter>)
            }
        });
        let options = StartOptions {
            listen: Some(format!("127.0.0.1:{}", setup.port)),
            database: Some(db.to_string_lossy().into_owned()),
            // Events come through the adapters; HTTP is not on their path, but the event
            // stream's readers (`watchers.rs`) and the A2A round trips are served over it.
            serve_http: true,
            clock: ScheduleClock::Manual,
        };
        let gateway = Gateway::start_with_adapters(config, options, &env, &adapters).await?;
        let injectors = std::mem::take(&mut *injectors.lock().expect("injectors poisoned"));
        let rig = Rig {
            gateway,
            injectors,
            recorder,
            database: db,
            _dir: dir,
        };
        rig.wait_connected().await;
        Ok(rig)
    }

    async fn wait_connected(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let roster = &self.gateway.engine().roster();
        while !roster
            .accounts()
            .iter()
            .all(|a| a.adapter.connection_state().is_ready())
        {
            assert!(Instant::now() < deadline, "bench accounts did not connect");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The injector of `bot`'s account.
    pub(crate) fn injector(&self, bot: &str) -> &Injector {
        &self.injectors[bot]
    }

    /// Wait until `acks` events were acknowledged and no pipeline run is in flight; false when
    /// `limit` passed first.
    pub(crate) async fn wait_done(&self, acks: u64, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.recorder.acks() >= acks && self.gateway.dispatcher().in_flight() == 0 {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }

    /// Wait until `sends` chunks were posted (and the pipeline is at rest).
    pub(crate) async fn wait_sends(&self, sends: u64, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.recorder.sends() >= sends && self.gateway.dispatcher().in_flight() == 0 {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }

    /// Stop the gateway (drain, close the store). The files stay until the returned
    /// directory is dropped, for a caller that looks at them after a clean stop.
    pub(crate) async fn stop(self) -> tempfile::TempDir {
        self.gateway.shutdown().await;
        self._dir
    }
}

/// What a synthetic group message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// People talking among themselves: goes to the history buffer only.
    Chatter,
    /// `@bot ...`: wakes the bot, which answers.
    Mention,
}

/// Group message `m<n>` in channel `C<chat>` from user `U<sender>` to `bot`'s account.
pub(crate) fn group_message(
    n: usize,
    chat: usize,
    sender: usize,
    bot: &str,
    kind: Kind,
) -> InboundEvent {
    let sender = Sender {
        id: UserId(format!("UH{sender}")),
        name: format!("person {sender}"),
        is_bot: false,
        is_self: false,
    };
    let (text, mentions) = match kind {
        Kind::Chatter => (
            format!("did anyone look at the deploy logs for build {n}? the canary looks fine"),
            Vec::new(),
        ),
        Kind::Mention => (
            format!("@{bot} summarise the thread about build {n}, please"),
            vec![UserId(user_of(bot))],
        ),
    };
    let mut event = InboundEvent::text_message(
        Platform::Slack,
        AccountId::from(bot),
        ChatId(format!("C{chat:05}")),
        ChatKind::Group,
        sender,
        MessageId(format!("m{n}")),
        text,
    );
    event.event_id = Some(format!("Ev{n}"));
    event.mentions = mentions;
    event.timestamp_ms = baton::timing::now_ms();
    event
}

/// The mix: every `mention_every`-th message (by index) mentions the bot, the rest is chatter.
pub(crate) fn kind_of(n: usize, mention_every: usize) -> Kind {
    if mention_every > 0 && n % mention_every == mention_every - 1 {
        Kind::Mention
    } else {
        Kind::Chatter
    }
}
