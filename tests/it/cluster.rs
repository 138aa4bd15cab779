//! Account leases in a real gateway (README "Running several instances"), on SQLite, where the
//! one instance runs the same leases as on PostgreSQL: a Slack Socket Mode account is
//! connected only while this instance holds its lease, an events-mode one needs none;
//! `/api/cluster`, `baton cluster status` and `/metrics` show the instance; a clean stop frees
//! its leases. Every wait is on a condition with a deadline.

use std::path::Path;
use std::time::Duration;

use crate::support::fake_openai::FakeOpenAi;
use crate::support::fake_slack::FakeSlack;
use crate::support::gateway::TestGateway;
use crate::support::instances::{held, until};
use crate::support::process::{baton, output, show};

/// snark on a Slack socket, caid on Slack's Events API; leases of 3 s (the shortest).
fn config(model: &FakeOpenAi, slack: &FakeSlack) -> String {
    let mut text = "[gateway]\ndrain_seconds = 1\n\n[cluster]\ninstance_id = \"baton-t1\"\n\
                    lease_seconds = 3\n"
        .to_owned();
    for (bot, mode) in [("snark", "socket"), ("caid", "events")] {
        let upper = bot.to_uppercase();
        text.push_str(&format!(
            "\n[[bots]]\nid = \"{bot}\"\nbackend = \"openai\"\nmodel = \"{bot}\"\nbase_url = \"{}\"\n\n\
             [[accounts]]\nbot = \"{bot}\"\nplatform = \"slack\"\nmode = \"{mode}\"\n\
             app_token_env = \"{upper}_SLACK_APP_TOKEN\"\nbot_token_env = \"{upper}_SLACK_BOT_TOKEN\"\n\
             signing_secret_env = \"{upper}_SLACK_SIGNING_SECRET\"\napi_url = \"{}\"\n",
            model.base_url, slack.api_url
        ));
    }
    text
}

fn env(name: &str) -> Option<String> {
    let (bot, rest) = name.split_once("_SLACK_")?;
    let bot = bot.to_lowercase();
    Some(match rest {
        "APP_TOKEN" => format!("xapp-{bot}"),
        "BOT_TOKEN" => format!("xoxb-{bot}"),
        "SIGNING_SECRET" => "8f742231b10e8888abcd99yyyzzz85a5".to_owned(),
        _ => return None,
    })
}

/// A lease row written straight into the database file, as another instance's would be.
fn lease_row(db: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.execute(sql, []).unwrap();
}

#[tokio::test]
async fn the_instance_holds_its_socket_account_and_shows_it_until_a_clean_stop() {
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    slack.app("snark", "U_SNARK");
    slack.app("caid", "U_CAID");
    let (dir, db) = crate::support::gateway::temp_db();
    let gateway = TestGateway::start_with_env(&config(&model, &slack), &db, &env).await;
    slack.wait_connected("snark", 1).await;

    let cluster = gateway.get("/api/cluster").await;
    assert_eq!(cluster["instance"], "baton-t1", "{cluster}");
    assert_eq!(
        held(&cluster),
        [("baton-t1".to_owned(), vec!["slack/snark".to_owned()])],
        "the socket account is held; the events account needs no lease: {cluster}"
    );
    let metrics = gateway.metrics().await;
    assert!(
        metrics.contains("baton_instance_info{instance=\"baton-t1\",version=\""),
        "{metrics}"
    );

    let mut status = baton(dir.path());
    status.args(["cluster", "status", "--database"]).arg(&db);
    let out = output(status).await;
    assert!(out.status.success(), "{}", show(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .find(|l| l.starts_with("baton-t1"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.ends_with("slack/snark"), "{text}");
    assert!(row.contains(" s ago"), "{text}");

    gateway.stop().await;
    let store = baton::store::Store::open(db.to_str().unwrap())
        .await
        .unwrap();
    let after = store.cluster_status().await.unwrap();
    assert!(
        after.instances.is_empty(),
        "a clean stop leaves no row: {after:?}"
    );
    let lease_left: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT count(*) FROM leases", [], |r| r.get(0))
        .unwrap();
    assert_eq!(lease_left, 0, "its leases were freed at once");
}

#[tokio::test]
async fn a_lease_held_elsewhere_drops_the_socket_until_it_is_free_again() {
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    slack.app("snark", "U_SNARK");
    slack.app("caid", "U_CAID");
    let (_dir, db) = crate::support::gateway::temp_db();
    let gateway = TestGateway::start_with_env(&config(&model, &slack), &db, &env).await;
    slack.wait_connected("snark", 1).await;

    // Another instance holds the lease now (as if this one had been cut off past its expiry):
    // this one's renewal fails, and it drops the socket before its lease could have run out.
    let taken = std::time::Instant::now();
    lease_row(
        &db,
        "UPDATE leases SET holder = 'elsewhere', expires_ms = 9000000000000",
    );
    slack.wait_for(|s| !s.socket_open("snark")).await;
    assert!(
        taken.elapsed() <= Duration::from_secs(3),
        "dropped within the 3 s lease: {:?}",
        taken.elapsed()
    );
    until("standby", async || {
        let roster = gateway.get("/api/roster").await;
        roster.to_string().contains("\"standby\"")
    })
    .await;
    let ready = gateway
        .http
        .get(format!("{}/readyz", gateway.base))
        .send()
        .await
        .unwrap();
    assert_eq!(
        ready.status(),
        200,
        "standby is ready: webhooks still come here"
    );
    assert_eq!(
        slack.connects("snark"),
        1,
        "no reconnect while held elsewhere"
    );

    // The other instance is gone: the lease is free, and this one connects again.
    lease_row(&db, "DELETE FROM leases WHERE holder = 'elsewhere'");
    slack.wait_connected("snark", 2).await;
    let cluster = gateway.get("/api/cluster").await;
    assert_eq!(
        held(&cluster),
        [("baton-t1".to_owned(), vec!["slack/snark".to_owned()])],
        "{cluster}"
    );
    gateway.stop().await;
}

#[tokio::test]
async fn a_second_live_instance_under_one_id_is_refused_naming_the_key() {
    let model = FakeOpenAi::start().await;
    let slack = FakeSlack::start().await;
    slack.app("snark", "U_SNARK");
    slack.app("caid", "U_CAID");
    let (_dir, db) = crate::support::gateway::temp_db();
    let text = config(&model, &slack);
    let first = TestGateway::start_with_env(&text, &db, &env).await;
    slack.wait_connected("snark", 1).await;
    let config = baton::config::Config::from_toml(&text, Path::new("."), &env).unwrap();
    let options = baton::gateway::StartOptions {
        listen: Some("127.0.0.1:0".into()),
        database: Some(db.to_string_lossy().into_owned()),
        serve_http: true,
        clock: baton::gateway::ScheduleClock::Manual,
    };
    let Err(err) = baton::gateway::Gateway::start_with_env(config, options, &env).await else {
        panic!("a second gateway started as baton-t1");
    };
    let msg = err.to_string();
    assert!(
        msg.contains("`baton-t1`") && msg.contains("cluster.instance_id"),
        "{msg}"
    );
    assert_eq!(
        slack.connects("snark"),
        1,
        "the refused one connected nothing"
    );
    first.stop().await;
}
