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
