//! `sessions_send` (alias `bots_send_message`): the arguments, then [`crate::relay::send`],
//! whose outcome is rendered here as the tool result the model reads (`{"status", ...}`), with
//! what the run made and spent (its artifacts, `output`, `usage`, `tool_calls`) read back from
//! the store: so a retry answered from an earlier run shows the same.

use crate::budget::refused_budget;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{AgentTools, ToolName, args, error};
use crate::relay::{self, RunReport, SendOutcome, SendRequest, Sent};

/// Told to a sender whose wait ran out, so a model does not "helpfully" send again.
const STILL_WORKING: &str = "The target is still working on it. Do not send it again: that \
    would make it work twice. Its reply will be delivered to your session when it is ready.";

/// The longest a sender may ask to wait; fire-and-forget runs are bounded the same.
const MAX_TIMEOUT_SECONDS: u64 = 30 * 60;

#[derive(Debug, Deserialize)]
struct SendArgs {
    target: String,
    message: String,
    #[serde(default = "default_timeout")]
    timeout_seconds: u64,
    #[serde(default)]
    idempotency_key: Option<String>,
    #[serde(default)]
    artifacts: Vec<String>,
    #[serde(default)]
    expect: Option<Value>,
}

fn default_timeout() -> u64 {
    30
}

/// Hand the target a message and return what became of it.
pub(super) async fn call(tools: &AgentTools, raw: Value) -> Value {
    let a: SendArgs = match args(ToolName::SessionsSend, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    if a.message.trim().is_empty() {
        return error("`message` is empty; say what the other bot should do");
    }
    if let Some(schema) = &a.expect
        && let Err(err) = relay::check_schema(schema)
    {
        return error(err.to_string());
    }
    let store = tools.engine.store();
    for id in &a.artifacts {
        match store.artifact(id).await {
            Ok(Some(_)) => {}
            Ok(None) => {
                return error(format!(
                    "`artifacts` names no artifact `{id}`; artifacts_list shows the ids there are"
                ));
            }
            Err(err) => return error(format!("could not read the artifacts: {err}")),
        }
    }
    let request = SendRequest {
        target: a.target.trim().to_owned(),
        message: a.message,
        timeout: Duration::from_secs(a.timeout_seconds.min(MAX_TIMEOUT_SECONDS)),
        idempotency_key: a.idempotency_key.filter(|k| !k.is_empty()),
        artifacts: a.artifacts,
        expect: a.expect,
    };
    match relay::send(&tools.relay, &tools.caller, request).await {
        Ok(mut sent) => {
            let report = sent.report.take();
            let mut value = render(sent);
            add_report(&mut value, report.as_ref());
            value
        }
        Err(err) => error(err.to_string()),
    }
}

/// A finished run's artifacts and what it reported (`output`, `errors`, `usage`,
/// `tool_calls`), added to its result.
fn add_report(value: &mut Value, settled: Option<&RunReport>) {
    let finished = matches!(
        value["status"].as_str(),
        Some("ok" | "invalid_output" | "failed" | "timed_out")
    );
    if !finished {
        return;
    }
    let (made, report) = settled.map_or((&[][..], None), |r| (&r.artifacts[..], r.report.as_ref()));
    let artifacts: Vec<Value> = made
        .iter()
        .map(|a| {
            json!({"id": a.id, "name": a.name, "media_type": a.media_type, "bytes": a.bytes,
                   "sha256": a.sha256, "bot": a.bot, "inputs": a.inputs})
        })
        .collect();
    value["artifacts"] = json!(artifacts);
    let none = json!({});
    let report = report.unwrap_or(&none);
    value["usage"] = report.get("usage").cloned().unwrap_or(Value::Null);
    value["tool_calls"] = report.get("tool_calls").cloned().unwrap_or(json!(0));
    for key in ["output", "errors"] {
        if let Some(found) = report.get(key) {
            value[key] = found.clone();
        }
    }
}

/// The tool result for what became of a send.
fn render(sent: Sent) -> Value {
    let mut value = match sent.outcome {
        SendOutcome::Answered {
            bot,
            run_id,
            reply,
            model,
            elapsed,
        } => {
            let silent = reply.is_empty();
            let mut value = json!({
                "status": "ok",
                "reply": reply,
                "bot": bot,
                "run_id": run_id,
                "model": model,
                "elapsed_ms": u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            });
            if silent {
                value["silent"] = json!(true);
            }
            value
        }
        SendOutcome::Ended {
            bot,
            run_id,
            reason,
            ..
        }
        | SendOutcome::RefusedEarlier {
            bot,
            run_id,
            reason: Some(reason),
        } if refused_budget(&reason).is_some() => json!({
            "status": "refused",
            "reason": "budget",
            "budget": refused_budget(&reason),
            "bot": bot,
            "run_id": run_id,
        }),
        SendOutcome::Ended {
            bot,
            run_id,
            state,
            reason,
        } => json!({
            "status": state.as_str(),
            "bot": bot,
            "run_id": run_id,
            "error": reason,
        }),
        SendOutcome::Refused { bot, refusal, .. } => json!({
            "status": "refused",
            "reason": refusal.as_str(),
            "message": refusal.explain(),
            "bot": bot,
        }),
        SendOutcome::RefusedEarlier {
            bot,
            run_id,
            reason,
        } => json!({
            "status": "refused",
            "bot": bot,
            "run_id": run_id,
            "reason": reason,
        }),
        SendOutcome::StillWorking { bot, run_id } => json!({
            "status": "timeout",
            "in_flight": true,
            "bot": bot,
            "run_id": run_id,
            "warning": STILL_WORKING,
        }),
        SendOutcome::Accepted {
            bot,
            run_id,
            in_flight,
        } => {
            let mut value = json!({"status": "accepted", "bot": bot, "run_id": run_id});
            if in_flight {
                value["in_flight"] = json!(true);
            }
            value
        }
    };
    if sent.deduplicated {
        value["deduplicated"] = json!(true);
    }
    value
}
