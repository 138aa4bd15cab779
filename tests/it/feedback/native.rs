//! `stream = "native"`: the reply streams by the platform's own streaming where it has one
//! (Slack's `chat.startStream` / `appendStream` / `stopStream`, Feishu/Lark's CardKit
//! streaming card), with the same rules as edit streaming, and by edits where the platform
//! refuses it.

use super::*;

/// The model writes `text` 4 characters every 20 ms: many small steps, to outlast an edit cap.
fn in_small_steps(text: &str) -> Step {
    Step::slow(text, 4, Duration::from_millis(20))
}

/// A slow reply streamed natively: shown early, only ever added to, whole at the end, and on
/// record once with the stream's id.
async fn streams_natively(on: On) -> World {
    let w = world(on, NATIVE).await;
    w.model.script("snark", slowly(REPLY));
    let asked = tokio::time::Instant::now();
    w.ask("why did the build break?").await;
    // For BENCHMARKS.md (printed with --nocapture; never asserted on).
    let seen = w.seen();
    let ms = |at: Option<tokio::time::Instant>| at.map(|at| (at - asked).as_millis());
    eprintln!(
        "latency native {on:?}: first visible text {:?} ms, whole reply shown {:?} ms, model done {:?} ms",
        ms(seen.first_post_at()),
        ms(seen.last_text_at()),
        ms(w.model.finished().first().copied()),
    );
    assert_streamed(&w, REPLY);
    assert_eq!(seen.posts(), 1, "{on:?}: {:?}", seen.all());
    let session = only_transcript(&w).await;
    let replies: Vec<&Value> = session.iter().filter(|e| e["kind"] == "reply").collect();
    assert_eq!(replies.len(), 1, "{session:?}");
    assert_eq!(replies[0]["text"], REPLY);
    let Seen::Post { id, .. } = &seen
        .all()
        .into_iter()
        .find(|s| matches!(s, Seen::Post { .. }))
        .unwrap()
    else {
        unreachable!()
    };
    // Slack's ids are `<channel>:<ts>`.
    assert!(
        replies[0]["platform_message_id"]
            .as_str()
            .is_some_and(|recorded| recorded.ends_with(id.as_str())),
        "{:?} is not the stream's {id}",
        replies[0]["platform_message_id"]
    );
    w
}

#[tokio::test]
async fn slack_streams_a_reply_with_its_streaming_methods_to_the_asker() {
    let w = streams_natively(On::Slack).await;
    let Fake::Slack(slack) = &w.fake else {
        unreachable!()
    };
    let calls = slack.stream_calls();
    let methods: Vec<&str> = calls.iter().map(|c| c.method).collect();
    assert_eq!(methods.first(), Some(&"chat.startStream"), "{methods:?}");
    assert_eq!(methods.last(), Some(&"chat.stopStream"), "{methods:?}");
    assert!(
        methods
            .iter()
            .filter(|m| **m == "chat.appendStream")
            .count()
            >= 2,
        "{methods:?}"
    );
    let start = &calls[0];
    assert_eq!(start.thread_ts.as_deref(), Some("1700000000.000001"));
    assert_eq!(start.recipient_user_id.as_deref(), Some("U_HUMAN"));
    assert_eq!(start.recipient_team_id.as_deref(), Some("T1"));
    assert!(start.text.chars().count() >= 40, "{:?}", start.text);
    let streamed: String = calls.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(streamed, REPLY, "the stream's pieces make the reply once");
    assert!(
        calls.iter().all(|c| c.ts == start.ts),
        "one stream: {calls:?}"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn feishu_streams_a_reply_in_a_card_past_the_edit_cap() {
    let w = world(On::Feishu, NATIVE).await;
    let long = REPLY.repeat(3);
    w.model.script("snark", in_small_steps(&long));
    w.ask("why did the build break?").await;
    let Fake::Feishu(feishu) = &w.fake else {
        unreachable!()
    };
    let seen = w.seen();
    assert_eq!(seen.shown(), [long.as_str()], "{:?}", seen.all());
    assert_eq!(seen.posts(), 1);
    assert!(
        feishu.card_updates() > 20,
        "a card is not held to the 20-edit cap: {} updates",
        feishu.card_updates()
    );
    assert_eq!(feishu.streaming_cards(), 0, "the card left streaming mode");
    let posts = feishu.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].msg_type, "interactive");
    let texts = seen.texts();
    for pair in texts.windows(2) {
        assert!(pair[1].starts_with(&pair[0]), "took text back: {pair:?}");
    }
    w.gateway.stop().await;
}

#[tokio::test]
async fn feishu_streams_a_slow_reply_in_a_card() {
    let w = streams_natively(On::Feishu).await;
    w.gateway.stop().await;
}

/// The silent token is never shown in a native stream, and a silent turn starts none.
async fn keeps_the_silent_token_out(on: On) {
    let w = world(on, NATIVE).await;
    w.model.script(
        "snark",
        Step::slow("NO_REPLY", 2, Duration::from_millis(60)),
    );
    w.ask("anything to add?").await;
    assert_eq!(w.seen().posts(), 0, "{on:?}: a silent turn posted");
    let trailing = format!("{REPLY}\n\nNO_REPLY");
    w.model.script("snark", slowly(&trailing));
    w.ask("and now?").await;
    let texts = w.seen().texts();
    assert!(!texts.is_empty(), "{on:?}: nothing posted");
    for text in &texts {
        assert!(!text.contains("NO_"), "{on:?}: {text:?}");
    }
    assert_eq!(w.seen().shown(), [REPLY], "{on:?}");
    w.gateway.stop().await;
}

#[tokio::test]
async fn slack_never_streams_the_silent_token() {
    keeps_the_silent_token_out(On::Slack).await;
}

#[tokio::test]
async fn feishu_never_streams_the_silent_token() {
    keeps_the_silent_token_out(On::Feishu).await;
}

/// A workspace without the streaming methods, an app without CardKit: the reply streams by
/// editing its post instead.
async fn falls_back_to_edits(on: On) {
    let w = world(on, NATIVE).await;
    match &w.fake {
        Fake::Slack(slack) => slack.without_streams(),
        Fake::Feishu(feishu) => feishu.without_cards(),
        Fake::Discord(_) => {}
    }
    w.model.script("snark", slowly(REPLY));
    w.ask("why did the build break?").await;
    assert_streamed(&w, REPLY);
    assert_eq!(w.seen().posts(), 1);
    match &w.fake {
        Fake::Slack(slack) => assert!(slack.stream_calls().is_empty()),
        Fake::Feishu(feishu) => assert_eq!(feishu.posts()[0].msg_type, "text"),
        Fake::Discord(_) => {}
    }
    w.gateway.stop().await;
}

#[tokio::test]
async fn slack_streams_by_edits_where_the_workspace_refuses_streams() {
    falls_back_to_edits(On::Slack).await;
}

#[tokio::test]
async fn feishu_streams_by_edits_where_the_app_may_not_make_cards() {
    falls_back_to_edits(On::Feishu).await;
}

/// Discord has no streaming of its own: `native` streams by edits there.
#[tokio::test]
async fn discord_streams_natively_by_edits() {
    falls_back_to_edits(On::Discord).await;
}
