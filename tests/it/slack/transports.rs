//! Socket Mode and the Events API: slash commands, reconnects, signatures, challenges, retries.

use super::*;

#[tokio::test]
async fn slash_command_over_socket_mode_is_refused_for_a_non_admin_and_works_for_an_admin() {
    let w = world("socket", "").await;
    for (n, (user, line)) in [
        (HUMAN, "help"),
        (ADMIN, "help"),
        (ADMIN, "status"),
        (ADMIN, "activation always"),
    ]
    .into_iter()
    .enumerate()
    {
        let envelope = json!({
            "envelope_id": format!("cmd-{n}"), "type": "slash_commands", "accepts_response_payload": true,
            "payload": { "token": "t", "team_id": "T1", "channel_id": "C1", "channel_name": "general",
                "user_id": user, "user_name": user, "command": "/baton", "text": line,
                "api_app_id": "A_snark", "response_url": w.slack.response_url(&format!("r{n}")),
                "trigger_id": format!("trig.{n}") }
        });
        w.deliver("snark", envelope).await;
    }
    w.slack.wait_for(|s| s.responses().len() == 4).await;
    let responses = w.slack.responses();
    assert_eq!(responses[0].0, "r0");
    assert!(
        responses[0].1.contains("Only baton admins"),
        "{responses:?}"
    );
    for (id, text) in &responses[1..] {
        assert!(!text.contains("Only baton admins"), "{id}: {text}");
    }
    assert!(
        responses[1].1.contains("status"),
        "help lists the commands: {}",
        responses[1].1
    );
    assert!(
        responses[3].1.contains("always"),
        "activation answered: {}",
        responses[3].1
    );
    assert!(
        w.slack.posts().is_empty(),
        "command answers are private, never posted"
    );
    assert_eq!(
        w.model.requests().len(),
        0,
        "no model turn for admin commands"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_disconnect_is_followed_by_a_reconnect_and_no_event_is_lost() {
    let w = world("socket", "").await;
    w.slack.push(
        "snark",
        &json!({"type": "disconnect", "reason": "refresh_requested",
        "debug_info": {"host": "fake"}}),
    );
    w.slack.wait_connected("snark", 2).await;
    let body = event_body(
        "A_snark",
        "Ev7",
        "app_mention",
        said(
            HUMAN,
            "C1",
            "1700000000.000700",
            &format!("<@{SNARK}> still there?"),
        ),
    );
    w.deliver("snark", events_envelope("env-7", 0, body)).await;
    assert_eq!(w.slack.posts().len(), 1);
    w.gateway.stop().await;
}

#[tokio::test]
async fn events_api_refuses_bad_signatures_answers_challenges_and_ignores_retries() {
    let w = world("events", "").await;
    let ts = "1700000000.000800";
    let body = event_body(
        "A_snark",
        "EvH",
        "app_mention",
        said(HUMAN, "C1", ts, &format!("<@{SNARK}> over http")),
    )
    .to_string();
    let now = unix_now();
    assert_eq!(w.hook(&body, vec![], false).await, 401, "unsigned");
    let mut bad = signed_headers(SECRET, now, &body);
    bad[1].1 = signed_headers("wrong-secret", now, &body)[1].1.clone();
    assert_eq!(w.hook(&body, bad, false).await, 401, "badly signed");
    assert_eq!(
        w.hook(&body, signed_headers(SECRET, now - 301, &body), false)
            .await,
        401,
        "stale"
    );
    // Correctly signed, but not an Events API payload: malformed, refused, nothing recorded.
    let array = json!([json!({"type": "event_callback"}), body.clone()]).to_string();
    for odd in [array.as_str(), "\"event_callback\"", "42"] {
        assert_eq!(
            w.hook(odd, signed_headers(SECRET, unix_now(), odd), false)
                .await,
            400,
            "{odd}"
        );
    }
    assert!(w.slack.all_posts().is_empty());
    assert_eq!(w.model.requests().len(), 0);
    let metrics = w.gateway.gateway.engine().metrics();
    assert_eq!(metrics.get(&baton::metrics::EVENTS_IN, "slack"), 0);

    let challenge = json!({"token": "t", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}).to_string();
    let response = w
        .gateway
        .http
        .post(format!("{}/hooks/slack/snark", w.gateway.base))
        .header("content-type", "application/json")
        .headers(
            signed_headers(SECRET, now, &challenge)
                .into_iter()
                .map(|(k, v)| (k.parse().unwrap(), v.parse().unwrap()))
                .collect(),
        )
        .body(challenge.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(
        answer["challenge"],
        "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );

    // The account answers once auth.test has told it who it is; Slack retries a 503 meanwhile.
    let mut status = 0;
    for _ in 0..200 {
        status = w
            .hook(&body, signed_headers(SECRET, unix_now(), &body), false)
            .await;
        if status != 503 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status, 200);
    w.slack.wait_for(|s| s.posts().len() == 1).await;
    let mut retry = signed_headers(SECRET, unix_now(), &body);
    retry.push(("x-slack-retry-num", "1".into()));
    retry.push(("x-slack-retry-reason", "http_timeout".into()));
    assert_eq!(w.hook(&body, retry, false).await, 200);
    let posts = w.slack.posts();
    assert_eq!(posts.len(), 1, "the retry is a duplicate");
    assert_eq!(posts[0].thread_ts.as_deref(), Some(ts));
    assert_eq!(posts[0].token, "xoxb-snark");

    // Slash command over HTTP: form-encoded and signed.
    let form = |user: &str, id: &str| {
        format!(
            "token=t&team_id=T1&channel_id=C1&channel_name=general&user_id={user}&user_name=x\
             &command=%2Fbaton&text=status&api_app_id=A_snark&response_url={}&trigger_id=trig.{id}",
            url_encode(&w.slack.response_url(id))
        )
    };
    let refused = form(HUMAN, "h1");
    assert_eq!(
        w.hook(&refused, signed_headers(SECRET, unix_now(), &refused), true)
            .await,
        200
    );
    let allowed = form(ADMIN, "h2");
    assert_eq!(
        w.hook(&allowed, vec![], true).await,
        401,
        "unsigned command"
    );
    assert_eq!(
        w.hook(&allowed, signed_headers(SECRET, unix_now(), &allowed), true)
            .await,
        200
    );
    w.slack.wait_for(|s| s.responses().len() == 2).await;
    let responses = w.slack.responses();
    assert!(
        responses
            .iter()
            .any(|(id, t)| id == "h1" && t.contains("Only baton admins"))
    );
    assert!(
        responses
            .iter()
            .any(|(id, t)| id == "h2" && !t.contains("Only baton admins"))
    );
    w.gateway.stop().await;
}

pub(super) fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
