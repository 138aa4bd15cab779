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
