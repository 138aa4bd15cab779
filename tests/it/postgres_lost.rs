//! PostgreSQL lost mid-run (SPEC 10.1, issue 51 "Bad input"): a gateway whose database server
//! stops (`pg_ctl stop -m fast`, as a restart does) refuses new messages with the reason instead
//! of acknowledging what it could not write, says why in `/readyz` and `/metrics`, connects again
//! by itself once the server is back, and answers again; the first read and the first write after
//! a restart that its connections slept through both succeed. Every wait is on a condition with
//! a deadline.

use std::time::Duration;

use baton::store::{Claim, PgUrl, Store};
use serde_json::Value;

use crate::support::gateway::{TestGateway, echo_config, temp_db};
use crate::support::postgres::{URL_ENV, own_server};
use crate::support::process::eventually;

/// Bounds each wait: the writer's pauses between attempts grow to 5 s.
const WAIT: Duration = Duration::from_secs(30);

/// `GET /readyz`: its status and body.
async fn readyz(gateway: &TestGateway) -> (u16, Value) {
    let response = gateway
        .http
        .get(format!("{}/readyz", gateway.base))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Posts `text` into room `r1`; the status.
async fn post(gateway: &TestGateway, text: &str) -> u16 {
    gateway
        .http
        .post(format!("{}/api/local/rooms/r1/messages", gateway.base))
        .json(&serde_json::json!({"sender": "alice", "text": text}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_server_fails_writes_with_the_reason_and_the_gateway_connects_again() {
    let (server, url) = own_server("lost").await;
    let (_dir, db) = temp_db();
    let config = echo_config(&format!("database_url_env = \"{URL_ENV}\""));
    let env = move |name: &str| (name == URL_ENV).then(|| url.clone());
    let gateway = TestGateway::start_with_env(&config, &db, &env).await;
    assert_eq!(readyz(&gateway).await.0, 200);
    gateway.say("r1", "alice", "@snark before").await;
    eventually(WAIT, "the answer before the server stops", || async {
        (!gateway.said_by("r1", "snark").await.is_empty()).then_some(())
    })
    .await;

    server.stop().await;
    let (_, body) = eventually(WAIT, "/readyz to say the store is lost", || async {
        let (status, body) = readyz(&gateway).await;
        (status == 503).then_some((status, body))
    })
    .await;
    let why = body["store_error"].as_str().unwrap_or_default().to_owned();
    assert!(why.contains("connection to PostgreSQL is lost"), "{body}");
    assert_eq!(body["store"], false, "{body}");
    eventually(WAIT, "the connected gauge to read 0", || async {
        (gateway.gauge("baton_store_connected").await == 0).then_some(())
    })
    .await;
    // Not written, so not acknowledged: the poster is told to try again.
    assert_eq!(post(&gateway, "@snark while down").await, 503);

    server.start().await;
    eventually(WAIT, "/readyz to be ready again", || async {
        (readyz(&gateway).await.0 == 200).then_some(())
    })
    .await;
    assert_eq!(gateway.gauge("baton_store_connected").await, 1);
    assert!(gateway.gauge("baton_store_reconnects_total").await >= 1);
    eventually(WAIT, "an answer after the server is back", || async {
        (post(&gateway, "@snark after").await == 202).then_some(())
    })
    .await;
    eventually(WAIT, "the answer after the server is back", || async {
        let said = gateway.said_by("r1", "snark").await;
        said.iter()
            .any(|m| m["text"].as_str().is_some_and(|t| t.contains("after")))
            .then_some(())
    })
    .await;
    gateway.stop().await;
}

/// A restart that the store's connections slept through costs neither a write nor a read: the
/// writer's connection and the pooled reader's died idle, and the first write and the first read
/// after the server is back each succeed, on a new connection. Nothing else writes on this
/// store handle, so the first write after the restart is the one that meets the dead
/// connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_died_idle_in_a_restart_cost_no_write_and_no_read() {
    let (server, url) = own_server("idle").await;
    let store = Store::open_postgres(PgUrl::parse(&url).unwrap())
        .await
        .unwrap();
    let now = baton::timing::now_ms();
    assert_eq!(
        store.claim("idle", "before", now).await.unwrap(),
        Claim::Fresh
    );
    store.cluster_status().await.unwrap();

    server.restart().await;
    let first_read = store.cluster_status().await;
    assert!(
        first_read.is_ok(),
        "the first read after the restart: {first_read:?}"
    );
    let first_write = store.claim("idle", "after", now).await;
    assert!(
        matches!(first_write, Ok(Claim::Fresh)),
        "the first write after the restart: {first_write:?}"
    );
    assert_eq!(
        store.claim("idle", "before", now).await.unwrap(),
        Claim::Duplicate,
        "the write before the restart is kept"
    );
    store.close().await.unwrap();
}
