//! Webhook mode: URL verification, signatures and tokens, retries.

use super::*;

#[tokio::test]
async fn webhook_answers_url_verification_plain_and_encrypted() {
    let w = world("webhook", "").await;
    let plain = json!({"challenge": "ajls384kdjx98XX", "token": TOKEN, "type": "url_verification"});
    let (status, body) = w.hook("feishu", &plain.to_string(), vec![]).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["challenge"],
        "ajls384kdjx98XX"
    );
    let encrypted = webhook_body(
        &json!({"challenge": "c-enc", "token": TOKEN, "type": "url_verification"}),
        Some(ENCRYPT_KEY),
    );
    let (status, body) = w.hook("feishu", &encrypted, vec![]).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["challenge"],
        "c-enc"
    );
    let wrong = json!({"challenge": "x", "token": "nope", "type": "url_verification"});
    assert_eq!(w.hook("feishu", &wrong.to_string(), vec![]).await.0, 401);
    w.gateway.stop().await;
}

#[tokio::test]
async fn webhook_refuses_bad_signatures_tokens_and_bodies_and_records_nothing() {
    let w = world("webhook", "").await;
    let event = group_mention("snark", "ev-w1", "om_w1", &[(SNARK, "Snark")]);
    let body = webhook_body(&event, Some(ENCRYPT_KEY));
    let now = unix_now();
    assert_eq!(w.hook("feishu", &body, vec![]).await.0, 401, "unsigned");
    let mut forged = signed_headers(ENCRYPT_KEY, now, &body);
    forged[2].1 = signed_headers("wrong-key", now, &body)[2].1.clone();
    assert_eq!(w.hook("feishu", &body, forged).await.0, 401, "badly signed");
    assert_eq!(
        w.hook(
            "feishu",
            &body,
            signed_headers(ENCRYPT_KEY, now - 301, &body)
        )
        .await
        .0,
        401,
        "stale"
    );
    let mut bad_token = event.clone();
    bad_token["header"]["token"] = "not-the-token".into();
    let bad_token = webhook_body(&bad_token, Some(ENCRYPT_KEY));
    assert_eq!(
        w.hook(
            "feishu",
            &bad_token,
            signed_headers(ENCRYPT_KEY, now, &bad_token)
        )
        .await
        .0,
        401,
        "wrong verification token"
    );
    let garbage = "{\"encrypt\": \"bm90IGFuIGV2ZW50\"}";
    assert_eq!(
        w.hook("feishu", garbage, signed_headers(ENCRYPT_KEY, now, garbage))
            .await
            .0,
        400,
        "does not decrypt"
    );
    assert_eq!(
        w.hook(
            "feishu",
            "not json",
            signed_headers(ENCRYPT_KEY, now, "not json")
        )
        .await
        .0,
        400
    );
    assert!(w.feishu.all_posts().is_empty());
    assert_eq!(w.model.requests().len(), 0);
    let transcript = w
        .gateway
        .transcript("bot:snark:feishu:snark:oc_group")
        .await;
    assert!(transcript.is_empty(), "nothing recorded: {transcript:?}");
    // The genuine request is still taken afterwards: nothing was claimed by the refused ones.
    let (status, answer) = w
        .hook(
            "feishu",
            &body,
            signed_headers(ENCRYPT_KEY, unix_now(), &body),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&answer).unwrap()["msg"],
        "success"
    );
    w.feishu.wait_for(|f| f.posts().len() == 1).await;
    w.gateway.stop().await;
}

#[tokio::test]
async fn webhook_event_is_answered_once_and_a_retry_is_a_duplicate() {
    let w = world("webhook", "").await;
    w.model.script("snark", Step::reply("over http"));
    let event = group_mention("snark", "ev-w2", "om_w2", &[(SNARK, "Snark")]);
    let body = webhook_body(&event, Some(ENCRYPT_KEY));
    let started = std::time::Instant::now();
    let (status, _) = w
        .hook(
            "feishu",
            &body,
            signed_headers(ENCRYPT_KEY, unix_now(), &body),
        )
        .await;
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "answered inside Feishu's 3 s"
    );
    w.feishu.wait_for(|f| f.posts().len() == 1).await;
    // Feishu retries (same event id, freshly signed): 200 again, nothing new.
    let (status, _) = w
        .hook(
            "feishu",
            &body,
            signed_headers(ENCRYPT_KEY, unix_now(), &body),
        )
        .await;
    assert_eq!(status, 200);
    let posts = w.feishu.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].text, "over http");
    assert_eq!(posts[0].target, Target::Reply("om_w2".into()));
    assert_eq!(w.model.requests_for("snark").len(), 1);
    let transcript = w
        .gateway
        .transcript("bot:snark:feishu:snark:oc_group")
        .await;
    let text = serde_json::to_string(&transcript).unwrap();
    assert!(
        text.contains("om_w2"),
        "the inbound message is recorded: {text}"
    );
    assert!(
        !text.contains(TOKEN),
        "the verification token is not: {text}"
    );
    w.gateway.stop().await;
}
