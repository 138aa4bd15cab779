//! Replies streamed into the platform by editing posts: the first text early, edits that
//! only add, the silent token never shown, drafts never left behind.

use super::*;

pub(super) async fn streams_a_slow_reply(on: On) {
    let w = world(on, FEEDBACK).await;
    w.model.script("snark", slowly(REPLY));
    let asked = tokio::time::Instant::now();
    w.ask("why did the build break?").await;
    // For BENCHMARKS.md (printed with --nocapture; never asserted on).
    let seen = w.seen();
    let ms = |at: Option<tokio::time::Instant>| at.map(|at| (at - asked).as_millis());
    eprintln!(
        "latency {on:?}: first visible text {:?} ms, whole reply shown {:?} ms, model done {:?} ms",
        ms(seen.first_post_at()),
        ms(seen.last_text_at()),
        ms(w.model.finished().first().copied()),
    );
    assert_streamed(&w, REPLY);
    assert_typing_outlived_the_reply(&w);
    assert_typing_ended(&w);
    // The request asked for a stream with usage.
    let request = &w.model.requests_for("snark")[0];
    assert_eq!(request["stream"], true);
    assert_eq!(request["stream_options"]["include_usage"], true);
    // The transcript holds the final text, with the post's platform id.
    let session = only_transcript(&w).await;
    let replies: Vec<&Value> = session.iter().filter(|e| e["kind"] == "reply").collect();
    assert_eq!(replies.len(), 1, "{session:?}");
    assert_eq!(replies[0]["text"], REPLY);
    assert!(
        replies[0]["platform_message_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
    w.gateway.stop().await;
}

/// An agent bot printing JSON Lines: its text deltas are edited into one post while it
/// writes, and the post ends as the whole reply, shown once.
#[tokio::test]
async fn a_json_lines_agent_streams_its_reply_by_editing_its_post() {
    let mut script = String::from("cat >/dev/null\n");
    for piece in REPLY.as_bytes().chunks(24) {
        let piece = std::str::from_utf8(piece).unwrap();
        let event = serde_json::json!({"type": "text", "delta": piece}).to_string();
        script.push_str(&format!("echo '{event}'\nsleep 0.1\n"));
    }
    let command = serde_json::to_string(&["/bin/sh", "-c", &script]).unwrap();
    let backend = format!("backend = \"command\"\ncommand = {command}");
    let w = world_of_agent(On::Slack, &backend, FEEDBACK).await;
    w.ask("why did the build break?").await;
    let seen = w.seen();
    assert_eq!(seen.shown(), [REPLY], "what the chat shows");
    assert!(seen.edits() >= 2, "not edited in: {:?}", seen.all());
    let texts = seen.texts();
    for pair in texts.windows(2) {
        assert!(
            pair[1].starts_with(&pair[0]),
            "an edit took text back: {pair:?}"
        );
    }
    w.gateway.stop().await;
}

#[tokio::test]
async fn slack_streams_a_slow_reply_by_editing_its_post() {
    streams_a_slow_reply(On::Slack).await;
}

#[tokio::test]
async fn discord_streams_a_slow_reply_by_editing_its_post() {
    streams_a_slow_reply(On::Discord).await;
}

#[tokio::test]
async fn feishu_streams_a_slow_reply_by_editing_its_post() {
    streams_a_slow_reply(On::Feishu).await;
}

/// A silent turn shows nothing; a reply that ends with the token never shows a piece of it.
pub(super) async fn the_silent_token_never_shows(on: On) {
    let w = world(on, FEEDBACK).await;
    w.model.script(
        "snark",
        Step::slow("NO_REPLY", 2, Duration::from_millis(60)),
    );
    w.ask("anything to add?").await;
    assert_eq!(w.seen().posts(), 0, "{on:?}: a silent turn posted");
    assert_eq!(w.seen().edits(), 0, "{on:?}: a silent turn edited");
    assert_typing_ended(&w);

    let trailing = format!("{REPLY}\n\nNO_REPLY");
    w.model.script("snark", slowly(&trailing));
    w.ask("and now?").await;
    let texts = w.seen().texts();
    assert!(!texts.is_empty(), "{on:?}: nothing posted");
    for text in &texts {
        for cut in 1..="NO_REPLY".len() {
            assert!(
                !text.ends_with(&"NO_REPLY"[..cut]) || REPLY.ends_with(&"NO_REPLY"[..cut]),
                "{on:?}: a piece of the token was shown: {text:?}"
            );
        }
        assert!(!text.contains("NO_R"), "{on:?}: {text:?}");
    }
    assert_eq!(w.seen().shown(), [REPLY], "{on:?}");
    w.gateway.stop().await;
}

#[tokio::test]
async fn slack_never_shows_the_silent_token() {
    the_silent_token_never_shows(On::Slack).await;
}

#[tokio::test]
async fn discord_never_shows_the_silent_token() {
    the_silent_token_never_shows(On::Discord).await;
}

#[tokio::test]
async fn feishu_never_shows_the_silent_token() {
    the_silent_token_never_shows(On::Feishu).await;
}

/// A turn that fails after its reply began to stream: the post it made ends with the error
/// reply, under the text shown so far; nothing is posted a second time.
#[tokio::test]
async fn a_turn_that_fails_mid_stream_ends_its_post_with_the_error_reply() {
    const SORRY: &str = "Sorry, that went wrong; please ask again.";
    let gateway = format!("turn_timeout_seconds = 1\nerror_reply = \"{SORRY}\"\n");
    let w = world_with(On::Slack, &gateway, FEEDBACK).await;
    // About 3 s of writing: the turn is cut off at 1 s, with part of the reply shown.
    w.model
        .script("snark", Step::slow(REPLY, 8, Duration::from_millis(100)));
    w.ask("why did the build break?").await;
    let seen = w.seen();
    assert_eq!(seen.posts(), 1, "{:?}", seen.all());
    let shown = seen.shown();
    let (partial, error) = shown[0]
        .split_once("\n\n")
        .unwrap_or_else(|| panic!("the post does not end with the error reply: {shown:?}"));
    assert_eq!(error, SORRY);
    assert!(
        !partial.is_empty() && partial.len() < REPLY.len() && REPLY.starts_with(partial),
        "{partial:?}"
    );
    assert_typing_ended(&w);
    let session = only_transcript(&w).await;
    assert!(
        session.iter().any(|e| e["kind"] == "failure"),
        "{session:?}"
    );
    let replies: Vec<&Value> = session.iter().filter(|e| e["kind"] == "reply").collect();
    assert_eq!(replies.len(), 1, "{session:?}");
    assert_eq!(
        replies[0]["text"],
        shown[0].as_str(),
        "the post's final text"
    );
    w.gateway.stop().await;
}

/// The id of the post that ended up showing `text`, and every text it showed, in order.
pub(super) fn post_showing(seen: &Timeline, text: &str) -> (String, Vec<String>) {
    let all = seen.all();
    let mut texts: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for s in &all {
        if let Seen::Post { id, text } | Seen::Edit { id, text } = s {
            texts.entry(id.clone()).or_default().push(text.clone());
        }
    }
    texts
        .into_iter()
        .find(|(_, shown)| shown.last().map(String::as_str) == Some(text))
        .unwrap_or_else(|| panic!("no post shows {text:?}: {all:?}"))
}

/// A chain turn answers into the chat like a mention: typing while it runs, and its reply
/// streamed in by editing its post, the first text well before the model finished.
#[tokio::test]
async fn a_chain_turn_shows_typing_and_streams_its_reply_by_edits() {
    let admins = "\n[admins]\nslack = [\"U_HUMAN\"]\n";
    let w = world(On::Slack, &format!("{FEEDBACK}{admins}")).await;
    w.model.script("snark", slowly(REPLY));
    w.say("/baton chain start @snark why did the build break", true)
        .await;
    w.wait_seen("the chain's closing line", |seen| {
        seen.shown().iter().any(|t| t.contains("completed"))
    })
    .await;
    w.gateway.settle().await;
    let seen = w.seen();
    let (_, shown) = post_showing(&seen, REPLY);
    assert!(
        shown.len() >= 3,
        "the chain turn's reply was not streamed in: {shown:?}"
    );
    for pair in shown.windows(2) {
        assert!(pair[1].starts_with(&pair[0]), "out of order: {pair:?}");
    }
    let first = seen.first_post_at().expect("posts");
    let finished = *w.model.finished().first().expect("the model finished");
    assert!(
        first < finished,
        "nothing was shown before the model finished"
    );
    let (on, off) = seen.typing();
    assert!(on >= 1, "no typing for the chain turn: {:?}", seen.all());
    assert_eq!(on, off, "typing not taken down: {:?}", seen.all());
    assert_typing_outlived_the_reply_post(&seen);
    // The chain took the streamed reply as its post.
    let chains = w.gateway.get("/api/chains").await;
    let id = chains["chains"][0]["id"]
        .as_str()
        .expect("a chain")
        .to_owned();
    let chain = w.gateway.get(&format!("/api/chains/{id}")).await;
    let posts: Vec<&Value> = chain["messages"]
        .as_array()
        .expect("the chain's log")
        .iter()
        .filter(|m| m["kind"] == "message")
        .collect();
    assert_eq!(posts.len(), 1, "{chain}");
    assert_eq!(posts[0]["content"], REPLY);
    w.gateway.stop().await;
}

/// The typing indicator came down only after the last edit of a reply.
pub(super) fn assert_typing_outlived_the_reply_post(seen: &Timeline) {
    let all = seen.all();
    let last_edit = all.iter().rposition(|s| matches!(s, Seen::Edit { .. }));
    let last_off = all
        .iter()
        .rposition(|s| matches!(s, Seen::TypingOff { .. }));
    assert!(
        last_off > last_edit,
        "typing ended before the reply: {all:?}"
    );
}

#[tokio::test]
async fn a_reply_longer_than_discords_limit_streams_into_several_posts_at_boundaries() {
    let w = world(On::Discord, FEEDBACK).await;
    let paragraph = format!("{REPLY}\n\n");
    let long = paragraph.repeat(11).trim_end().to_owned(); // about 2,700 characters
    w.model
        .script("snark", Step::slow(&long, 120, Duration::from_millis(40)));
    w.ask("tell me everything").await;
    let expected = baton::post::split(&long, 2000);
    assert_eq!(expected.len(), 2);
    assert_eq!(
        w.seen().shown(),
        expected,
        "the posts hold the reply in order"
    );
    for text in w.seen().texts() {
        assert!(text.chars().count() <= 2000, "over Discord's limit");
    }
    w.gateway.stop().await;
}

#[tokio::test]
async fn an_edit_refused_with_429_is_sent_again_after_retry_after_in_order() {
    let w = world(On::Slack, FEEDBACK).await;
    let Fake::Slack(slack) = &w.fake else {
        unreachable!()
    };
    slack.rate_limit_updates(1);
    w.model
        .script("snark", Step::slow(REPLY, 8, Duration::from_millis(60)));
    w.ask("slowly please").await;
    assert_streamed(&w, REPLY);
    w.gateway.stop().await;
}

#[tokio::test]
async fn stream_off_posts_the_whole_reply_once() {
    let w = world(
        On::Slack,
        "\n[feedback]\nstream = \"off\"\ntyping = false\n",
    )
    .await;
    w.model.script("snark", slowly(REPLY));
    let asked = tokio::time::Instant::now();
    w.ask("all at once").await;
    eprintln!(
        "latency Slack, stream off: first visible text {:?} ms",
        w.seen().first_post_at().map(|at| (at - asked).as_millis())
    );
    let all = w.seen().all();
    assert!(
        matches!(all.as_slice(), [Seen::Post { text, .. }] if text == REPLY),
        "{all:?}"
    );
    assert_ne!(w.model.requests_for("snark")[0]["stream"], true);
    w.gateway.stop().await;
}

/// Text the model wrote before calling a tool is a draft, not the reply: once the reply comes,
/// no post is left showing it (the posts a shorter reply does not need are deleted), and a turn
/// that ends silent after showing a draft deletes its post.
#[tokio::test]
async fn a_draft_shown_before_a_tool_call_never_remains_as_extra_posts() {
    let w = world(On::Discord, FEEDBACK).await;
    // About 3,400 characters: two posts on Discord. Written 40 characters every 40 ms, so the
    // second post is due about 1.4 s (nine edit intervals) before the tool call, not a few
    // hundred milliseconds, which a loaded machine could miss.
    let draft = format!("{REPLY}\n\n").repeat(14);
    let draft = draft.trim_end();
    let gap = Duration::from_millis(40);
    w.model
        .script("snark", Step::slow_then_tool(draft, 40, gap, "look_it_up"));
    w.model.script("snark", Step::reply("Here it is."));
    w.ask("tell me everything").await;
    let seen = w.seen();
    assert_eq!(
        seen.posts(),
        2,
        "the draft did not fill two posts: {:?}",
        seen.all()
    );
    assert_eq!(seen.shown(), ["Here it is."], "{:?}", seen.all());

    w.model
        .script("snark", Step::slow_then_tool(REPLY, 8, gap, "look_it_up"));
    w.model.script("snark", Step::reply("NO_REPLY"));
    w.ask("anything else?").await;
    let seen = w.seen();
    assert_eq!(
        seen.posts(),
        3,
        "the second draft was not shown: {:?}",
        seen.all()
    );
    assert_eq!(
        seen.shown(),
        ["Here it is."],
        "a draft is left in the chat: {:?}",
        seen.all()
    );
    // The transcript never reads a deleted draft back to the model as something it said.
    let session = only_transcript(&w).await;
    let replies: Vec<&str> = session
        .iter()
        .filter(|e| e["kind"] == "reply")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(replies, ["Here it is."], "{session:?}");
    w.gateway.stop().await;
}

/// A bot whose brain is a remote A2A agent (`backend = "a2a"`, an a2a-sdk server): the
/// agent's streamed artifact is edited into one post as it arrives, and its file part is
/// posted with the reply.
#[tokio::test]
async fn an_a2a_agent_streams_its_reply_into_slack_and_its_file_is_attached() {
    let peer = crate::a2a::outbound::Peer::streaming(REPLY).await;
    let backend = format!("backend = \"a2a\"\nurl = \"{}\"", peer.url);
    let w = world_of_agent(On::Slack, &backend, FEEDBACK).await;
    w.ask("why did the build break?").await;
    let seen = w.seen();
    assert_eq!(seen.shown(), [REPLY], "what the chat shows");
    assert!(seen.edits() >= 2, "not edited in: {:?}", seen.all());
    let texts = seen.texts();
    for pair in texts.windows(2) {
        assert!(
            pair[1].starts_with(&pair[0]),
            "an edit took text back: {pair:?}"
        );
    }
    let Fake::Slack(slack) = &w.fake else {
        unreachable!()
    };
    let uploads = crate::support::process::eventually(DEADLINE, "the file posted", || async {
        let uploads = slack.uploads();
        (!uploads.is_empty()).then_some(uploads)
    })
    .await;
    assert_eq!(
        uploads
            .iter()
            .map(|u| (u.name.as_str(), u.bytes.as_slice()))
            .collect::<Vec<_>>(),
        [("notes.txt", b"the notes\n".as_slice())]
    );
    w.gateway.stop().await;
}
