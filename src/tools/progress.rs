//! `progress(message, step?, of?)`: a bot says how far its turn has got. Working on another
//! bot's `sessions_send`, the line is kept on the delivery (the sender's `session_status` shows
//! the latest, `/api/deliveries` all of them). In any turn it is announced on the event stream,
//! and the chat's typing indicator says it where the platform's can carry text (Slack).

use serde::Deserialize;
use serde_json::{Value, json};

use super::{AgentTools, ToolName, args, error};
use crate::events::Event;
use crate::store::ProgressLine;
use crate::timing::now_ms;

/// The longest progress line kept, in characters: a status, not a report.
const MAX_CHARS: usize = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgressArgs {
    message: String,
    #[serde(default)]
    step: Option<u32>,
    #[serde(default)]
    of: Option<u32>,
}

/// Record a progress line on the delivery the caller's turn is working on.
pub(super) async fn report(tools: &AgentTools, raw: Value) -> Value {
    let a: ProgressArgs = match args(ToolName::Progress, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    let message = a.message.trim();
    if message.is_empty() {
        return error("`message` is empty; say what you are doing now");
    }
    if message.chars().count() > MAX_CHARS {
        return error(format!(
            "`message` is over {MAX_CHARS} characters; keep a progress line short (put long \
             output in an artifact)"
        ));
    }
    let caller = &tools.caller;
    let Some(run_id) = &caller.run_id else {
        return error(
            "progress is for a bot's turn (a chat's, or one working on another bot's \
             sessions_send), and this call is from none; just answer",
        );
    };
    let line = ProgressLine {
        ts_ms: now_ms(),
        message: message.to_owned(),
        step: a.step,
        of: a.of,
    };
    // On a delivery the line is kept (the sender's `session_status`, `/api/deliveries`);
    // in any turn it is announced, and the chat's typing status says it where it can.
    let kept = match &caller.passive_to {
        Some(_) => match tools.engine.store().progress_add(run_id, line).await {
            Ok(kept) => kept,
            Err(err) => return error(format!("could not record the progress: {err}")),
        },
        None => false,
    };
    tools.engine.events().emit(Event::Progress {
        run_id: run_id.clone(),
        bot: caller.bot.clone(),
        session: caller.session.render(),
        message: message.to_owned(),
        step: a.step,
        of: a.of,
    });
    if kept {
        json!({"status": "ok"})
    } else {
        json!({
            "status": "ok",
            "note": "shown while this turn runs (on the chat's typing status where the platform \
                     has one, and on /api/events); not kept, as this turn works on no delivery",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{error_of as refusal, in_room};
    use super::*;
    use crate::gateway::testing::{echo_config, parts};

    /// Tools for bot `b` in a chat turn (`run_id` set) or outside any turn.
    async fn tools(run_id: Option<&str>) -> AgentTools {
        in_room(&parts(&echo_config(&["b"], "")).await.relay, "b", run_id)
    }

    #[tokio::test]
    async fn an_empty_or_long_line_and_a_call_outside_a_turn_are_refused() {
        let turn = tools(Some("run-1")).await;
        let empty = report(&turn, json!({"message": "  "})).await;
        assert!(refusal(&empty).contains("`message` is empty"));
        let long = report(&turn, json!({"message": "x".repeat(MAX_CHARS + 1)})).await;
        assert!(refusal(&long).contains("over 500 characters"));
        let outside = tools(None).await;
        let none = report(&outside, json!({"message": "reading"})).await;
        assert!(refusal(&none).contains("this call is from none"));
    }

    #[tokio::test]
    async fn a_chat_turns_line_is_shown_and_said_not_kept() {
        let turn = tools(Some("run-1")).await;
        let shown = report(&turn, json!({"message": "reading", "step": 1, "of": 3})).await;
        assert_eq!(shown["status"], "ok", "{shown}");
        assert!(
            shown["note"].as_str().unwrap().contains("not kept"),
            "{shown}"
        );
    }
}
