//! The long connection and the API client: pings, fragments, rate limits, tokens, Lark's host.

use super::*;

#[tokio::test]
async fn pings_follow_the_server_interval_and_a_silent_connection_is_replaced() {
    let w = world_on("feishu", "websocket", "", |f| {
        f.set_ping_interval("snark", 0.3)
    })
    .await;
    w.feishu.wait_for(|f| f.pings("snark").len() >= 3).await;
    let pings = w.feishu.pings("snark");
    let gap = pings[2] - pings[1];
    assert!(
        gap >= Duration::from_millis(150) && gap < Duration::from_secs(5),
        "pings every PingInterval: {gap:?}"
    );
    assert_eq!(w.feishu.connects("snark"), 1);
    // The connection stops answering anything: the watchdog replaces it.
    w.feishu.mute("snark");
    w.feishu.wait_connected("snark", 2).await;
    assert!(
        w.feishu.endpoint_calls("snark") >= 2,
        "a fresh endpoint each time"
    );
    w.deliver(
        "snark",
        &group_mention("snark", "ev-5", "om_5", &[(SNARK, "Snark")]),
    )
    .await;
    assert_eq!(w.feishu.posts().len(), 1, "the next event is answered");
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_fragmented_event_is_reassembled_answered_and_acked_once() {
    let w = world("websocket", "").await;
    let event = group_mention("snark", "ev-6", "om_6", &[(SNARK, "Snark")]);
    let frame = w.feishu.push_fragments("snark", &event, 3);
    w.feishu.wait_for(|f| f.acks_for(&frame) >= 1).await;
    w.gateway.settle().await;
    assert_eq!(w.feishu.acks_for(&frame), 1, "one ack for the whole event");
    assert_eq!(w.feishu.posts().len(), 1);
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_rate_limit_then_success_is_exactly_one_message() {
    let w = world("websocket", "").await;
    w.feishu
        .rate_limit_next(&[RateLimit::Code(230020), RateLimit::Http429]);
    let started = std::time::Instant::now();
    w.deliver(
        "snark",
        &group_mention("snark", "ev-7", "om_7", &[(SNARK, "Snark")]),
    )
    .await;
    w.feishu.wait_for(|f| !f.posts().is_empty()).await;
    let all = w.feishu.all_posts();
    assert_eq!(all.len(), 3, "two refusals, one success: {all:?}");
    assert_eq!(w.feishu.posts().len(), 1);
    assert!(
        all.iter().all(|p| p.uuid == all[0].uuid),
        "the retry reuses the uuid"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "waited as asked"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn an_expired_token_is_refreshed_once_and_the_send_retried() {
    // Without the typing reaction, the post is the first call to meet the expired token.
    let w = world("websocket", "\n[feedback]\ntyping = false\n").await;
    assert_eq!(w.feishu.token_fetches("snark"), 1);
    w.deliver(
        "snark",
        &group_mention("snark", "ev-8", "om_8", &[(SNARK, "Snark")]),
    )
    .await;
    assert_eq!(w.feishu.token_fetches("snark"), 1, "the token is cached");
    w.feishu.expire_tokens("snark");
    w.deliver(
        "snark",
        &group_mention("snark", "ev-9", "om_9", &[(SNARK, "Snark")]),
    )
    .await;
    assert_eq!(w.feishu.token_fetches("snark"), 2, "one refresh");
    let all = w.feishu.all_posts();
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(all[1].outcome, Outcome::TokenRefused);
    assert!(matches!(all[2].outcome, Outcome::Sent(_)));
    assert_eq!(all[2].target, Target::Reply("om_9".into()));
    w.gateway.stop().await;
}

#[tokio::test]
async fn the_tenant_token_is_refreshed_before_it_expires() {
    let feishu = FakeFeishu::start().await;
    feishu.app("snark", SNARK);
    feishu.set_token_expire(2);
    let api = Api::new(&feishu.api_url, "cli_snark", Secret::new("secret-snark"));
    let first = api.tenant_token().await.unwrap();
    assert_eq!(api.tenant_token().await.unwrap(), first, "cached");
    assert_eq!(feishu.token_fetches("snark"), 1);
    // With 2 s to live, it is replaced after half its life rather than used until it dies.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_ne!(api.tenant_token().await.unwrap(), first);
    assert_eq!(feishu.token_fetches("snark"), 2);
}

#[tokio::test]
async fn lark_uses_the_lark_host_unless_api_url_overrides_it() {
    let default = FeishuSettings::new(
        Platform::Lark,
        "snark".into(),
        Mode::Websocket,
        "cli_snark",
        Secret::new("s"),
    );
    assert_eq!(default.api_url, LARK_API_URL);
    // With `api_url` set (here: the fake), a lark account talks there, over both modes.
    let w = world_on("lark", "webhook", "", |_| {}).await;
    assert!(w.feishu.bot_info_calls("snark") >= 1 && w.feishu.bot_info_calls("caid") >= 1);
    w.deliver(
        "caid",
        &group_mention("caid", "ev-l1", "om_l1", &[(CAID, "Caid")]),
    )
    .await;
    let event = group_mention("snark", "ev-l2", "om_l2", &[(SNARK, "Snark")]);
    let body = webhook_body(&event, Some(ENCRYPT_KEY));
    let (status, _) = w
        .hook(
            "lark",
            &body,
            signed_headers(ENCRYPT_KEY, unix_now(), &body),
        )
        .await;
    assert_eq!(status, 200);
    w.feishu.wait_for(|f| f.posts().len() == 2).await;
    let sessions = w.gateway.get("/api/sessions").await.to_string();
    assert!(
        sessions.contains("bot:snark:lark:snark:oc_group"),
        "{sessions}"
    );
    assert_eq!(
        w.hook("feishu", &body, vec![]).await.0,
        404,
        "no feishu account named snark"
    );
    w.gateway.stop().await;
}
