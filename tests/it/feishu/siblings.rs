//! Bots that see each other's posts, which Feishu never delivers: baton hands them over.

use super::*;

#[tokio::test]
async fn an_always_bot_leaves_a_message_for_another_bot_alone() {
    let extra = "\n[[chats]]\nplatform = \"feishu\"\nid = \"oc_always\"\nactivation = \"always\"\n";
    let w = world("websocket", extra).await;
    let chat = ("oc_always", "group");
    // The fake names each app after its bot (`caid`); snark's app knows caid by another id.
    let for_caid = |app: &str, id: &str, human: &str| {
        message_event(
            app,
            &format!("ev-a-{app}"),
            "om_a1",
            chat,
            human,
            "@_user_1 fix this",
            &[(id, "caid")],
        )
    };
    w.deliver("snark", &for_caid("snark", CAID_IN_SNARK, HUMAN_IN_SNARK))
        .await;
    w.deliver("caid", &for_caid("caid", CAID, HUMAN_IN_CAID))
        .await;
    let posts = w.feishu.posts();
    assert_eq!(posts.len(), 1, "only caid answers: {posts:?}");
    assert_eq!(posts[0].app, "caid");
    let plain = message_event(
        "snark",
        "ev-a-2",
        "om_a2",
        chat,
        HUMAN_IN_SNARK,
        "anyone?",
        &[],
    );
    w.deliver("snark", &plain).await;
    assert_eq!(
        w.feishu.posts().len(),
        2,
        "snark answers everything else here"
    );
    w.gateway.stop().await;
}

/// Both bots in `oc_group`, each allowed to wake the other, with `activation` there.
pub(super) fn siblings_chat(activation: &str) -> String {
    format!(
        "\n[limits]\nmax_bot_reply_chain = 3\n\n[[chats]]\nplatform = \"feishu\"\nid = \"{}\"\n\
         activation = \"{activation}\"\nallow_bots = [\"snark\", \"caid\"]\n",
        GROUP.0
    )
}

/// A human message in the group @mentioning snark, delivered to both apps (as each sees it).
pub(super) async fn human_mentions_snark(w: &World, n: u32, text: &str) {
    human_mentions(w, n, "snark", text).await;
}

/// A human message in the group @mentioning `bot`, delivered to both apps (as each sees it).
pub(super) async fn human_mentions(w: &World, n: u32, bot: &str, text: &str) {
    let message_id = format!("om_h{n}");
    for (app, human) in [("snark", HUMAN_IN_SNARK), ("caid", HUMAN_IN_CAID)] {
        let seen = match (app, bot) {
            ("snark", "snark") => SNARK,
            ("snark", _) => CAID_IN_SNARK,
            (_, "snark") => SNARK_IN_CAID,
            _ => CAID,
        };
        let event = message_event(
            app,
            &format!("ev-h{n}-{app}"),
            &message_id,
            GROUP,
            human,
            &format!("@_user_1 {text}"),
            &[(seen, bot)],
        );
        w.deliver(app, &event).await;
    }
}

/// Events the pipeline has taken from Feishu: (new, duplicates).
pub(super) fn feishu_events(w: &World) -> (u64, u64) {
    let metrics = w.gateway.gateway.engine().metrics();
    (
        metrics.get(&baton::metrics::EVENTS_IN, "feishu"),
        metrics.get(&baton::metrics::DUPLICATES, "feishu"),
    )
}

#[tokio::test]
async fn two_always_bots_see_each_others_posts_bounded_by_max_bot_reply_chain() {
    let w = world("websocket", &siblings_chat("always")).await;
    for _ in 0..10 {
        w.model.script("snark", Step::reply("over to you"));
        w.model.script("caid", Step::reply("back to you"));
    }
    // The human wakes snark (caid leaves a message for another bot alone); then each post is
    // handed to the other bot, which answers: 3 bot-woken replies (caid, snark, caid), and the
    // 4th bot post wakes nobody until a human speaks. Exactly as on Discord.
    human_mentions_snark(&w, 1, "start").await;
    w.gateway.settle().await;
    let authors: Vec<String> = w.feishu.posts().into_iter().map(|p| p.app).collect();
    assert_eq!(
        authors,
        ["snark", "caid", "snark", "caid"],
        "the chain stops after max_bot_reply_chain bot-woken replies"
    );
    assert_eq!(w.model.requests().len(), 4, "no fifth turn");
    // The human's message reached both apps (2 events); each of the 4 posts was handed to the
    // other bot only, never to its author (4 events).
    assert_eq!(feishu_events(&w), (6, 0));
    // Caid's turn heard snark's post as snark's, a bot's.
    let caid = w.model.requests_for("caid");
    assert!(caid[0].to_string().contains("over to you"), "{}", caid[0]);
    // A human speaking starts the chain over.
    human_mentions_snark(&w, 2, "again").await;
    w.gateway.settle().await;
    assert_eq!(w.feishu.posts().len(), 8);
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_mention_only_bot_is_woken_by_a_siblings_mention_and_histories_hold_each_others_posts() {
    let w = world("websocket", &siblings_chat("mention")).await;
    w.model
        .script("snark", Step::reply("first thoughts: ship it"));
    w.model.script("caid", Step::reply("agreed, with tests"));
    w.model.script(
        "snark",
        Step::reply("<at user_id=\"cli_caid\">caid</at> anything to add?"),
    );
    w.model.script("caid", Step::reply("NO_REPLY"));

    // Snark's post mentions nobody: caid keeps it as history, and sees it when next woken.
    human_mentions(&w, 1, "snark", "please look").await;
    assert_eq!(w.model.requests_for("caid").len(), 0);
    human_mentions(&w, 2, "caid", "your view?").await;
    let caid = w.model.requests_for("caid");
    assert_eq!(caid.len(), 1);
    assert!(
        caid[0].to_string().contains("first thoughts: ship it"),
        "{}",
        caid[0]
    );
    // And the other way round.
    human_mentions(&w, 3, "snark", "wrap up").await;
    let snark = w.model.requests_for("snark");
    assert_eq!(snark.len(), 2);
    assert!(
        snark[1].to_string().contains("agreed, with tests"),
        "{}",
        snark[1]
    );
    // Snark's last post @mentions caid (by its app id): caid is woken by it.
    w.gateway.settle().await;
    let caid = w.model.requests_for("caid");
    assert_eq!(caid.len(), 2, "woken once more, by the mention");
    assert!(
        caid[1].to_string().contains("@caid anything to add?"),
        "{}",
        caid[1]
    );
    let apps: Vec<String> = w.feishu.posts().into_iter().map(|p| p.app).collect();
    assert_eq!(apps, ["snark", "caid", "snark"], "caid chose silence last");
    w.gateway.stop().await;
}

#[tokio::test]
async fn the_same_post_delivered_by_feishu_and_handed_over_is_one_event_in_both_orders() {
    // Baton first: the hand-over is filed when snark's post is recorded; Feishu's own copy (an
    // @mention, with the include_bot scope) comes later and is a duplicate.
    let w = world("websocket", &siblings_chat("mention")).await;
    let mention = "<at user_id=\"cli_caid\">caid</at> over to you";
    w.model.script("snark", Step::reply(mention));
    w.model.script("caid", Step::reply("NO_REPLY"));
    human_mentions_snark(&w, 1, "go").await;
    w.gateway.settle().await;
    assert_eq!(w.model.requests_for("caid").len(), 1);
    let posted = match &w.feishu.posts()[0].outcome {
        Outcome::Sent(id) => id.clone(),
        other => panic!("{other:?}"),
    };
    let before = feishu_events(&w);
    let mut copy = message_event(
        "caid",
        "ev-copy",
        &posted,
        GROUP,
        SNARK_IN_CAID,
        "@_user_1 over to you",
        &[(CAID, "caid")],
    );
    copy["event"]["sender"]["sender_type"] = "app".into();
    w.deliver("caid", &copy).await;
    assert_eq!(feishu_events(&w), (before.0, before.1 + 1), "a duplicate");
    assert_eq!(w.model.requests_for("caid").len(), 1, "answered once");
    w.gateway.stop().await;

    // Feishu first: the fake delivers the mention to caid, and caid has taken it, before
    // snark's post is answered; baton's hand-over then finds it taken.
    let w = world("websocket", &siblings_chat("mention")).await;
    w.feishu.deliver_bot_mentions();
    w.model.script("snark", Step::reply(mention));
    w.model.script("caid", Step::reply("NO_REPLY"));
    human_mentions_snark(&w, 1, "go").await;
    w.gateway.settle().await;
    let caid = w.model.requests_for("caid");
    assert_eq!(caid.len(), 1, "answered once");
    assert!(
        caid[0].to_string().contains("(delivered by Feishu)"),
        "Feishu's copy is the one that ran, from snark: {}",
        caid[0]
    );
    // The human's message to both apps and Feishu's copy; baton's hand-over is a duplicate.
    assert_eq!(feishu_events(&w), (3, 1));
    assert_eq!(w.feishu.posts().len(), 1);
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_post_in_a_chat_the_other_bot_is_not_in_is_not_handed_over() {
    let w = world("websocket", "").await;
    w.model.script("snark", Step::reply("just between us"));
    w.model.script("snark", Step::reply("elsewhere"));
    // A direct chat: only snark is in it.
    let dm = message_event(
        "snark",
        "ev-dm",
        "om_dm",
        ("oc_dm", "p2p"),
        HUMAN_IN_SNARK,
        "hi",
        &[],
    );
    w.deliver("snark", &dm).await;
    // A group caid has left.
    w.feishu.not_in("caid", "oc_other");
    let elsewhere = message_event(
        "snark",
        "ev-o",
        "om_o",
        ("oc_other", "group"),
        HUMAN_IN_SNARK,
        "@_user_1 hi",
        &[(SNARK, "snark")],
    );
    w.deliver("snark", &elsewhere).await;
    assert_eq!(w.feishu.posts().len(), 2);
    assert!(w.feishu.in_chat_calls() >= 2, "caid was asked");
    assert_eq!(feishu_events(&w), (2, 0), "caid was handed nothing");
    w.gateway.stop().await;
}
