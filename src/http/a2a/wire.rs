//! A delivery as the protocol shows it: the task, its status (the delivery's state, or
//! `input-required` while a question waits on the caller) and its artifacts (the reply, and the
//! files the bot made as file parts). The same JSON for both bindings.

use serde_json::{Value, json};

use crate::session::SessionKey;
use crate::store::{Artifact, Delivery, DeliveryState, Escalation};

/// What a task's JSON is made of: its delivery's row, or what the send that waited for its run
/// learned when the run handed its outcome over (`tasks.rs`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Task<'a> {
    pub(super) run_id: &'a str,
    /// The delivery's target session: the task's context.
    pub(super) context: &'a SessionKey,
    /// `a2a:<caller>:<messageId>`.
    pub(super) idempotency_key: Option<&'a str>,
    pub(super) message: &'a str,
    pub(super) state: DeliveryState,
    pub(super) reason: Option<&'a str>,
    pub(super) reply: Option<&'a str>,
    /// The files the bot made.
    pub(super) artifacts: &'a [Artifact],
    /// When it last moved: settled, else started, else created.
    pub(super) at_ms: i64,
}

impl<'a> From<&'a Delivery> for Task<'a> {
    fn from(d: &'a Delivery) -> Self {
        Task {
            run_id: &d.run_id,
            context: &d.target_session,
            idempotency_key: d.idempotency_key.as_deref(),
            message: &d.message,
            state: d.state,
            reason: d.reason.as_deref(),
            reply: d.reply.as_deref(),
            artifacts: &d.artifacts_out,
            at_ms: d.finished_ms.or(d.started_ms).unwrap_or(d.created_ms),
        }
    }
}

/// A delivery as an A2A task, waiting on its caller when `asked` it a question.
pub(super) fn task<'a>(d: impl Into<Task<'a>>, asked: Option<&Escalation>, base: &str) -> Value {
    let d = d.into();
    // What the asking turn said after its question is not the task's answer.
    let reply = reply_artifact(d).filter(|_| asked.is_none());
    let mut artifacts: Vec<Value> = reply.into_iter().collect();
    artifacts.extend(d.artifacts.iter().map(|a| {
        json!({"artifactId": a.id, "name": a.name, "parts": [{
            "url": format!("{base}/api/artifacts/{}/content", a.id),
            "filename": a.name,
            "mediaType": a.media_type,
        }]})
    }));
    let message_id = d
        .idempotency_key
        .and_then(|k| k.splitn(3, ':').nth(2))
        .unwrap_or_default();
    let context = d.context.render();
    let mut task = json!({
        "id": d.run_id,
        "contextId": context,
    });
    // Moved in: `json!` would copy each through serialization.
    task["status"] = final_status(d, asked);
    task["artifacts"] = Value::Array(artifacts);
    task["history"] = json!([{
        "messageId": message_id,
        "contextId": context,
        "taskId": d.run_id,
        "role": "ROLE_USER",
        "parts": [{"text": d.message}],
    }]);
    task
}

/// `{key: value}` with `value` moved in, where `json!` would copy it through serialization:
/// the frame of a response or of a stream's event.
pub(super) fn wrapped(key: &str, value: Value) -> Value {
    Value::Object(serde_json::Map::from_iter([(key.to_owned(), value)]))
}

/// The bot's reply as the task's artifact, when it said something.
fn reply_artifact(d: Task<'_>) -> Option<Value> {
    let reply = d.reply.filter(|r| !r.is_empty())?;
    Some(json!({"artifactId": "reply", "name": "reply", "parts": [{"text": reply}]}))
}

/// The status task `d` stands at: `input-required` with the question while it waits on one
/// (`asked`), else its delivery's.
pub(super) fn final_status<'a>(d: impl Into<Task<'a>>, asked: Option<&Escalation>) -> Value {
    let d = d.into();
    let Some(asked) = asked else {
        return status(d, d.state);
    };
    let timestamp = chrono::DateTime::from_timestamp_millis(asked.created_ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    json!({"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": timestamp, "message": {
        "messageId": format!("{}-{}", d.run_id, asked.id),
        "taskId": d.run_id,
        "contextId": d.context.render(),
        "role": "ROLE_AGENT",
        "parts": [{"text": asked.text}],
    }})
}

/// A task status for `state`, with the reason as the agent's message for an unhappy end.
pub(super) fn status<'a>(d: impl Into<Task<'a>>, state: DeliveryState) -> Value {
    let d = d.into();
    let name = match state {
        DeliveryState::Queued => "TASK_STATE_SUBMITTED",
        DeliveryState::Running => "TASK_STATE_WORKING",
        DeliveryState::Delivered => "TASK_STATE_COMPLETED",
        DeliveryState::Refused => "TASK_STATE_REJECTED",
        DeliveryState::Canceled => "TASK_STATE_CANCELED",
        DeliveryState::Failed | DeliveryState::TimedOut | DeliveryState::InvalidOutput => {
            "TASK_STATE_FAILED"
        }
    };
    let timestamp = chrono::DateTime::from_timestamp_millis(d.at_ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut status = json!({"state": name, "timestamp": timestamp});
    if let Some(reason) = d.reason.filter(|_| state == d.state) {
        status["message"] = json!({
            "messageId": format!("{}-status", d.run_id),
            "taskId": d.run_id,
            "contextId": d.context.render(),
            "role": "ROLE_AGENT",
            "parts": [{"text": reason}],
        });
    }
    status
}
