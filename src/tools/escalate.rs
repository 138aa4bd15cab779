//! `escalate_to_user` and `resolve_agent_approval`: a bot asks the people of the
//! conversation its work started from, and bots (or admins, `/baton approve|deny`) decide
//! approval requests.
//!
//! The question is posted through the account of the session the chain of turns started from —
//! the humans are there, not necessarily where the asking bot is — and recorded in the store
//! first, so its id can be printed in it. The human's answer comes back through the pipeline's
//! answer step (`dispatcher/answer_step.rs`), which also routes decisions back.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{AgentTools, ToolName, args, error};
use crate::engine::{Caller, Line, say};
use crate::escalation::{DecideError, Decision, Resolver, decide_approval};
use crate::post::{DeliveryFailed, Target};
use crate::roster::Account;
use crate::session::SessionKey;
use crate::store::{EscalationKind, EscalationState, NewEscalation};
use crate::timing::now_ms;

#[derive(Deserialize)]
struct EscalateArgs {
    message: String,
    #[serde(default)]
    approval: bool,
}

#[derive(Deserialize)]
struct ResolveArgs {
    approval_id: String,
    decision: Decision,
    #[serde(default)]
    note: Option<String>,
}

/// Post a question (or an approval request) to the human side of the caller's originating
/// conversation and record it as pending.
pub(super) async fn escalate(tools: &AgentTools, args_json: Value) -> Value {
    let args: EscalateArgs = match args(ToolName::EscalateToUser, args_json) {
        Ok(args) => args,
        Err(err) => return err,
    };
    let message = args.message.trim();
    if message.is_empty() {
        return error("`message` is empty; write the question the human should answer");
    }
    let caller = &tools.caller;
    let Some(origin) = asked_in(caller) else {
        return error(
            "there is no human conversation behind this call (it did not start from a chat, \
             e.g. it came over MCP), so there is nobody to ask; ask the person you are working \
             for directly",
        );
    };
    let origin = &origin;
    let engine = &tools.engine;
    // An A2A task's caller reads the question from the task (`input-required`): nothing is
    // posted, and its next message on the task answers it.
    let a2a_caller = origin.a2a_task_of().and_then(|_| origin.a2a_peer());
    let account = match a2a_caller {
        Some(_) => None,
        None => match engine.roster().account(origin.platform, &origin.account) {
            Some(account) => Some(account),
            None => {
                return error(format!(
                    "the account `{}` on {} that the conversation came through is no longer \
                     configured; the question cannot be posted",
                    origin.account, origin.platform
                ));
            }
        },
    };
    let kind = if args.approval {
        EscalationKind::Approval
    } else {
        EscalationKind::Question
    };
    let chat_key = origin.chat_key();
    let new = NewEscalation {
        kind,
        bot: caller.bot.clone(),
        session: caller.session.clone(),
        origin: origin.clone(),
        chat_key: chat_key.clone(),
        text: message.to_owned(),
    };
    let store = engine.store();
    let escalation = match store.create_escalation(new, now_ms()).await {
        Ok(escalation) => escalation,
        Err(err) => {
            return error(format!(
                "could not record the question, so it was not asked: {err}"
            ));
        }
    };
    let id_field = match kind {
        EscalationKind::Question => "escalation_id",
        EscalationKind::Approval => "approval_id",
    };
    let Some(account) = account else {
        let asked = format!("the A2A agent `{}`", a2a_caller.unwrap_or_default());
        return json!({"status": "pending", id_field: escalation.id, "asked": asked,
                      "note": "its task now waits for the answer, which comes as a message; \
                               end your turn"});
    };
    let asker = engine
        .roster()
        .bot(&caller.bot)
        .map_or(caller.bot.as_str(), |bot| bot.config.display_name());
    let text = posted_text(kind, asker, &escalation.id, message);
    if let Err(err) = post(tools, account, origin, &escalation.id, &text).await {
        return error(format!(
            "could not post the question to {chat_key}: {err}; nobody was asked, so no answer \
             will come: try again later or go on without it"
        ));
    }
    json!({"status": "pending", id_field: escalation.id, "posted_to": chat_key})
}

/// Where `caller`'s question is asked: the conversation its chain of turns started from, or,
/// in a turn of an A2A task (which has no chat), the task itself.
fn asked_in(caller: &Caller) -> Option<SessionKey> {
    if let Some(origin) = &caller.origin {
        return Some(origin.clone());
    }
    caller.session.a2a_peer()?;
    Some(caller.session.a2a_task(caller.run_id.as_deref()?))
}

/// What the humans see.
fn posted_text(kind: EscalationKind, asker: &str, id: &str, message: &str) -> String {
    match kind {
        EscalationKind::Question => format!("{asker} asks: {message}"),
        EscalationKind::Approval => format!(
            "{asker} asks for approval ({id}): {message}\n\
             Reply /baton approve {id} or /baton deny {id}."
        ),
    }
}

/// Post the question `id` to the origin's chat through the origin's account, recorded in the
/// origin session's transcript; on failure the escalation is marked failed.
async fn post(
    tools: &AgentTools,
    account: &Account,
    origin: &SessionKey,
    id: &str,
    text: &str,
) -> Result<(), DeliveryFailed> {
    let engine = &tools.engine;
    let store = engine.store();
    let line = Line {
        // Posted through another bot's account: that bot is not speaking, so other bots must
        // not take the line for its words.
        account,
        session: origin,
        // Not the bare escalation id: that is the run id of the asker's turn woken by the
        // answer, whose reply must not share the question's idempotency keys (it would never
        // be posted).
        run_id: format!("escalate:{id}"),
        quiet_in: origin.chat_key(),
        target: Target {
            chat: origin.chat.clone(),
            thread: origin.thread.clone(),
            reply_to: None,
            ephemeral: None,
        },
        stage: "escalate",
        text,
    };
    match say(engine, line).await {
        Ok(posted) => {
            let Some(first) = posted.first() else {
                return Ok(());
            };
            if let Err(err) = store.escalation_posted(id, first.as_str()).await {
                tracing::error!(
                    escalation = %id, %err,
                    "could not remember the posted question; only its chat will match answers"
                );
            }
            Ok(())
        }
        Err(failed) => {
            let err = failed.to_string();
            let marked = store
                .resolve_escalation(id, EscalationState::Failed, Some(&err), "baton", now_ms())
                .await;
            if let Err(store_err) = marked {
                tracing::error!(
                    escalation = %id, err = %store_err,
                    "could not mark the question failed"
                );
            }
            Err(failed)
        }
    }
}

/// Approve or deny a pending approval request another bot raised.
pub(super) async fn resolve(tools: &AgentTools, args_json: Value) -> Value {
    let args: ResolveArgs = match args(ToolName::ResolveAgentApproval, args_json) {
        Ok(args) => args,
        Err(err) => return err,
    };
    let by = Resolver::Bot(&tools.caller.bot);
    let decided = decide_approval(
        &tools.engine,
        &args.approval_id,
        args.decision,
        by,
        args.note.as_deref(),
    )
    .await;
    match decided {
        Ok(decided) => json!({
            "status": "ok",
            "approval_id": decided.id,
            "decision": decided.state,
        }),
        Err(err @ DecideError::SelfApproval(_)) => json!({
            "status": "refused",
            "reason": "self-approval",
            "error": err.to_string(),
        }),
        Err(err) => error(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approval_request_says_how_to_answer_it() {
        assert_eq!(
            posted_text(
                EscalationKind::Question,
                "Caid",
                "q-7kq2xd",
                "Which branch?"
            ),
            "Caid asks: Which branch?"
        );
        assert_eq!(
            posted_text(
                EscalationKind::Approval,
                "Caid",
                "ap-7kq2xd",
                "Drop staging?"
            ),
            "Caid asks for approval (ap-7kq2xd): Drop staging?\n\
             Reply /baton approve ap-7kq2xd or /baton deny ap-7kq2xd."
        );
    }
}
