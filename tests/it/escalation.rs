//! `escalate_to_user` and `resolve_agent_approval` end to end, through a local room: a bot's
//! model (the fake) calls the tool, the question appears in the room under the account of the
//! conversation it came from, a human's next message there is taken as the answer instead of
//! waking bots, and approvals are decided by admins (`/baton approve|deny`) or other bots.

use std::time::Duration;

use baton::backend::{ToolCall, ToolExecutor};
use baton::dispatcher::Handled;
use baton::engine::Caller;
use baton::session::SessionKey;
use baton::store::{Escalation, EscalationKind, EscalationQuery, EscalationState, Store};
use baton::tools::AgentTools;
use baton_contract::{ChatKind, InboundEvent, MessageId, Platform, Sender};
use serde_json::{Value, json};

use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{DEADLINE, TestGateway, config_text, temp_db};

const ALPHA_ROOM: &str = "bot:alpha:local:alpha:room";

fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// `alpha` and `beta` on the fake model, both allowed the escalation tools, every bot woken by
/// every message in `room` (so a question or an answer that wrongly woke a bot would show).
async fn start(fake: &FakeOpenAi) -> (tempfile::TempDir, TestGateway) {
    let extra = r#"
[[chats]]
platform = "local"
id = "room"
activation = "always"
"#;
    let tools = ["escalate_to_user", "resolve_agent_approval"];
    let config = config_text(&fake.base_url, &["alpha", "beta"], extra).replace(
        "\nbase_url = ",
        &format!("\ntools = {tools:?}\nbase_url = "),
    );
    let (dir, db) = temp_db();
    (dir, TestGateway::start(&config, &db).await)
}

/// Script `bot`'s next turn: call `tool` with `arguments`, then say `then`.
fn script_call(fake: &FakeOpenAi, bot: &str, tool: &str, arguments: Value, then: &str) {
    fake.script(bot, Step::tool_call(tool, arguments));
    fake.script(bot, Step::reply(then));
}

async fn escalations(store: &Store) -> Vec<Escalation> {
    store.escalations(EscalationQuery::default()).await.unwrap()
}

/// alpha, woken by alice in `room`, calls `escalate_to_user` with `arguments` and then says
/// `then`; returns the escalation it made.
async fn alpha_escalates(
    fake: &FakeOpenAi,
    gw: &TestGateway,
    arguments: Value,
    then: &str,
    alice_says: &str,
) -> Escalation {
    script_call(fake, "alpha", "escalate_to_user", arguments, then);
    gw.say("room", "alice", alice_says).await;
    gw.settle().await;
    the_escalation(gw.gateway.store()).await
}

/// The only escalation in the store.
async fn the_escalation(store: &Store) -> Escalation {
    let mut all = escalations(store).await;
    assert_eq!(all.len(), 1, "{all:#?}");
    all.remove(0)
}

/// The tool results recorded in a session's transcript, parsed.
async fn tool_results(gw: &TestGateway, session: &str) -> Vec<Value> {
    gw.transcript(session)
        .await
        .iter()
        .filter(|e| e["kind"] == "tool_result")
        .map(|e| serde_json::from_str(e["text"].as_str().unwrap()).unwrap())
        .collect()
}

/// The model turns started since the fake had `since` requests: (bot, last user message).
fn turns_since(fake: &FakeOpenAi, since: usize) -> Vec<(String, String)> {
    fake.requests()
        .split_off(since)
        .into_iter()
        .map(|body| {
            let last_user = body["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_owned();
            (body["model"].as_str().unwrap().to_owned(), last_user)
        })
        .collect()
}

/// A human message in `room` as received through `account`, for [`Dispatcher::handle`].
///
/// [`Dispatcher::handle`]: baton::dispatcher::Dispatcher::handle
fn human_message(account: &str, id: &str, text: &str, reply_to: Option<&str>) -> InboundEvent {
    let sender = Sender {
        id: "alice".into(),
        name: "alice".into(),
        is_bot: false,
        is_self: false,
    };
    let mut event = InboundEvent::text_message(
        Platform::Local,
        account.into(),
        "room".into(),
        ChatKind::Group,
        sender,
        MessageId::from(id),
        text,
    );
    event.reply_to = reply_to.map(MessageId::from);
    event.timestamp_ms = baton::timing::now_ms();
    event
}

#[tokio::test]
async fn a_question_is_posted_where_the_chain_started_and_the_next_human_message_answers_it() {
    let fake = FakeOpenAi::start().await;
    let (_dir, gw) = start(&fake).await;

    let question = alpha_escalates(
        &fake,
        &gw,
        json!({"message": "Which branch should I deploy?"}),
        "I asked the humans.",
        "@alpha deploy please",
    )
    .await;
    assert_eq!(question.kind, EscalationKind::Question);
    assert_eq!(question.state, EscalationState::Pending);
    assert!(question.id.starts_with("q-"), "{}", question.id);
    assert_eq!(
        (question.bot.as_str(), question.session.render()),
        ("alpha", ALPHA_ROOM.to_owned())
    );
    assert_eq!(question.origin.render(), ALPHA_ROOM);
    assert_eq!(question.chat_key.as_str(), "local:room");

    let posted: Vec<Value> = gw
        .said_by("room", "alpha")
        .await
        .into_iter()
        .filter(|m| m["text"] == "alpha asks: Which branch should I deploy?")
        .collect();
    assert_eq!(posted.len(), 1, "{:#?}", gw.messages("room").await);
    assert_eq!(
        question.posted_message_id.as_ref(),
        posted[0]["id"].as_str().map(str::to_owned).as_ref()
    );
    let result = &tool_results(&gw, ALPHA_ROOM).await[0];
    assert_eq!(
        *result,
        json!({"status": "pending", "escalation_id": question.id, "posted_to": "local:room"})
    );
    assert!(
        fake.requests_for("beta").is_empty(),
        "the posted question woke beta"
    );

    let asked = fake.requests().len();
    let in_room = gw.messages("room").await.len();
    let answer = gw.say("room", "alice", "main, please").await;
    gw.settle().await;
    let routed = format!(
        "Answer from alice to your question {}: main, please",
        question.id
    );
    assert_eq!(
        turns_since(&fake, asked),
        [("alpha".to_owned(), routed.clone())],
        "the answer must wake only the asker, and only with the routed answer"
    );
    assert_eq!(
        texts(&gw.messages("room").await.split_off(in_room)),
        ["main, please".to_owned(), format!("echo: {routed}")],
        "only the answer and the asker's reply to it"
    );

    let answered = the_escalation(gw.gateway.store()).await;
    assert_eq!(answered.state, EscalationState::Answered);
    assert_eq!(answered.answer.as_deref(), Some("main, please"));
    assert_eq!(answered.answered_by.as_deref(), Some("alice"));
    assert_eq!(answered.answer_message_id.as_deref(), answer["id"].as_str());
    let recorded: Vec<Value> = gw
        .transcript(ALPHA_ROOM)
        .await
        .into_iter()
        .filter(|e| e["kind"] == "inbound" && e["text"] == "main, please")
        .collect();
    assert_eq!(recorded.len(), 1, "the answer is recorded once");
    assert_eq!(recorded[0]["run_id"], json!(question.id));
    assert_eq!(recorded[0]["speaker"], "alice");

    // The chat is back to normal: the next message wakes the bots again.
    let asked = fake.requests_for("alpha").len();
    gw.say("room", "alice", "thanks").await;
    gw.settle().await;
    assert_eq!(fake.requests_for("alpha").len(), asked + 1);
    gw.stop().await;
}

#[tokio::test]
async fn a_reply_to_the_question_is_the_answer_and_copies_from_other_accounts_are_dropped() {
    let fake = FakeOpenAi::start().await;
    let (_dir, gw) = start(&fake).await;
    let question = alpha_escalates(
        &fake,
        &gw,
        json!({"message": "Staging or production?"}),
        "Asked.",
        "@alpha roll it out",
    )
    .await;
    let posted = question.posted_message_id.clone().unwrap();

    // Replying to something else is not an answer: it runs through the pipeline as usual.
    let dispatcher = gw.gateway.dispatcher();
    let other = human_message("beta", "m-other", "unrelated", Some("nope"));
    assert!(
        !matches!(dispatcher.handle(other).await, Handled::Answered(_)),
        "a reply to another message was taken as the answer"
    );

    let asked = fake.requests().len();
    let via_beta = human_message("beta", "m-answer", "staging", Some(&posted));
    let via_alpha = human_message("alpha", "m-answer", "staging", Some(&posted));
    assert_eq!(
        dispatcher.handle(via_beta).await,
        Handled::Answered(question.id.clone())
    );
    assert_eq!(
        dispatcher.handle(via_alpha).await,
        Handled::Answered(question.id.clone()),
        "the copy through alpha's account"
    );
    gw.settle().await;
    assert_eq!(
        turns_since(&fake, asked),
        [(
            "alpha".to_owned(),
            format!(
                "Answer from alice to your question {}: staging",
                question.id
            )
        )],
        "the answer is routed back once, whatever account took it, and wakes nobody else"
    );
    let answered = the_escalation(gw.gateway.store()).await;
    assert_eq!(answered.state, EscalationState::Answered);
    assert_eq!(answered.answer_message_id.as_deref(), Some("m-answer"));
    let recorded = gw
        .transcript(ALPHA_ROOM)
        .await
        .into_iter()
        .filter(|e| e["text"] == "staging")
        .count();
    assert_eq!(recorded, 1, "the answer is recorded once, not per copy");
    gw.stop().await;
}

#[tokio::test]
async fn an_admin_approves_with_baton_approve_and_a_non_admin_is_refused() {
    let fake = FakeOpenAi::start().await;
    let (_dir, gw) = start(&fake).await;
    let request = alpha_escalates(
        &fake,
        &gw,
        json!({"message": "May I drop the staging database?", "approval": true}),
        "Waiting for approval.",
        "@alpha clean up staging",
    )
    .await;
    let id = request.id.clone();
    assert_eq!(request.kind, EscalationKind::Approval);
    assert!(id.starts_with("ap-"), "{id}");
    let expected = format!(
        "alpha asks for approval ({id}): May I drop the staging database?\n\
         Reply /baton approve {id} or /baton deny {id}."
    );
    assert!(
        gw.said_by("room", "alpha")
            .await
            .iter()
            .any(|m| m["text"] == expected.as_str()),
        "{:#?}",
        gw.messages("room").await
    );
    assert_eq!(
        tool_results(&gw, ALPHA_ROOM).await[0],
        json!({"status": "pending", "approval_id": id, "posted_to": "local:room"})
    );

    let bot_lines = |messages: Vec<Value>| -> Vec<String> {
        messages
            .into_iter()
            .filter(|m| m["is_bot"] == true)
            .map(|m| m["text"].as_str().unwrap().to_owned())
            .collect()
    };
    let before = gw.messages("room").await.len();
    gw.say("room", "mallory", &format!("/baton approve {id}"))
        .await;
    gw.settle().await;
    let after: Vec<Value> = gw.messages("room").await.split_off(before);
    assert_eq!(
        bot_lines(after),
        ["Only baton admins can run /baton commands."]
    );
    assert_eq!(
        the_escalation(gw.gateway.store()).await.state,
        EscalationState::Pending
    );

    let before = gw.messages("room").await.len();
    gw.say("room", "admin", &format!("/baton approve {id} go ahead"))
        .await;
    gw.settle().await;
    let mut after = bot_lines(gw.messages("room").await.split_off(before));
    after.sort();
    assert_eq!(
        after,
        [
            format!("Approved {id}."),
            format!("echo: Approval {id} approved by admin: go ahead"),
        ],
        "the admin is answered, and alpha, woken with the decision, speaks"
    );
    let approved = the_escalation(gw.gateway.store()).await;
    assert_eq!(approved.state, EscalationState::Approved);
    assert_eq!(
        (approved.answer.as_deref(), approved.answered_by.as_deref()),
        (Some("go ahead"), Some("admin"))
    );

    let before = gw.messages("room").await.len();
    gw.say(
        "room",
        "admin",
        &format!("/baton deny {}", id.to_uppercase()),
    )
    .await;
    gw.settle().await;
    let after: Vec<Value> = gw.messages("room").await.split_off(before);
    assert_eq!(
        bot_lines(after),
        [format!(
            "No pending approval {id}: it was already approved."
        )]
    );
    gw.say("room", "admin", "/baton approve ap-zzzzzz").await;
    gw.settle().await;
    assert!(
        bot_lines(gw.messages("room").await).contains(&"No pending approval ap-zzzzzz.".to_owned())
    );
    gw.stop().await;
}

#[tokio::test]
async fn a_bot_may_not_resolve_its_own_approval_request_but_another_bot_may() {
    let fake = FakeOpenAi::start().await;
    let (_dir, gw) = start(&fake).await;
    let id = alpha_escalates(
        &fake,
        &gw,
        json!({"message": "Merge the release branch?", "approval": true}),
        "Asked.",
        "@alpha merge it",
    )
    .await
    .id;

    script_call(
        &fake,
        "alpha",
        "resolve_agent_approval",
        json!({"approval_id": id, "decision": "approve"}),
        "Tried.",
    );
    gw.say("room", "alice", "@alpha just approve it yourself")
        .await;
    gw.settle().await;
    let refused = tool_results(&gw, ALPHA_ROOM).await.pop().unwrap();
    assert_eq!(refused["status"], "refused", "{refused}");
    assert_eq!(refused["reason"], "self-approval");
    assert_eq!(
        the_escalation(gw.gateway.store()).await.state,
        EscalationState::Pending
    );

    script_call(
        &fake,
        "beta",
        "resolve_agent_approval",
        json!({"approval_id": id, "decision": "deny", "note": "not during the freeze"}),
        "Denied.",
    );
    gw.say("room", "alice", "@beta please review alpha's request")
        .await;
    gw.settle().await;
    let decided = tool_results(&gw, "bot:beta:local:beta:room")
        .await
        .pop()
        .unwrap();
    assert_eq!(
        decided,
        json!({"status": "ok", "approval_id": id, "decision": "denied"})
    );
    let denied = the_escalation(gw.gateway.store()).await;
    assert_eq!(denied.state, EscalationState::Denied);
    assert_eq!(
        (denied.answer.as_deref(), denied.answered_by.as_deref()),
        (Some("not during the freeze"), Some("bot:beta"))
    );
    gw.stop().await;
}

#[tokio::test]
async fn escalating_without_a_human_conversation_is_refused() {
    let fake = FakeOpenAi::start().await;
    let (_dir, gw) = start(&fake).await;
    let key = SessionKey {
        bot: "alpha".parse().unwrap(),
        platform: Platform::Local,
        account: "alpha".into(),
        chat: "room".into(),
        thread: None,
    };
    let relay = gw.gateway.relay().clone();
    let tools = AgentTools::new(relay, Caller::external(&key));
    let call = ToolCall {
        id: "c1".into(),
        name: "escalate_to_user".into(),
        arguments: json!({"message": "anyone?"}).to_string(),
    };
    let result = tools.call(&call).await;
    assert_eq!(result["status"], "error", "{result}");
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("no human conversation"),
        "{result}"
    );
    assert!(escalations(gw.gateway.store()).await.is_empty());
    assert!(gw.messages("room").await.is_empty());
    gw.stop().await;
}

/// Through the relay (`post_to_session`): the answer reaches the asking bot's session as an
/// inbound message it is woken with, and what the bot then says is posted to its chat.
#[tokio::test]
async fn the_askers_session_receives_the_answer() {
    let fake = FakeOpenAi::start().await;
    let (_dir, gw) = start(&fake).await;
    let id = alpha_escalates(
        &fake,
        &gw,
        json!({"message": "Which region?"}),
        "Asked.",
        "@alpha spin up a server",
    )
    .await
    .id;
    gw.say("room", "alice", "eu-west").await;

    let expected = format!("Answer from alice to your question {id}: eu-west");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let delivered = gw.transcript(ALPHA_ROOM).await.into_iter().any(|e| {
            e["kind"] == "inbound" && e["text"] == expected.as_str() && e["run_id"] == id.as_str()
        });
        if delivered {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "alpha's session never got `{expected}`: {:#?}",
            gw.transcript(ALPHA_ROOM).await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gw.settle().await;
    let woken: Vec<Value> = gw
        .said_by("room", "alpha")
        .await
        .into_iter()
        .filter(|m| m["text"].as_str().unwrap().contains("eu-west"))
        .collect();
    assert_eq!(
        woken.len(),
        1,
        "alpha's answer to the routed-back message was not posted: {:#?}",
        gw.messages("room").await
    );
    gw.stop().await;
}
