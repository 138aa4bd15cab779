//! A streamed reply keeps `[limits]` as a whole reply does: while it is written it never
//! shows more than `max_reply_bytes` of it, nor more posts than `max_posts_per_reply`, and it
//! ends as the cut reply with its note.

use super::*;

/// The note a cut reply ends with.
const GOES_ON: &str = "… the reply goes on";

#[tokio::test]
async fn a_streamed_reply_never_makes_more_posts_than_the_cap() {
    let limits = format!("{FEEDBACK}\n[limits]\nmax_posts_per_reply = 2\n");
    let w = world(On::Discord, &limits).await;
    let paragraph = format!("{REPLY}\n\n");
    let long = paragraph.repeat(22).trim_end().to_owned(); // about 5,400 characters: 3 posts
    assert!(baton::post::split(&long, 2000).len() > 2);
    w.model
        .script("snark", Step::slow(&long, 120, Duration::from_millis(40)));
    w.ask("tell me everything").await;
    let seen = w.seen();
    assert!(
        seen.posts() <= 2,
        "more posts than max_posts_per_reply: {:?}",
        seen.all()
    );
    assert_eq!(seen.deletes(), 0, "posted past the cap, then took it back");
    let shown = seen.shown();
    assert!(
        shown.last().is_some_and(|last| last.contains(GOES_ON)),
        "{shown:?}"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_natively_streamed_reply_never_shows_more_than_max_reply_bytes() {
    let limits = format!("{NATIVE}\n[limits]\nmax_reply_bytes = 300\n");
    let w = world(On::Slack, &limits).await;
    let long = [REPLY; 3].join(" ");
    w.model
        .script("snark", Step::slow(&long, 16, Duration::from_millis(40)));
    w.ask("tell me everything").await;
    let seen = w.seen();
    for text in seen.texts() {
        let reply = text.split("\n\n…").next().unwrap_or_default();
        assert!(
            reply.len() <= 300,
            "showed {} bytes of the reply: {text:?}",
            reply.len()
        );
        assert!(long.starts_with(reply), "{text:?}");
    }
    let shown = seen.shown();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].contains(GOES_ON), "{shown:?}");
    w.gateway.stop().await;
}
