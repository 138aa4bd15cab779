//! Webhook mode: baton registers `<public_url>/hooks/telegram/<account>` with its secret at
//! start, and a request without the right `X-Telegram-Bot-Api-Secret-Token` gets 401 and
//! reaches nothing.

use super::*;

#[tokio::test]
async fn the_webhook_is_registered_and_its_secret_checked() {
    let w = world_in("webhook", "", "").await;
    let (url, secret) = w.telegram.webhook("snark").expect("setWebhook was called");
    assert_eq!(url, "https://baton.example.com/hooks/telegram/snark");
    assert_eq!(secret, SECRET);
    assert_eq!(
        w.telegram.polls("snark"),
        0,
        "a webhook account does not poll"
    );
    w.model.script("snark", Step::reply("Hooked."));

    // Wrong, then missing secret: 401, no turn, nothing on record.
    for wrong in ["not-the-secret", ""] {
        w.telegram.say(
            GROUP,
            HUMAN,
            "@snark_bot hi",
            Value::Array(vec![mention(0, SNARK.1)]),
            None,
            Some("snark"),
        );
        let statuses = w
            .telegram
            .push_webhook(&w.gateway.base, "snark", Some(wrong))
            .await;
        assert_eq!(statuses, [401], "secret {wrong:?}");
    }
    w.gateway.settle().await;
    assert!(w.telegram.posts().is_empty());
    let sessions = w.gateway.get("/api/sessions").await;
    assert_eq!(sessions, serde_json::json!([]), "nothing recorded");

    // The right secret: taken, answered.
    let asked = w.telegram.say(
        GROUP,
        HUMAN,
        "@snark_bot hi",
        Value::Array(vec![mention(0, SNARK.1)]),
        None,
        Some("snark"),
    );
    let statuses = w
        .telegram
        .push_webhook(&w.gateway.base, "snark", None)
        .await;
    assert_eq!(statuses, [200]);
    w.telegram.wait_for(|t| t.posts().len() == 1).await;
    let post = &w.telegram.posts()[0];
    assert_eq!((post.text.as_str(), post.quotes), ("Hooked.", Some(asked)));
}
