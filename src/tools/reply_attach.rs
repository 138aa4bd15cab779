//! `reply_attach(ids)`: the bot posts artifacts as files with its reply in this turn.
//!
//! The ids are checked when the tool is called, where the model can still act on a refusal: an
//! unknown id is an error naming it, and a file bigger than the chat's platform takes is
//! refused with the limit (not dropped at delivery). What passes is kept on the run, and
//! delivery uploads it after the reply's text. Every artifact baton holds is visible to every
//! bot, as with `artifact_get`. The checks and the record are the engine's
//! ([`crate::engine::attach`]), shared with the backends' `attachments`.

use serde::Deserialize;
use serde_json::{Value, json};

use super::artifacts::record;
use super::{AgentTools, ToolName, args, error};
use crate::engine::{AttachRefused, attach};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AttachArgs {
    ids: Vec<String>,
}

/// Attach the artifacts `ids` to the caller's reply in this turn.
pub(super) async fn call(tools: &AgentTools, raw: Value) -> Value {
    let a: AttachArgs = match args(ToolName::ReplyAttach, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    let Some(run_id) = tools.caller.run_id.as_deref() else {
        return error(
            "reply_attach attaches files to the reply of a bot's turn, and this call is made \
             outside any turn (over MCP); post the file yourself, or hand it to a bot with \
             sessions_send `artifacts`",
        );
    };
    let ids: Vec<String> = a.ids.iter().map(|id| id.trim().to_owned()).collect();
    if ids.is_empty() || ids.iter().any(String::is_empty) {
        return error("`ids` must name at least one artifact id (art-...), none of them empty");
    }
    match attach(&tools.engine, &tools.caller.session, run_id, ids).await {
        Ok(attached) => {
            let files: Vec<Value> = attached.iter().map(record).collect();
            json!({
                "status": "ok",
                "attached": files,
                "note": "each is posted as a file after your reply's text",
            })
        }
        Err(too_large @ AttachRefused::TooLarge { .. }) => json!({
            "status": "refused",
            "reason": "too_large",
            "message": too_large.to_string(),
        }),
        Err(refused) => error(refused.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::in_room;
    use super::*;
    use crate::gateway::testing::{echo_config, parts};

    async fn tools(run_id: Option<&str>) -> AgentTools {
        in_room(&parts(&echo_config(&["b"], "")).await.relay, "b", run_id)
    }

    #[tokio::test]
    async fn outside_a_turn_or_without_ids_nothing_is_attached() {
        let outside = call(&tools(None).await, json!({"ids": ["art-1"]})).await;
        assert_eq!(outside["status"], "error");
        assert!(
            outside["error"]
                .as_str()
                .unwrap()
                .contains("outside any turn")
        );
        let turn = tools(Some("run-1")).await;
        for ids in [json!([]), json!(["art-1", " "])] {
            let refused = call(&turn, json!({ "ids": ids })).await;
            assert_eq!(refused["status"], "error", "{refused}");
            assert!(
                refused["error"]
                    .as_str()
                    .unwrap()
                    .contains("none of them empty")
            );
        }
    }

    #[tokio::test]
    async fn an_unknown_id_is_named_in_the_refusal() {
        let refused = call(&tools(Some("run-1")).await, json!({"ids": ["art-nope"]})).await;
        assert_eq!(refused["status"], "error", "{refused}");
        assert!(
            refused["error"].as_str().unwrap().contains("art-nope"),
            "{refused}"
        );
    }
}
