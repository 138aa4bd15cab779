//! Replies: one per mention, quoting it; a reply to the bot's post wakes it; a redelivered
//! update is answered once; a 429 is waited out; a long reply is split at 4096; typing shows
//! while the turn runs.

use std::time::Duration;

use super::*;

#[tokio::test]
async fn a_mention_gets_one_reply_quoting_it() {
    let w = world("").await;
    w.model.script("snark", Step::reply("Hello, Ada."));
    let asked = w.say(Some(SNARK.1), "hi there", None);
    w.telegram.wait_for(|t| t.posts().len() == 1).await;
    w.settle().await;
    let posts = w.telegram.posts();
    assert_eq!(posts.len(), 1, "caid was not mentioned: {posts:?}");
    assert_eq!(posts[0].bot, "snark");
    assert_eq!(posts[0].chat, GROUP);
    assert_eq!(
        posts[0].text, "Hello, Ada.",
        "plain text, exactly the reply"
    );
    assert_eq!(posts[0].quotes, Some(asked), "the reply quotes the mention");
    // The model saw the text with the mention readable.
    let request = &w.model.requests_for("snark")[0];
    assert!(
        request.to_string().contains("@snark_bot hi there"),
        "{request}"
    );
    // `/baton` is in the bot's command menu.
    let commands = w
        .telegram
        .commands("snark")
        .expect("setMyCommands was called");
    assert_eq!(commands[0]["command"], "baton");
}

#[tokio::test]
async fn a_reply_to_the_bots_own_message_wakes_it() {
    let w = world("").await;
    w.model.script("snark", Step::reply("First answer."));
    w.model.script("snark", Step::reply("Second answer."));
    w.say(Some(SNARK.1), "question one", None);
    w.telegram.wait_for(|t| t.posts().len() == 1).await;
    w.settle().await;
    let own = w.telegram.posts()[0].message_id.unwrap();
    // No mention: only the reply to snark's post addresses it.
    let follow_up = w.say(None, "and why is that?", Some(own));
    w.telegram.wait_for(|t| t.posts().len() == 2).await;
    w.settle().await;
    let posts = w.telegram.posts();
    assert_eq!(posts.len(), 2, "{posts:?}");
    assert_eq!(
        (posts[1].bot.as_str(), posts[1].text.as_str()),
        ("snark", "Second answer.")
    );
    assert_eq!(posts[1].quotes, Some(follow_up));
    assert_eq!(
        w.model.requests_for("caid").len(),
        0,
        "caid was not addressed"
    );
}

#[tokio::test]
async fn a_redelivered_update_is_not_answered_twice() {
    let w = world("").await;
    w.model.script("snark", Step::reply("Once."));
    w.model.script("snark", Step::reply("Twice!"));
    w.say(Some(SNARK.1), "hello", None);
    w.telegram.wait_for(|t| t.posts().len() == 1).await;
    w.settle().await;
    // Telegram delivers the same update again (a restart before the offset was confirmed).
    let update = w.telegram.delivered("snark")[0].clone();
    w.telegram.redeliver("snark", &update);
    w.settle().await;
    assert_eq!(w.telegram.posts().len(), 1);
    assert_eq!(w.model.requests_for("snark").len(), 1, "no second turn");
}

#[tokio::test]
async fn a_429_is_waited_out_and_retried_once() {
    let w = world("").await;
    w.model.script("snark", Step::reply("Through the limit."));
    w.telegram.rate_limit_posts(1, 1);
    w.say(Some(SNARK.1), "hello", None);
    w.telegram.wait_for(|t| t.posts().len() == 1).await;
    w.settle().await;
    let calls = w.telegram.all_posts();
    assert_eq!(calls.len(), 2, "one refused, one retry: {calls:?}");
    assert_eq!(calls[0].refused, Some(429));
    assert_eq!(calls[1].text, "Through the limit.");
}

#[tokio::test]
async fn a_long_reply_is_split_at_4096_on_paragraphs() {
    let w = world("").await;
    let paragraph = "word ".repeat(199) + "end.";
    let reply: String = vec![paragraph; 9].join("\n\n");
    assert!(reply.chars().count() > 8192);
    w.model.script("snark", Step::reply(reply.clone()));
    w.say(Some(SNARK.1), "tell me everything", None);
    w.telegram.wait_for(|t| t.posts().len() == 3).await;
    w.settle().await;
    let calls = w.telegram.all_posts();
    assert!(
        calls.iter().all(|c| c.refused.is_none()),
        "none too long: {calls:?}"
    );
    assert_eq!(calls.len(), 3);
    for post in &calls {
        assert!(post.text.chars().count() <= 4096);
        assert!(post.text.ends_with("end."), "split at a paragraph");
    }
    let joined: Vec<&str> = calls.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(joined.join("\n\n"), reply, "nothing lost or repeated");
}

#[tokio::test]
async fn typing_shows_while_the_turn_runs_and_not_after() {
    let w = world("").await;
    // About 1.2 s of writing: the indicator goes up at once, before the reply.
    w.model.script(
        "snark",
        Step::slow(
            "Thinking it through, the answer is 42.",
            4,
            Duration::from_millis(120),
        ),
    );
    w.say(Some(SNARK.1), "what is the answer?", None);
    w.telegram.wait_for(|t| t.posts().len() == 1).await;
    w.settle().await;
    let actions = w.telegram.actions();
    assert!(!actions.is_empty(), "typing was shown");
    assert!(
        actions
            .iter()
            .all(|a| a.bot == "snark" && a.chat == GROUP && a.action == "typing")
    );
    let posted = w.telegram.seen().first_post_at().unwrap();
    assert!(
        actions.iter().all(|a| a.at <= posted),
        "no typing after the reply: {actions:?}"
    );
    // caid, not addressed, showed nothing.
    assert_eq!(w.model.requests_for("caid").len(), 0);
}
