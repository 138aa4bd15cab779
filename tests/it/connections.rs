//! Connections that could pin the gateway: slow headers, idle keep-alive, a trickling body, more
//! connections than the cap (a webhook still answered then), and the gauge that shows how many
//! are open; and the dual-stack listener. Real sockets against a real gateway.

use std::path::Path;
use std::time::{Duration, Instant};

use baton::config::Config;
use baton::gateway::{Gateway, ScheduleClock, StartOptions};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::fake_slack::{FakeSlack, event_body, signed_headers, unix_now};
use crate::support::gateway::{DEADLINE, TestGateway, echo_config, temp_db};
use crate::support::process::eventually;
use crate::support::raw_http::{read_response, request};

/// Wait until the server closes `stream` (a read returns end-of-file or a reset); how long it
/// took. Anything the server sends first is read and ignored.
async fn closed_after(stream: &mut TcpStream) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    tokio::time::timeout(DEADLINE, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .expect("the server closed the connection");
    started.elapsed()
}

#[tokio::test]
async fn a_slow_header_connection_is_closed_within_the_header_timeout_while_healthz_answers() {
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&echo_config("header_timeout_seconds = 1"), &db).await;

    let mut slow = TcpStream::connect(gw.addr()).await.unwrap();
    slow.write_all(b"GET /healthz HT").await.unwrap();
    let opened = Instant::now();

    let health = gw
        .http
        .get(format!("{}/healthz", gw.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), "ok");

    closed_after(&mut slow).await;
    let held = opened.elapsed();
    assert!(
        held < Duration::from_secs(3),
        "held {held:?} with a 1 s header timeout"
    );
    gw.stop().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(
        &echo_config("idle_timeout_seconds = 1\nheader_timeout_seconds = 30"),
        &db,
    )
    .await;
    let mut stream = TcpStream::connect(gw.addr()).await.unwrap();
    let host = gw.addr().to_string();
    let first = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n");
    stream.write_all(first.as_bytes()).await.unwrap();
    // The whole response of the first request (2 bytes of body), then nothing more.
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    while !answer.ends_with(b"ok") {
        let n = tokio::time::timeout(DEADLINE, stream.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert_ne!(n, 0, "closed before answering");
        answer.extend_from_slice(&buf[..n]);
    }
    let idle = closed_after(&mut stream).await;
    assert!(
        idle < Duration::from_secs(3),
        "idle for {idle:?} with a 1 s idle timeout"
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_trickling_body_is_cut_at_the_body_deadline() {
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&echo_config("body_timeout_seconds = 1"), &db).await;
    let mut stream = TcpStream::connect(gw.addr()).await.unwrap();
    let head = format!(
        "POST /api/local/rooms/lobby/messages HTTP/1.1\r\nHost: {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"sender\":",
        gw.addr()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let response = read_response(&mut stream).await;
    assert_eq!(response.status, 400, "{response:?}");
    assert!(
        response.body.contains("gateway.body_timeout_seconds"),
        "{response:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(gw.messages("lobby").await.is_empty());
    gw.stop().await;
}

#[tokio::test]
async fn at_the_connection_cap_healthz_answers_and_other_routes_are_refused_with_a_reason() {
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(
        &echo_config("max_connections = 3\nheader_timeout_seconds = 60"),
        &db,
    )
    .await;
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(gw.addr()).await.unwrap());
    }
    let host = gw.addr().to_string();
    let refused = eventually(DEADLINE, "a request over the cap is refused", || async {
        let response = request(gw.addr(), "GET", "/v1/models", &[("Host", &host)], None).await;
        (response.status == 503).then_some(response)
    })
    .await;
    assert!(
        refused.body.contains("gateway.max_connections"),
        "{refused:?}"
    );
    assert_eq!(refused.header("retry-after"), Some("5"), "{refused:?}");

    let health = request(gw.addr(), "GET", "/healthz", &[("Host", &host)], None).await;
    assert_eq!(health.status, 200, "{health:?}");
    assert_eq!(health.body, "ok");
    let ready = request(gw.addr(), "GET", "/readyz", &[("Host", &host)], None).await;
    assert_eq!(ready.status, 200, "{ready:?}");

    // The spare pool full too: a new connection is still told why before it is closed.
    let mut spares = Vec::new();
    for _ in 0..baton::http::SPARE_CONNECTIONS {
        spares.push(TcpStream::connect(gw.addr()).await.unwrap());
    }
    let mut past = TcpStream::connect(gw.addr()).await.unwrap();
    let full = read_response(&mut past).await;
    assert_eq!(full.status, 503, "{full:?}");
    assert_eq!(full.header("retry-after"), Some("5"), "{full:?}");
    assert!(full.body.contains("gateway.max_connections"), "{full:?}");
    drop(spares);

    // The idle ones go away; the full service is back.
    drop(idle);
    eventually(
        DEADLINE,
        "the full service after the cap clears",
        || async {
            let response = request(gw.addr(), "GET", "/v1/models", &[("Host", &host)], None).await;
            (response.status == 200).then_some(())
        },
    )
    .await;
    gw.stop().await;
}

#[tokio::test]
async fn open_connections_are_a_gauge_in_metrics() {
    const GAUGE: &str = "baton_http_connections_open";
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&echo_config("header_timeout_seconds = 60"), &db).await;
    // The test client's own kept-alive connection counts too.
    let base = gw.gauge(GAUGE).await;
    assert!(base >= 1, "the request asking is on an open connection");
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(gw.addr()).await.unwrap());
    }
    eventually(DEADLINE, "three more connections counted", || async {
        (gw.gauge(GAUGE).await == base + 3).then_some(())
    })
    .await;
    drop(idle);
    eventually(DEADLINE, "closed connections no longer counted", || async {
        (gw.gauge(GAUGE).await == base).then_some(())
    })
    .await;
    gw.stop().await;
}

#[tokio::test]
async fn a_dual_stack_listener_serves_ipv4_loopback_clients() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("skipped: this machine has no IPv6 loopback");
        return;
    }
    let (_dir, db) = temp_db();
    let config = Config::from_toml(&echo_config(""), Path::new("."), &|_| None).unwrap();
    let options = StartOptions {
        listen: Some("[::]:0".into()),
        database: Some(db.to_string_lossy().into_owned()),
        serve_http: true,
        clock: ScheduleClock::Manual,
    };
    let gateway = Gateway::start(config, options)
        .await
        .expect("gateway starts");
    let port = gateway.addr().expect("listening").port();
    let http = reqwest::Client::new();
    for base in [
        format!("http://127.0.0.1:{port}"),
        format!("http://[::1]:{port}"),
    ] {
        // /v1 is gated: an IPv4 client arrives as ::ffff:127.0.0.1 and still counts as local.
        let models = http.get(format!("{base}/v1/models")).send().await.unwrap();
        assert_eq!(models.status(), 200, "{base}");
    }
    gateway.shutdown().await;
}

/// Streams and idle clients fill every general slot: a platform's webhook still gets its 2xx,
/// from the spare pool, and the message it carried is answered.
#[tokio::test]
async fn with_every_slot_taken_by_streams_and_idle_clients_a_slack_webhook_is_still_answered() {
    const SECRET: &str = "reserved-room-secret";
    let slack = FakeSlack::start().await;
    slack.app("snark", "U_SNARK");
    let (_dir, db) = temp_db();
    // Four slots: one is the event-stream readers' (a quarter), three go to idle clients.
    let config = format!(
        "{}\n[[accounts]]\nbot = \"snark\"\nplatform = \"slack\"\nmode = \"events\"\n\
         bot_token_env = \"SNARK_SLACK_BOT_TOKEN\"\nsigning_secret_env = \"SNARK_SLACK_SIGNING_SECRET\"\n\
         api_url = \"{}\"\n",
        echo_config("max_connections = 4\nheader_timeout_seconds = 60"),
        slack.api_url
    );
    let env = |key: &str| match key {
        "SNARK_SLACK_BOT_TOKEN" => Some("xoxb-snark".to_owned()),
        "SNARK_SLACK_SIGNING_SECRET" => Some(SECRET.to_owned()),
        _ => None,
    };
    let gw = TestGateway::start_with_env(&config, &db, &env).await;
    let host = gw.addr().to_string();
    eventually(DEADLINE, "the Slack account ready", || async {
        let response = request(gw.addr(), "GET", "/readyz", &[("Host", &host)], None).await;
        (response.status == 200).then_some(())
    })
    .await;
    let mut stream = TcpStream::connect(gw.addr()).await.unwrap();
    let ask = format!("GET /api/events HTTP/1.1\r\nHost: {host}\r\n\r\n");
    stream.write_all(ask.as_bytes()).await.unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the event stream opened");
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(TcpStream::connect(gw.addr()).await.unwrap());
    }
    eventually(DEADLINE, "the general slots are full", || async {
        let response = request(gw.addr(), "GET", "/v1/models", &[("Host", &host)], None).await;
        (response.status == 503).then_some(())
    })
    .await;

    let event = json!({
        "user": "U_ALICE", "text": "<@U_SNARK> still there?", "ts": "1700000000.000001",
        "channel": "C1", "event_ts": "1700000000.000001", "channel_type": "channel",
    });
    let body = event_body("A_snark", "EvReserved", "app_mention", event).to_string();
    let signed = signed_headers(SECRET, unix_now(), &body);
    let mut headers: Vec<(&str, &str)> = vec![("Host", &host)];
    headers.extend(signed.iter().map(|(k, v)| (*k, v.as_str())));
    let hook = request(
        gw.addr(),
        "POST",
        "/hooks/slack/snark",
        &headers,
        Some(&body),
    )
    .await;
    assert_eq!(hook.status, 200, "{hook:?}");
    slack
        .wait_for(|s| s.posts().iter().any(|p| p.text.contains("still there?")))
        .await;
    drop((stream, idle));
    gw.stop().await;
}
