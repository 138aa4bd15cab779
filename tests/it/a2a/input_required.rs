//! A bot that escalates in an A2A task asks the task's caller (SPEC 14: an escalation is
//! `input-required`): the official SDK client sees the question as the task's status, answers
//! on the same task, and the task goes on to `completed` with a reply that used the answer; or
//! cancels it, which withdraws the question.

use std::path::Path;

use serde_json::{Value, json};

use super::{A2A_ON, sdk, sdk_on};
use crate::support::fake_openai::{FakeOpenAi, Step};
use crate::support::gateway::{TestGateway, config_with, temp_db};

/// The fake agent that asks its caller over `/mcp` (`--ask-caller`).
const AGENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/agents/ask_over_mcp.py");

/// The task of an SDK send (`asked`, the client's output): waiting on its caller, with the
/// question "Which branch?" as its status message, and no answer (what the bot said after
/// asking is not the task's answer).
fn asking_which_branch(asked: &Value) -> &Value {
    let task = &asked["events"][0]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{asked}"
    );
    assert_eq!(
        task["status"]["message"]["parts"][0]["text"], "Which branch?",
        "{asked}"
    );
    assert_eq!(task["artifacts"], Value::Null, "{asked}");
    task
}

#[tokio::test]
async fn an_escalation_is_input_required_and_the_answer_on_the_task_completes_it() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let (gw, asked) = asking(&fake, &db, "I asked which branch to deploy.").await;
    fake.script("alpha", Step::reply("Deployed main."));
    let task = asking_which_branch(&asked);
    assert_eq!(asked["got"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let (id, context) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );
    // Nothing was posted anywhere: the question is recorded against the task.
    let question = &fake.tool_results("alpha")[0];
    assert_eq!(question["status"], "pending", "{question}");

    let answered = sdk_on(&gw, "stream", "main", "m-main", &[id, context]).await;
    let events = answered["events"].as_array().unwrap();
    assert_eq!(events[0]["task"]["id"], id, "{events:?}");
    assert_eq!(
        super::final_state(events),
        "TASK_STATE_COMPLETED",
        "{events:?}"
    );
    assert_eq!(answered["got"]["id"], id);
    assert_eq!(answered["got"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        answered["got"]["artifacts"][0]["parts"][0]["text"], "Deployed main.",
        "{answered}"
    );
    // The bot's next turn was handed the answer, tied to its question.
    let woken = fake.woken_by("alpha");
    let told = woken.last().unwrap();
    assert!(
        told.starts_with("Answer from A2A agent 'client' to your question q-")
            && told.ends_with(": main"),
        "{woken:?}"
    );

    // The answer sent again finds the task; a task waiting on nothing takes no message.
    let again = sdk_on(&gw, "send", "main", "m-main", &[id, context]).await;
    assert_eq!(
        again["events"][0]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert_eq!(fake.requests_for("alpha").len(), 3, "no further turn");
    let params = json!({"message": {"messageId": "m-late", "role": "ROLE_USER", "taskId": id,
                                     "contextId": context, "parts": [{"text": "develop"}]}});
    let late = super::rpc(&gw.http, &gw.base, "alpha", "SendMessage", params).await;
    let error = late["error"]["message"].as_str().unwrap_or_default();
    assert!(error.contains("not waiting for input"), "{late}");
    gw.stop().await;
}

#[tokio::test]
async fn a_task_waiting_on_its_caller_can_be_canceled_and_takes_no_answer_after() {
    let fake = FakeOpenAi::start().await;
    let (_dir, db) = temp_db();
    let (gw, asked) = asking(&fake, &db, "I asked.").await;
    let task = &asked["events"][0]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
        "{asked}"
    );
    let (id, context) = (
        task["id"].as_str().unwrap(),
        task["contextId"].as_str().unwrap(),
    );

    let canceled = sdk(&gw, "cancel", id, "unused").await;
    assert_eq!(
        canceled["canceled"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    let row = &gw.get("/api/deliveries").await["deliveries"][0];
    assert_eq!(row["state"], "canceled", "{row}");
    let params = json!({"message": {"messageId": "m-main", "role": "ROLE_USER", "taskId": id,
                                     "contextId": context, "parts": [{"text": "main"}]}});
    let late = super::rpc(&gw.http, &gw.base, "alpha", "SendMessage", params).await;
    assert_eq!(late["error"]["code"], -32004, "{late}");
    assert_eq!(
        fake.requests_for("alpha").len(),
        2,
        "no turn after the cancel"
    );
    gw.stop().await;
}

/// An agent bot (a real process) asks its question over `/mcp` with its turn's token, which
/// its turn's own record does not count as a tool call: the blocking send's answer still says
/// `input-required`, not `completed` with what the agent said after asking.
#[tokio::test]
async fn an_agent_asking_over_mcp_leaves_its_task_input_required() {
    let (_dir, db) = temp_db();
    let config = format!(
        r#"
[gateway]
drain_seconds = 5

[[bots]]
id = "alpha"
backend = "command"
command = ["python3", "{AGENT}", "--ask-caller", "Which branch?"]
tools = ["escalate_to_user"]
{A2A_ON}"#
    );
    let env = |name: &str| match name {
        "PATH" | "HOME" => std::env::var(name).ok(),
        _ => None,
    };
    let gw = TestGateway::start_with_env(&config, &db, &env).await;
    let asked = sdk(&gw, "send", "Deploy, please.", "m-deploy").await;
    asking_which_branch(&asked);
    gw.stop().await;
}

/// A gateway whose bot `alpha` asks its caller "Which branch?" and then says `after`, and the
/// SDK client's answer to the task it sent it.
async fn asking(fake: &FakeOpenAi, db: &Path, after: &str) -> (TestGateway, Value) {
    let bots = [("alpha", "tools = [\"escalate_to_user\"]")];
    let gw = TestGateway::start(&config_with(&fake.base_url, &bots, A2A_ON), db).await;
    fake.script(
        "alpha",
        Step::tool_call("escalate_to_user", json!({"message": "Which branch?"})),
    );
    fake.script("alpha", Step::reply(after));
    let asked = sdk(&gw, "send", "Deploy, please.", "m-deploy").await;
    (gw, asked)
}
