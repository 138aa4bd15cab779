//! Mentions, threads, redeliveries, 429s, long replies and `allow_bots`.

use super::*;

#[tokio::test]
async fn a_mention_gets_one_threaded_reply_from_the_mentioned_bot_with_its_own_token() {
    let w = world("socket", "").await;
    w.model.script("snark", Step::reply("hi from snark"));
    let ts = "1700000000.000100";
    let text = format!("<@{SNARK}> hello");
    let mention = event_body(
        "A_snark",
        "Ev1",
        "app_mention",
        said(HUMAN, "C1", ts, &text),
    );
    let message = event_body("A_snark", "Ev2", "message", said(HUMAN, "C1", ts, &text));
    let caid_copy = event_body("A_caid", "Ev3", "message", said(HUMAN, "C1", ts, &text));
    // Both events of the pair reach snark; caid (not mentioned) sees the message too.
    w.deliver("snark", events_envelope("env-1", 0, mention))
        .await;
    w.deliver("snark", events_envelope("env-2", 0, message))
        .await;
    w.deliver("caid", events_envelope("env-3", 0, caid_copy))
        .await;
    let posts = w.slack.posts();
    assert_eq!(
        posts.len(),
        1,
        "one reply for the pair, none from caid: {posts:?}"
    );
    assert_eq!(posts[0].token, "xoxb-snark");
    assert_eq!(posts[0].channel, "C1");
    assert_eq!(
        posts[0].thread_ts.as_deref(),
        Some(ts),
        "the reply goes in the thread"
    );
    assert_eq!(posts[0].text, "hi from snark");
    assert_eq!(w.model.requests_for("caid").len(), 0);
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_redelivered_envelope_gets_no_second_reply() {
    let w = world("socket", "").await;
    let ts = "1700000000.000200";
    let body = event_body(
        "A_snark",
        "Ev9",
        "app_mention",
        said(HUMAN, "C1", ts, &format!("<@{SNARK}> once")),
    );
    w.deliver("snark", events_envelope("env-9", 0, body.clone()))
        .await;
    w.deliver("snark", events_envelope("env-9b", 1, body)).await;
    assert_eq!(w.slack.posts().len(), 1);
    assert_eq!(w.model.requests_for("snark").len(), 1);
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_reply_in_a_thread_stays_in_that_thread() {
    let w = world("socket", "").await;
    let mut event = said(
        HUMAN,
        "C1",
        "1700000000.000302",
        &format!("<@{SNARK}> in thread"),
    );
    event["thread_ts"] = "1700000000.000301".into();
    w.deliver(
        "snark",
        events_envelope(
            "env-t",
            0,
            event_body("A_snark", "EvT", "app_mention", event),
        ),
    )
    .await;
    let posts = w.slack.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].thread_ts.as_deref(), Some("1700000000.000301"));
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_429_then_success_is_exactly_one_post_after_retry_after() {
    let w = world("socket", "").await;
    w.slack.rate_limit_next(1);
    let started = std::time::Instant::now();
    let body = event_body(
        "A_snark",
        "Ev4",
        "app_mention",
        said(HUMAN, "C1", "1700000000.000400", &format!("<@{SNARK}> hi")),
    );
    w.deliver("snark", events_envelope("env-4", 0, body)).await;
    w.slack.wait_for(|s| !s.posts().is_empty()).await;
    assert_eq!(w.slack.all_posts().len(), 2, "one 429, one success");
    assert_eq!(w.slack.posts().len(), 1);
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "waited Retry-After"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_9000_character_reply_is_three_ordered_posts_in_the_thread() {
    let w = world("socket", "").await;
    let long: String = (0..9000)
        .map(|i| char::from(b'a' + (i / 4000) as u8))
        .collect();
    w.model.script("snark", Step::reply(long.clone()));
    let ts = "1700000000.000500";
    let body = event_body(
        "A_snark",
        "Ev5",
        "app_mention",
        said(HUMAN, "C1", ts, &format!("<@{SNARK}> long")),
    );
    w.deliver("snark", events_envelope("env-5", 0, body)).await;
    let posts = w.slack.posts();
    assert_eq!(posts.len(), 3);
    assert!(
        posts
            .iter()
            .all(|p| p.thread_ts.as_deref() == Some(ts) && p.token == "xoxb-snark")
    );
    assert!(posts.iter().all(|p| p.text.chars().count() <= 4000));
    let joined: String = posts.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(joined, long, "chunks arrive in order");
    w.gateway.stop().await;
}

#[tokio::test]
async fn another_bots_message_wakes_a_bot_only_where_allow_bots_names_it() {
    let extra = "\n[[chats]]\nplatform = \"slack\"\nid = \"C_ALLOW\"\nallow_bots = [\"caid\"]\n";
    let w = world("socket", extra).await;
    for (n, channel) in ["C_DENY", "C_ALLOW"].into_iter().enumerate() {
        let ts = format!("1700000000.00060{n}");
        let mut event = said(CAID, channel, &ts, &format!("<@{SNARK}> over to you"));
        event["bot_id"] = "B_caid".into();
        let body = event_body("A_snark", &format!("EvB{n}"), "app_mention", event);
        w.deliver("snark", events_envelope(&format!("env-b{n}"), 0, body))
            .await;
    }
    let posts = w.slack.posts();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].channel, "C_ALLOW");
    w.gateway.stop().await;
}

/// SPEC 6.2 on Slack: "@snark ask @caid: ..." is for snark alone; a message opening with a word
/// is for every bot it mentions; `mentions = "all"` wakes every mentioned bot.
#[tokio::test]
async fn a_message_is_for_the_bots_mentioned_before_its_first_word() {
    async fn answered_by(mode: &str, text: &str) -> Vec<String> {
        let extra = format!(
            "\n[chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\nmentions = \"{mode}\"\n"
        );
        let w = world("socket", &extra).await;
        w.model.script("snark", Step::reply("snark here"));
        w.model.script("caid", Step::reply("caid here"));
        let ts = "1700000000.000300";
        for (n, app) in ["snark", "caid"].into_iter().enumerate() {
            let event = event_body(
                &format!("A_{app}"),
                &format!("Ev{n}"),
                "app_mention",
                said(HUMAN, "C1", ts, text),
            );
            w.deliver(app, events_envelope(&format!("env-{n}"), 0, event))
                .await;
        }
        let mut by: Vec<String> = w.slack.posts().iter().map(|p| p.text.clone()).collect();
        by.sort();
        w.gateway.stop().await;
        by
    }
    let router = format!("<@{SNARK}> ask <@{CAID}>: write a haiku");
    assert_eq!(answered_by("leading", &router).await, ["snark here"]);
    let both = format!("can <@{SNARK}> or <@{CAID}> help?");
    assert_eq!(
        answered_by("leading", &both).await,
        ["caid here", "snark here"]
    );
    assert_eq!(
        answered_by("all", &router).await,
        ["caid here", "snark here"]
    );
}
