//! The typing indicator: up while a turn runs, down when it ends, where the platform allows.

use super::*;

/// A failed turn ends its typing too; an `always` bot nobody addressed shows no typing.
pub(super) async fn typing_follows_the_turn(on: On) {
    let always =
        "\n[[chats]]\nplatform = \"{platform}\"\nid = \"{chat}\"\nactivation = \"always\"\n";
    let w = world(on, &format!("{FEEDBACK}{always}")).await;
    w.model.script(
        "snark",
        Step::Error {
            status: 400,
            retry_after: None,
        },
    );
    w.ask("this one fails").await;
    assert_typing_ended(&w);
    let before = w.seen().typing();

    w.model.script(
        "snark",
        Step::slow("NO_REPLY", 4, Duration::from_millis(30)),
    );
    w.say("just chatting among ourselves", false).await;
    w.gateway.settle().await;
    assert_eq!(
        w.model.requests_for("snark").len(),
        2,
        "the always bot took its turn"
    );
    assert_eq!(
        w.seen().typing(),
        before,
        "{on:?}: typing for an always turn nobody addressed"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn slack_typing_ends_with_a_failed_turn_and_never_shows_for_an_unaddressed_one() {
    typing_follows_the_turn(On::Slack).await;
}

#[tokio::test]
async fn discord_typing_ends_with_a_failed_turn_and_never_shows_for_an_unaddressed_one() {
    typing_follows_the_turn(On::Discord).await;
}

#[tokio::test]
async fn feishu_typing_ends_with_a_failed_turn_and_never_shows_for_an_unaddressed_one() {
    typing_follows_the_turn(On::Feishu).await;
}

#[tokio::test]
async fn a_slack_app_without_the_status_scope_streams_without_typing() {
    let w = world(On::Slack, FEEDBACK).await;
    let Fake::Slack(slack) = &w.fake else {
        unreachable!()
    };
    slack.without_status_scope();
    w.model.script("snark", slowly(REPLY));
    w.ask("no scope here").await;
    assert_eq!(w.seen().typing(), (0, 0));
    assert_streamed(&w, REPLY);
    w.gateway.stop().await;
}
