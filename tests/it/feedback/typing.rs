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

/// On Slack the thread status says the bot's latest `progress` line while the turn runs, and
/// is cleared when it ends.
#[tokio::test]
async fn slack_typing_says_the_latest_progress_while_the_turn_runs() {
    let bot = "backend = \"openai\"\nmodel = \"snark\"\nbase_url = \"{model_url}\"\n\
               tools = [\"progress\"]";
    let w = world_of_agent(On::Slack, bot, FEEDBACK).await;
    let Fake::Slack(slack) = &w.fake else {
        unreachable!()
    };
    let progress = serde_json::json!({"message": "reading the logs", "step": 1, "of": 2});
    w.model
        .script("snark", Step::tool_call("progress", progress));
    w.model
        .script("snark", Step::reply("The cache is still used."));
    w.model.hold();
    w.say("is the cache still used?", true).await;
    w.model.wait_for_requests(1, DEADLINE).await;
    // The answer after the tool call is held, so the turn is still running when it is seen.
    w.model.release();
    w.model.hold();
    let said = |(_, status): &(String, String)| status == "1/2 · reading the logs";
    crate::support::process::eventually(DEADLINE, "the progress line as the status", || async {
        slack.statuses().iter().any(said).then_some(())
    })
    .await;
    // The status is set while the tool runs, before the model is asked again: wait for that
    // second request, which is held, so the turn is known to be still running.
    w.model.wait_for_requests(2, DEADLINE).await;
    assert_eq!(
        w.model.requests_for("snark").len(),
        2,
        "the turn still runs"
    );
    assert!(
        !slack.statuses().iter().any(|(_, s)| s.is_empty()),
        "cleared before the turn ended: {:?}",
        slack.statuses()
    );
    assert!(
        w.seen()
            .all()
            .iter()
            .all(|s| !matches!(s, Seen::Post { .. }))
    );
    w.model.release();
    w.gateway.settle().await;
    let statuses = slack.statuses();
    let thread = &statuses[0].0;
    assert!(
        statuses.iter().all(|(t, _)| t == thread),
        "one thread: {statuses:?}"
    );
    assert_eq!(
        statuses.last().map(|(_, s)| s.as_str()),
        Some(""),
        "cleared after the turn: {statuses:?}"
    );
    assert_typing_ended(&w);
    assert!(
        w.model.tool_results("snark")[0]["status"] == "ok",
        "{:?}",
        w.model.tool_results("snark")
    );
    w.gateway.stop().await;
}
