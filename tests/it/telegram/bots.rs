//! Two bots in one group with Telegram's bot-to-bot mode on: each bot's posts reach the other
//! (delivered by Telegram and handed over by baton: one event), and `max_bot_reply_chain` ends
//! the exchange.

use super::*;

#[tokio::test]
async fn two_bots_in_bot_to_bot_mode_stay_bounded_by_max_bot_reply_chain() {
    let extra = format!(
        "\n[limits]\nmax_bot_reply_chain = 3\n\n[[chats]]\nplatform = \"telegram\"\nid = \"{GROUP}\"\n\
         allow_bots = [\"snark\", \"caid\"]\n"
    );
    let w = world(&extra).await;
    w.telegram.bot_to_bot();
    for _ in 0..10 {
        w.model
            .script("snark", Step::reply(format!("@{} over to you", CAID.1)));
        w.model
            .script("caid", Step::reply(format!("@{} back to you", SNARK.1)));
    }
    w.say(Some(SNARK.1), "start", None);
    w.telegram.wait_for(|t| t.posts().len() >= 4).await;
    w.settle().await;
    let authors: Vec<String> = w.telegram.posts().into_iter().map(|p| p.bot).collect();
    assert_eq!(
        authors,
        ["snark", "caid", "snark", "caid"],
        "the chain stops after max_bot_reply_chain bot-woken replies"
    );
    assert_eq!(w.model.requests().len(), 4, "no fifth turn");
    // Each bot answered the other's post by quoting it.
    let posts = w.telegram.posts();
    assert_eq!(posts[1].quotes, posts[0].message_id);
}

/// Without bot-to-bot mode, baton hands its bots' posts over itself: `always` caid hears
/// snark's answer in the group. A bot not in a group, and a private chat, hear nothing.
#[tokio::test]
async fn posts_are_handed_over_where_telegram_does_not_deliver_them() {
    let extra = format!(
        "\n[[chats]]\nplatform = \"telegram\"\nid = \"{GROUP}\"\nactivation = \"always\"\n\
         allow_bots = [\"snark\", \"caid\"]\n\n\
         [[chats]]\nplatform = \"telegram\"\nid = \"-1009\"\nactivation = \"always\"\n\
         allow_bots = [\"snark\", \"caid\"]\n\n\
         [[chats]]\nplatform = \"telegram\"\nid = \"{}\"\nactivation = \"always\"\nallow_bots = [\"snark\"]\n",
        HUMAN.0
    );
    let w = world(&extra).await;
    w.telegram.not_in("caid", -1009);
    w.model.script("snark", Step::reply("Snark here."));
    w.model.script("caid", Step::reply("NO_REPLY"));
    w.model.script("snark", Step::reply("Snark alone here."));
    w.model.script("snark", Step::reply("Snark in private."));
    w.say(Some(SNARK.1), "hello", None);
    w.telegram.wait_for(|t| t.posts().len() == 1).await;
    w.settle().await;
    // caid heard the human (mentioning snark only: not woken) and snark's post (woken).
    let caid = w.model.requests_for("caid");
    assert_eq!(caid.len(), 1, "{caid:?}");
    assert!(caid[0].to_string().contains("Snark here."), "{}", caid[0]);
    w.telegram.say(
        -1009,
        HUMAN,
        "@snark_bot hi",
        Value::Array(vec![mention(0, SNARK.1)]),
        None,
        None,
    );
    w.telegram.say(
        HUMAN.0,
        HUMAN,
        "hi",
        Value::Array(vec![]),
        None,
        Some("snark"),
    );
    w.telegram.wait_for(|t| t.posts().len() == 3).await;
    w.settle().await;
    assert_eq!(
        w.model.requests_for("caid").len(),
        1,
        "caid heard nothing more"
    );
}
