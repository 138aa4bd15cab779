//! Who gets in: the gate in front of `/`, `/v1`, `/api`, `/mcp` and `/metrics` (a foreign
//! `Host`, a proxied request, a token, another origin), and `/mcp`'s own admission (session
//! cap, initialize size, malformed bodies). Requests go over real HTTP to a real gateway, some
//! written by hand for what a client library will not send.

use serde_json::{Value, json};

use crate::support::gateway::{DEADLINE, TestGateway, echo_config, temp_db};
use crate::support::process::eventually;
use crate::support::raw_http::{RawResponse, request};

const PROTOCOL: &str = "2025-06-18";

/// Every gated path, with a method that reaches a route there (`/` has none: 404 past the gate).
const GATED: [(&str, &str); 5] = [
    ("GET", "/"),
    ("GET", "/v1/models"),
    ("GET", "/api/sessions"),
    ("POST", "/mcp"),
    ("GET", "/metrics"),
];

fn initialize(client: &str) -> String {
    json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                   "clientInfo": {"name": client, "version": "0"}}
    })
    .to_string()
}

async fn send(gw: &TestGateway, method: &str, path: &str, headers: &[(&str, &str)]) -> RawResponse {
    let body = (method == "POST").then(|| initialize("probe"));
    let mut all = vec![("Accept", "application/json, text/event-stream")];
    all.extend_from_slice(headers);
    request(gw.addr(), method, path, &all, body.as_deref()).await
}

#[tokio::test]
async fn without_a_token_foreign_hosts_and_proxied_requests_are_refused_on_every_gated_path() {
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&echo_config(""), &db).await;
    let own = gw.addr().to_string();

    for (method, path) in GATED {
        let local = send(&gw, method, path, &[("Host", &own)]).await;
        assert!(
            local.status != 403 && local.status != 401,
            "{method} {path} from this machine: {local:?}"
        );

        let rebinding = send(&gw, method, path, &[("Host", "evil.example:8642")]).await;
        assert_eq!(rebinding.status, 403, "{method} {path}: {rebinding:?}");
        assert!(rebinding.body.contains("DNS rebinding"), "{rebinding:?}");

        for forwarded in [
            ("X-Forwarded-For", "203.0.113.9"),
            ("Forwarded", "for=203.0.113.9;proto=https"),
        ] {
            let proxied = send(&gw, method, path, &[("Host", &own), forwarded]).await;
            assert_eq!(
                proxied.status, 403,
                "{method} {path} {forwarded:?}: {proxied:?}"
            );
            assert!(proxied.body.contains("proxy"), "{proxied:?}");
            assert!(
                proxied.body.contains("gateway.api_token_env"),
                "{proxied:?}"
            );
        }
    }

    // Nothing refused ran: a post with a foreign Host left the room empty.
    let post = request(
        gw.addr(),
        "POST",
        "/api/local/rooms/lobby/messages",
        &[("Host", "evil.example")],
        Some(r#"{"sender":"admin","text":"/baton pause @snark"}"#),
    )
    .await;
    assert_eq!(post.status, 403, "{post:?}");
    assert!(gw.messages("lobby").await.is_empty());

    // Webhooks and health checks stay open to any Host (platforms and probers send their own).
    let health = request(
        gw.addr(),
        "GET",
        "/healthz",
        &[("Host", "evil.example")],
        None,
    )
    .await;
    assert_eq!(health.status, 200, "{health:?}");
    let hook = request(
        gw.addr(),
        "POST",
        "/hooks/slack/nobody",
        &[("Host", "evil.example")],
        Some("{}"),
    )
    .await;
    assert_eq!(
        hook.status, 404,
        "past the gate, to the webhook route: {hook:?}"
    );
    gw.stop().await;
}

#[tokio::test]
async fn with_a_token_lowercase_bearer_is_accepted_and_a_wrong_token_refused() {
    let (_dir, db) = temp_db();
    let env = |name: &str| (name == "BATON_TEST_TOKEN").then(|| "s3cret".to_owned());
    let gw = TestGateway::start_with_env(
        &echo_config("api_token_env = \"BATON_TEST_TOKEN\""),
        &db,
        &env,
    )
    .await;

    for (method, path) in GATED {
        // Behind a proxy, under the gateway's public name: the token is what counts.
        let proxied = [
            ("Host", "baton.example"),
            ("X-Forwarded-For", "203.0.113.9"),
        ];
        let mut lower = proxied.to_vec();
        lower.push(("Authorization", "bearer s3cret"));
        let ok = send(&gw, method, path, &lower).await;
        assert!(
            ok.status != 401 && ok.status != 403,
            "{method} {path} with `bearer`: {ok:?}"
        );

        for wrong in ["Bearer s3cre", "Bearer s3cret-and-more", "Basic s3cret"] {
            let mut headers = proxied.to_vec();
            headers.push(("Authorization", wrong));
            let refused = send(&gw, method, path, &headers).await;
            assert_eq!(refused.status, 401, "{method} {path} {wrong}: {refused:?}");
            assert!(refused.body.contains("bearer token"), "{refused:?}");
            assert!(!refused.body.contains("s3cret"), "{refused:?}");
        }
        let missing = send(&gw, method, path, &[("Host", &gw.addr().to_string())]).await;
        assert_eq!(
            missing.status, 401,
            "{method} {path} without a token: {missing:?}"
        );
    }
    gw.stop().await;
}

#[tokio::test]
async fn a_cross_origin_post_is_refused() {
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&echo_config(""), &db).await;
    let own = gw.addr().to_string();
    let body = r#"{"sender":"alice","text":"hello"}"#;
    let path = "/api/local/rooms/lobby/messages";

    for origin in ["http://evil.example", "null", "http://localhost:1"] {
        let refused = request(
            gw.addr(),
            "POST",
            path,
            &[("Host", &own), ("Origin", origin)],
            Some(body),
        )
        .await;
        assert_eq!(refused.status, 403, "{origin}: {refused:?}");
        assert!(refused.body.contains("cross-origin"), "{refused:?}");
    }
    assert!(gw.messages("lobby").await.is_empty());

    let own_origin = format!("http://{own}");
    let accepted = request(
        gw.addr(),
        "POST",
        path,
        &[("Host", &own), ("Origin", &own_origin)],
        Some(body),
    )
    .await;
    assert_eq!(accepted.status, 202, "{accepted:?}");
    gw.settle().await;
    assert_eq!(gw.messages("lobby").await[0]["text"], "hello");
    gw.stop().await;
}

/// POST an initialize as `client`; the response.
async fn open_session(gw: &TestGateway, client: &str) -> reqwest::Response {
    gw.http
        .post(format!("{}/mcp", gw.base))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(initialize(client))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_mcp_session_cap_refuses_cleanly_and_expired_sessions_free_their_slot() {
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(
        &echo_config(
            "mcp_max_sessions = 2\nmcp_session_idle_seconds = 1\nmcp_max_init_bytes = 2048",
        ),
        &db,
    )
    .await;

    const GAUGE: &str = "baton_mcp_sessions_open";
    assert_eq!(gw.gauge(GAUGE).await, 0);
    for client in ["one", "two"] {
        let opened = open_session(&gw, client).await;
        assert_eq!(opened.status(), 200, "{client}");
        assert!(opened.headers().contains_key("mcp-session-id"));
    }
    assert_eq!(gw.gauge(GAUGE).await, 2);
    let third = open_session(&gw, "three").await;
    assert_eq!(third.status(), 503);
    assert!(third.headers().contains_key("retry-after"));
    let body: Value = third.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("gateway.mcp_max_sessions is 2"),
        "{message}"
    );
    assert_eq!(body["id"], 0, "the refusal answers the request: {body}");

    // What a session would keep is bounded too.
    let padded = "x".repeat(4096);
    let big = open_session(&gw, &padded).await;
    assert_eq!(big.status(), 413);
    let body: Value = big.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("gateway.mcp_max_init_bytes"),
        "{body}"
    );

    // Unused sessions expire after a second, and their slots open again.
    eventually(DEADLINE, "the expired sessions are gone", || async {
        (gw.gauge(GAUGE).await == 0).then_some(())
    })
    .await;
    assert_eq!(open_session(&gw, "later").await.status(), 200);
    assert_eq!(gw.gauge(GAUGE).await, 1);
    gw.stop().await;
}

#[tokio::test]
async fn malformed_json_on_mcp_is_a_400() {
    let (_dir, db) = temp_db();
    let gw = TestGateway::start(&echo_config(""), &db).await;
    for (body, says) in [
        ("{\"jsonrpc\": \"2.0\", ", "not valid JSON"),
        ("[1, 2, 3]", "not an MCP JSON-RPC message"),
    ] {
        let response = gw
            .http
            .post(format!("{}/mcp", gw.base))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{body}");
        let answer: Value = response.json().await.unwrap();
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
    gw.stop().await;
}
