//! Messages in, replies out: mentions, direct chats, @all, topics, replays.

use super::*;

#[tokio::test]
async fn a_group_mention_gets_one_reply_to_that_message() {
    let w = world("websocket", "").await;
    w.model.script("snark", Step::reply("hi from snark"));
    // Both apps are in the group, so both get the message; only snark is mentioned.
    w.deliver(
        "snark",
        &group_mention("snark", "ev-1s", "om_1", &[(SNARK, "Snark")]),
    )
    .await;
    w.deliver(
        "caid",
        &group_mention("caid", "ev-1c", "om_1", &[(SNARK_IN_CAID, "Snark")]),
    )
    .await;
    let posts = w.feishu.posts();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0].app, "snark", "posted with snark's own token");
    assert_eq!(posts[0].target, Target::Reply("om_1".into()));
    assert_eq!(posts[0].text, "hi from snark");
    assert_eq!(posts[0].msg_type, "text");
    assert!(
        !posts[0].in_thread,
        "a top-level message is answered in the chat"
    );
    assert!(!posts[0].uuid.is_empty() && posts[0].uuid.len() <= 50);
    assert_eq!(w.model.requests_for("caid").len(), 0);
    let turn = w.model.requests_for("snark");
    assert!(
        turn[0].to_string().contains("@Snark please look"),
        "the placeholder reads as the name"
    );
    // Every event frame was acknowledged with code 200, echoing the frame.
    let acks = w.feishu.acks();
    assert_eq!(acks.len(), 2);
    assert!(
        acks.iter()
            .all(|a| a.code == 200 && a.biz_rt && a.seq_id > 0)
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_p2p_message_gets_a_reply() {
    let w = world("websocket", "").await;
    w.model.script("caid", Step::reply("hello human"));
    let dm = message_event(
        "caid",
        "ev-dm",
        "om_dm",
        ("oc_dm", "p2p"),
        HUMAN_IN_CAID,
        "hi",
        &[],
    );
    w.deliver("caid", &dm).await;
    let posts = w.feishu.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].app, "caid");
    assert_eq!(posts[0].target, Target::Reply("om_dm".into()));
    assert_eq!(posts[0].text, "hello human");
    w.gateway.stop().await;
}

#[tokio::test]
async fn at_bot_a_at_bot_b_wakes_both_once_each() {
    let w = world("websocket", "").await;
    w.model.script("snark", Step::reply("snark here"));
    w.model.script("caid", Step::reply("caid here"));
    let for_snark = group_mention(
        "snark",
        "ev-2s",
        "om_2",
        &[(SNARK, "Snark"), (CAID_IN_SNARK, "Caid")],
    );
    let for_caid = group_mention(
        "caid",
        "ev-2c",
        "om_2",
        &[(SNARK_IN_CAID, "Snark"), (CAID, "Caid")],
    );
    w.deliver("snark", &for_snark).await;
    w.deliver("caid", &for_caid).await;
    // Feishu redelivers each (no ack seen in time, say): nothing more happens.
    w.deliver("snark", &for_snark).await;
    w.deliver("caid", &for_caid).await;
    let mut apps: Vec<String> = w.feishu.posts().into_iter().map(|p| p.app).collect();
    apps.sort();
    assert_eq!(apps, ["caid", "snark"]);
    assert!(
        w.feishu
            .posts()
            .iter()
            .all(|p| p.target == Target::Reply("om_2".into()))
    );
    assert_eq!(w.model.requests_for("snark").len(), 1);
    assert_eq!(w.model.requests_for("caid").len(), 1);
    w.gateway.stop().await;
}

/// SPEC 6.2 on Feishu: "@snark ask @caid: ..." is for snark alone; a message opening with a
/// word is for every bot it mentions; `mentions = "all"` wakes every mentioned bot.
#[tokio::test]
async fn a_message_is_for_the_bots_mentioned_before_its_first_word() {
    async fn answered_by(mode: &str, text: &str) -> Vec<String> {
        let extra = format!(
            "\n[chats_default]\ngroup_policy = \"open\"\ndm_policy = \"open\"\nmentions = \"{mode}\"\n"
        );
        let w = world("websocket", &extra).await;
        w.model.script("snark", Step::reply("snark here"));
        w.model.script("caid", Step::reply("caid here"));
        let for_snark = message_event(
            "snark",
            "ev-6s",
            "om_6",
            GROUP,
            HUMAN_IN_SNARK,
            text,
            &[(SNARK, "Snark"), (CAID_IN_SNARK, "Caid")],
        );
        let for_caid = message_event(
            "caid",
            "ev-6c",
            "om_6",
            GROUP,
            HUMAN_IN_CAID,
            text,
            &[(SNARK_IN_CAID, "Snark"), (CAID, "Caid")],
        );
        w.deliver("snark", &for_snark).await;
        w.deliver("caid", &for_caid).await;
        let mut apps: Vec<String> = w.feishu.posts().into_iter().map(|p| p.app).collect();
        apps.sort();
        w.gateway.stop().await;
        apps
    }
    let router = "@_user_1 ask @_user_2: write a haiku";
    assert_eq!(answered_by("leading", router).await, ["snark"]);
    let both = "can @_user_1 or @_user_2 help?";
    assert_eq!(answered_by("leading", both).await, ["caid", "snark"]);
    assert_eq!(answered_by("all", router).await, ["caid", "snark"]);
}

#[tokio::test]
async fn at_all_wakes_no_bot_by_default_and_every_bot_where_the_chat_allows_it() {
    let extra = "\n[[chats]]\nplatform = \"feishu\"\nid = \"oc_keen\"\nrespond_to_at_all = true\n";
    let w = world("websocket", extra).await;
    let all = |app: &str, chat: &str, n: &str| {
        let human = if app == "snark" {
            HUMAN_IN_SNARK
        } else {
            HUMAN_IN_CAID
        };
        let mut e = message_event(
            app,
            &format!("ev-all-{app}-{n}"),
            &format!("om_all_{n}"),
            (chat, "group"),
            human,
            "@_all standup time",
            &[],
        );
        e["event"]["message"]["mentions"] =
            json!([{ "key": "@_all", "id": {}, "name": "所有人", "tenant_key": "tenant" }]);
        e
    };
    for app in ["snark", "caid"] {
        w.deliver(app, &all(app, "oc_group", "1")).await;
    }
    assert!(
        w.feishu.all_posts().is_empty(),
        "@_all wakes nobody by default"
    );
    assert_eq!(w.model.requests().len(), 0);
    for app in ["snark", "caid"] {
        w.deliver(app, &all(app, "oc_keen", "2")).await;
    }
    assert_eq!(
        w.feishu.posts().len(),
        2,
        "respond_to_at_all = true wakes both"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_replay_after_reconnect_gets_no_second_reply() {
    let w = world("websocket", "").await;
    let event = group_mention("snark", "ev-3", "om_3", &[(SNARK, "Snark")]);
    w.deliver("snark", &event).await;
    assert_eq!(w.feishu.posts().len(), 1);
    w.feishu.drop_connection("snark");
    w.feishu.wait_connected("snark", 2).await;
    // The server replays the event on the new connection: acked, not answered again.
    w.deliver("snark", &event).await;
    assert_eq!(w.feishu.posts().len(), 1);
    assert_eq!(w.model.requests_for("snark").len(), 1);
    // The new connection works.
    w.deliver(
        "snark",
        &group_mention("snark", "ev-4", "om_4", &[(SNARK, "Snark")]),
    )
    .await;
    assert_eq!(w.feishu.posts().len(), 2);
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_reply_in_a_topic_stays_in_the_topic() {
    let w = world("websocket", "").await;
    let mut event = group_mention("snark", "ev-10", "om_10", &[(SNARK, "Snark")]);
    event["event"]["message"]["root_id"] = "om_root".into();
    event["event"]["message"]["parent_id"] = "om_root".into();
    event["event"]["message"]["thread_id"] = "omt_topic".into();
    w.deliver("snark", &event).await;
    let posts = w.feishu.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].target, Target::Reply("om_10".into()));
    assert!(posts[0].in_thread);
    let sessions = w.gateway.get("/api/sessions").await.to_string();
    assert!(
        sessions.contains("bot:snark:feishu:snark:oc_group:thread:omt_topic"),
        "the topic is its own session: {sessions}"
    );
    w.gateway.stop().await;
}
