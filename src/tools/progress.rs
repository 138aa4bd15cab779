//! `progress(message, step?, of?)`: a bot working on another bot's `sessions_send` says how far
//! it has got. The line is kept on the delivery (the sender's `session_status` shows the latest,
//! `/api/deliveries` all of them) and announced on the event stream.

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
    let not_a_delivery = || {
        error(
            "progress is for a turn working on another bot's sessions_send, and this turn is \
             not one; just answer",
        )
    };
    let (Some(run_id), Some(_)) = (&caller.run_id, &caller.passive_to) else {
        return not_a_delivery();
    };
    let line = ProgressLine {
        ts_ms: now_ms(),
        message: message.to_owned(),
        step: a.step,
        of: a.of,
    };
    match tools.engine.store().progress_add(run_id, line).await {
        Ok(true) => {}
        Ok(false) => return not_a_delivery(),
        Err(err) => return error(format!("could not record the progress: {err}")),
    }
    tools.engine.events().emit(Event::Progress {
        run_id: run_id.clone(),
        bot: caller.bot.clone(),
        session: caller.session.render(),
        message: message.to_owned(),
        step: a.step,
        of: a.of,
    });
    json!({"status": "ok"})
}
