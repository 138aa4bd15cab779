//! A delivery as the protocol shows it: the task, its status (the delivery's state, or
//! `input-required` while a question waits on the caller) and its artifacts (the reply, and the
//! files the bot made as file parts). The same JSON for both bindings.

use serde_json::{Value, json};

use crate::store::{Delivery, DeliveryState, Escalation};

/// A delivery as an A2A task, waiting on its caller when `asked` it a question.
pub(super) fn task(d: &Delivery, asked: Option<&Escalation>, base: &str) -> Value {
    // What the asking turn said after its question is not the task's answer.
    let reply = reply_artifact(d).filter(|_| asked.is_none());
    let mut artifacts: Vec<Value> = reply.into_iter().collect();
    artifacts.extend(d.artifacts_out.iter().map(|a| {
        json!({"artifactId": a.id, "name": a.name, "parts": [{
            "url": format!("{base}/api/artifacts/{}/content", a.id),
            "filename": a.name,
            "mediaType": a.media_type,
        }]})
    }));
    let message_id = d
        .idempotency_key
        .as_deref()
        .and_then(|k| k.splitn(3, ':').nth(2))
        .unwrap_or_default();
    json!({
        "id": d.run_id,
        "contextId": d.target_session.render(),
        "status": final_status(d, asked),
        "artifacts": artifacts,
        "history": [{
            "messageId": message_id,
            "contextId": d.target_session.render(),
            "taskId": d.run_id,
            "role": "ROLE_USER",
            "parts": [{"text": d.message}],
        }],
    })
}

/// The bot's reply as the task's artifact, when it said something.
fn reply_artifact(d: &Delivery) -> Option<Value> {
    let reply = d.reply.as_deref().filter(|r| !r.is_empty())?;
    Some(json!({"artifactId": "reply", "name": "reply", "parts": [{"text": reply}]}))
}

/// The status task `d` stands at: `input-required` with the question while it waits on one
/// (`asked`), else its delivery's.
pub(super) fn final_status(d: &Delivery, asked: Option<&Escalation>) -> Value {
    let Some(asked) = asked else {
        return status(d, d.state);
    };
    let timestamp = chrono::DateTime::from_timestamp_millis(asked.created_ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    json!({"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": timestamp, "message": {
        "messageId": format!("{}-{}", d.run_id, asked.id),
        "taskId": d.run_id,
        "contextId": d.target_session.render(),
        "role": "ROLE_AGENT",
        "parts": [{"text": asked.text}],
    }})
}

/// A task status for `state`, with the reason as the agent's message for an unhappy end.
pub(super) fn status(d: &Delivery, state: DeliveryState) -> Value {
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
    let at = d.finished_ms.or(d.started_ms).unwrap_or(d.created_ms);
    let timestamp = chrono::DateTime::from_timestamp_millis(at)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut status = json!({"state": name, "timestamp": timestamp});
    if let Some(reason) = d.reason.as_deref().filter(|_| state == d.state) {
        status["message"] = json!({
            "messageId": format!("{}-status", d.run_id),
            "taskId": d.run_id,
            "contextId": d.target_session.render(),
            "role": "ROLE_AGENT",
            "parts": [{"text": reason}],
        });
    }
    status
}
