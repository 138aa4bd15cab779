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

#[cfg(test)]
mod tests {
    use super::super::testing::{error_of, in_room, refused};
    use super::*;
    use crate::bot_id::BotId;
    use crate::gateway::testing::{echo_config, parts};
    use crate::store::DeliveryState;

    /// `lead`'s tools in its turn, with bots `lead`, `alpha`, `beta` and `extra` config.
    async fn lead(extra: &str) -> AgentTools {
        let gw = parts(&echo_config(&["lead", "alpha", "beta"], extra)).await;
        in_room(&gw.relay, "lead", Some("run-1"))
    }

    fn alpha() -> BotId {
        "alpha".parse().unwrap()
    }

    fn sent(outcome: SendOutcome) -> Value {
        let sent = Sent {
            outcome,
            deduplicated: false,
            report: None,
        };
        render(sent)
    }

    #[tokio::test]
    async fn nothing_is_sent_without_a_message_a_valid_schema_and_known_artifacts() {
        let tools = lead("").await;
        let cases = [
            (json!({"message": "hi"}), "bad arguments for sessions_send"),
            (
                json!({"target": "alpha", "message": " "}),
                "`message` is empty",
            ),
            (
                json!({"target": "alpha", "message": "hi", "expect": {"type": 12}}),
                "`expect` is not a usable JSON Schema",
            ),
            (
                json!({"target": "alpha", "message": "hi", "artifacts": ["art-nope"]}),
                "no artifact `art-nope`",
            ),
        ];
        for (args, says) in cases {
            let result = call(&tools, args.clone()).await;
            assert!(error_of(&result).contains(says), "{args}: {result}");
        }
        let deliveries = tools.engine.store().deliveries(Default::default()).await;
        assert!(deliveries.unwrap().is_empty(), "nothing was sent");
    }

    /// The echo target says back what it was sent; a settled run's result carries what it made
    /// and spent.
    #[tokio::test]
    async fn an_answered_send_returns_the_reply_and_what_the_run_made() {
        let tools = lead("").await;
        let answered = call(&tools, json!({"target": " alpha ", "message": "hello"})).await;
        assert_eq!(answered["status"], "ok", "{answered}");
        assert_eq!(
            (&answered["reply"], &answered["bot"], &answered["model"]),
            (&json!("hello"), &json!("alpha"), &json!("echo"))
        );
        assert_eq!(answered["artifacts"], json!([]));
        assert_eq!(answered["tool_calls"], 0);
        assert!(answered.get("deduplicated").is_none());
    }

    /// A retry with the same key is the earlier run's outcome: the target does not work twice.
    #[tokio::test]
    async fn a_retry_with_the_same_key_is_answered_from_the_first_run() {
        let tools = lead("").await;
        let ask = json!({"target": "alpha", "message": "hello", "idempotency_key": "k1"});
        let first = call(&tools, ask.clone()).await;
        let again = call(&tools, ask).await;
        assert_eq!(again["deduplicated"], true, "{again}");
        assert_eq!(again["run_id"], first["run_id"]);
        assert_eq!(again["reply"], "hello");
    }

    #[tokio::test]
    async fn fire_and_forget_is_accepted() {
        let tools = lead("").await;
        let fired = call(
            &tools,
            json!({"target": "alpha", "message": "hi", "timeout_seconds": 0}),
        )
        .await;
        assert_eq!(fired["status"], "accepted", "{fired}");
        assert!(fired["run_id"].as_str().is_some_and(|r| !r.is_empty()));
    }

    /// A guard's refusal is a `refused` result saying which rule and why.
    #[tokio::test]
    async fn the_send_rules_refuse_with_their_reason() {
        let tools = lead("\n[agent_to_agent]\nallow = [\"lead\", \"alpha\"]\n").await;
        let outside = call(&tools, json!({"target": "beta", "message": "hi"})).await;
        assert_eq!(refused(&outside), "not-allowed");
        assert!(
            outside["message"]
                .as_str()
                .unwrap()
                .contains("[agent_to_agent] allow")
        );
        let itself = call(&tools, json!({"target": "lead", "message": "hi"})).await;
        assert_eq!(refused(&itself), "self-send");
    }

    #[test]
    fn a_silent_answer_and_a_deduplicated_one_say_so() {
        let answered = |reply: &str| SendOutcome::Answered {
            bot: alpha(),
            run_id: "r1".into(),
            reply: reply.into(),
            model: "echo".into(),
            elapsed: Duration::from_millis(5),
        };
        let silent = sent(answered(""));
        assert_eq!(
            (&silent["status"], &silent["silent"]),
            (&json!("ok"), &json!(true))
        );
        assert_eq!(silent["elapsed_ms"], 5);
        assert!(sent(answered("hi")).get("silent").is_none());
        let again = render(Sent {
            outcome: answered("hi"),
            deduplicated: true,
            report: None,
        });
        assert_eq!(again["deduplicated"], true);
    }

    /// A sender whose wait ran out is told not to send again, or the target works twice.
    #[test]
    fn a_wait_that_ran_out_warns_against_sending_again() {
        let waiting = sent(SendOutcome::StillWorking {
            bot: alpha(),
            run_id: "r1".into(),
        });
        assert_eq!(
            (&waiting["status"], &waiting["in_flight"]),
            (&json!("timeout"), &json!(true))
        );
        assert_eq!(waiting["warning"], STILL_WORKING);
    }

    #[test]
    fn a_budget_refusal_names_the_budget_now_or_earlier() {
        let ended = sent(SendOutcome::Ended {
            bot: alpha(),
            run_id: "r1".into(),
            state: DeliveryState::Refused,
            reason: "budget:daily".into(),
        });
        assert_eq!(
            (refused(&ended), &ended["budget"]),
            ("budget", &json!("daily"))
        );
        let earlier = sent(SendOutcome::RefusedEarlier {
            bot: alpha(),
            run_id: "r1".into(),
            reason: Some("budget:daily".into()),
        });
        assert_eq!(refused(&earlier), "budget");
        let failed = sent(SendOutcome::Ended {
            bot: alpha(),
            run_id: "r1".into(),
            state: DeliveryState::Failed,
            reason: "the backend failed".into(),
        });
        assert_eq!(
            (&failed["status"], &failed["error"]),
            (&json!("failed"), &json!("the backend failed"))
        );
    }

    /// What a run made and reported belongs to a finished run; an accepted send has none yet.
    #[test]
    fn only_a_finished_run_reports_what_it_made_and_spent() {
        let report = RunReport {
            artifacts: Vec::new(),
            report: Some(
                json!({"output": {"ok": 1}, "usage": {"total_tokens": 9}, "tool_calls": 2}),
            ),
            settled_ms: Some(1),
            made_nothing: false,
        };
        let mut failed = sent(SendOutcome::Ended {
            bot: alpha(),
            run_id: "r1".into(),
            state: DeliveryState::InvalidOutput,
            reason: "no match".into(),
        });
        add_report(&mut failed, Some(&report));
        assert_eq!(failed["output"], json!({"ok": 1}));
        assert_eq!(
            (&failed["usage"]["total_tokens"], &failed["tool_calls"]),
            (&json!(9), &json!(2))
        );
        let mut accepted = sent(SendOutcome::Accepted {
            bot: alpha(),
            run_id: "r1".into(),
            in_flight: true,
        });
        add_report(&mut accepted, Some(&report));
        assert_eq!(accepted["in_flight"], true);
        assert!(accepted.get("artifacts").is_none() && accepted.get("usage").is_none());
    }
}
