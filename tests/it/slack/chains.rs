//! Chains in a channel: each turn posted with its bot's token, in one thread.

use super::*;

#[tokio::test]
async fn a_chain_started_in_a_channel_posts_each_turn_with_its_bots_token_in_one_thread() {
    let bots = ["snark", "caid", "sec", "doc"];
    let w = world_of(
        &bots,
        "tools = [\"chain_*\"]",
        "socket",
        "\n[chains]\ncoordinator = \"snark\"\n",
    )
    .await;
    for (bot, prompt) in [
        ("caid", "Risks?"),
        ("sec", "Mitigations?"),
        ("doc", "Write it up."),
    ] {
        w.model.script(
            "snark",
            on_chain("chain_pass", json!({"bot": bot, "prompt": prompt})),
        );
        w.model.script("snark", Step::reply("NO_REPLY"));
        w.model
            .script(bot, Step::reply(format!("{bot} says: {prompt}")));
    }
    w.model.script("snark", on_chain("chain_close", json!({})));
    w.model.script("snark", Step::reply("NO_REPLY"));

    let ts = "1700000000.000900";
    let text = "/baton chain start <@U_CAID> <@U_SEC> <@U_DOC> plan the launch";
    let body = event_body("A_snark", "EvC", "message", said(ADMIN, "C1", ts, text));
    w.deliver("snark", events_envelope("env-c", 0, body)).await;

    let posts = w.slack.posts();
    let turns: Vec<(String, String)> = posts
        .iter()
        .filter(|p| p.text.contains(" says: "))
        .map(|p| (p.token.clone(), p.text.clone()))
        .collect();
    assert_eq!(
        turns,
        [
            ("xoxb-caid".to_owned(), "caid says: Risks?".to_owned()),
            ("xoxb-sec".to_owned(), "sec says: Mitigations?".to_owned()),
            ("xoxb-doc".to_owned(), "doc says: Write it up.".to_owned()),
        ],
        "each turn under its own bot's token, in order: {posts:#?}"
    );
    assert!(
        posts
            .iter()
            .all(|p| p.channel == "C1" && p.thread_ts.as_deref() == Some(ts)),
        "everything in the thread under the command: {posts:#?}"
    );
    assert!(posts[0].text.starts_with("Started chain ch-"), "{posts:#?}");
    assert!(
        posts.last().unwrap().text.contains("completed"),
        "{posts:#?}"
    );
    w.gateway.stop().await;
}

#[tokio::test]
async fn a_chain_started_by_slash_command_is_announced_and_its_posts_thread_under_the_announcement()
{
    let w = world("socket", "").await;
    w.model.script("caid", Step::reply("caid was here"));
    let envelope = json!({
        "envelope_id": "cmd-chain", "type": "slash_commands", "accepts_response_payload": true,
        "payload": { "token": "t", "team_id": "T1", "channel_id": "C1", "channel_name": "general",
            "user_id": ADMIN, "user_name": "admin", "command": "/baton",
            "text": "chain start @caid quick check",
            "api_app_id": "A_snark", "response_url": w.slack.response_url("rc"),
            "trigger_id": "trig.chain" }
    });
    w.deliver("snark", envelope).await;

    let responses = w.slack.responses();
    assert_eq!(responses.len(), 1, "{responses:?}");
    assert!(
        responses[0].1.starts_with("Started chain ch-"),
        "{responses:?}"
    );
    let posts = w.slack.posts();
    assert_eq!(
        posts.len(),
        3,
        "announcement, caid's post, the ending: {posts:#?}"
    );
    let (announcement, post, ending) = (&posts[0], &posts[1], &posts[2]);
    assert!(announcement.text.starts_with("Chain ch-"), "{posts:#?}");
    assert_eq!(
        announcement.thread_ts, None,
        "the announcement is in the channel"
    );
    assert_eq!(
        (post.token.as_str(), post.text.as_str()),
        ("xoxb-caid", "caid was here")
    );
    // The fake numbers its posts from 1700000000.000101: the announcement is the first.
    assert_eq!(
        post.thread_ts.as_deref(),
        Some("1700000000.000101"),
        "{posts:#?}"
    );
    assert_eq!(
        post.thread_ts, ending.thread_ts,
        "one thread under the announcement"
    );
    assert!(ending.text.contains("completed"), "{posts:#?}");
    w.gateway.stop().await;
}
