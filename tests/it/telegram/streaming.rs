//! `stream = "native"` on Telegram: in a private chat the reply shows as a draft
//! (`sendMessageDraft`, one `draft_id`) and is then posted once, whole; in a group it streams by
//! editing its post (`editMessageText`). Nothing before `stream_min_chars`, never the silent
//! token.

use std::time::Duration;

use super::*;

const FEEDBACK: &str =
    "\n[feedback]\nstream = \"native\"\nstream_min_chars = 10\nedit_interval_ms = 100\n";
const REPLY: &str = "The build broke because the cache key changed after the toolchain update.";

#[tokio::test]
async fn a_private_reply_streams_as_a_draft_then_is_posted_once() {
    let w = world(FEEDBACK).await;
    w.model
        .script("snark", Step::slow(REPLY, 6, Duration::from_millis(60)));
    w.telegram.say(
        HUMAN.0,
        HUMAN,
        "why?",
        Value::Array(vec![]),
        None,
        Some("snark"),
    );
    w.telegram.wait_for(|t| t.posts().len() == 1).await;
    w.settle().await;
    let drafts = w.telegram.drafts();
    assert!(drafts.len() >= 2, "the draft grew: {drafts:?}");
    let id = drafts[0].draft_id;
    assert_ne!(id, 0);
    for draft in &drafts {
        assert_eq!(
            (draft.chat, draft.draft_id),
            (HUMAN.0, id),
            "one draft per reply"
        );
        assert!(
            draft.text.chars().count() >= 10,
            "nothing before stream_min_chars"
        );
        assert!(REPLY.starts_with(&draft.text), "{:?}", draft.text);
    }
    let posts = w.telegram.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].text, REPLY, "posted once, whole");
    assert!(
        !w.telegram
            .seen()
            .all()
            .iter()
            .any(|s| matches!(s, crate::support::seen::Seen::Edit { .. })),
        "no edits"
    );
}

#[tokio::test]
async fn a_silent_private_turn_shows_no_draft_of_the_token() {
    let w = world(FEEDBACK).await;
    w.model.script(
        "snark",
        Step::slow("NO_REPLY", 2, Duration::from_millis(60)),
    );
    w.telegram.say(
        HUMAN.0,
        HUMAN,
        "psst",
        Value::Array(vec![]),
        None,
        Some("snark"),
    );
    w.settle().await;
    assert_eq!(w.model.requests_for("snark").len(), 1);
    assert!(w.telegram.drafts().is_empty(), "{:?}", w.telegram.drafts());
    assert!(w.telegram.posts().is_empty());
}

#[tokio::test]
async fn a_group_reply_streams_by_editing_its_post() {
    let w = world(FEEDBACK).await;
    w.model
        .script("snark", Step::slow(REPLY, 6, Duration::from_millis(60)));
    w.say(Some(SNARK.1), "why?", None);
    w.telegram
        .wait_for(|t| t.seen().shown() == [REPLY.to_owned()])
        .await;
    w.settle().await;
    assert!(w.telegram.drafts().is_empty(), "no drafts in groups");
    assert_eq!(w.telegram.seen().posts(), 1);
    assert!(
        w.telegram.seen().edits() >= 1,
        "{:?}",
        w.telegram.seen().all()
    );
}
