//! The A2A operations on tasks, one core each for both bindings: send (blocking or at once),
//! an answer on a task waiting for input, get, cancel and list. Each takes the protocol's
//! request JSON (or the task id) and gives its response JSON (`wire.rs`) or an [`A2aError`].

use std::time::Duration;

use baton_contract::Platform;
use serde_json::{Value, json};

use super::error::{A2aError, ErrorKind};
use super::message::{keep_files, read_message};
use super::pages;
use super::wire::{Task, task, wrapped};
use crate::bot_id::BotId;
use crate::engine::{Caller, Engine};
use crate::escalation::route_back;
use crate::relay::{self, Relay, SendOutcome, SendRequest};
use crate::roster::Bot;
use crate::session::{A2aCaller, SessionKey};
use crate::store::{
    AnswerCandidate, AnswerMatch, Delivery, DeliveryState, Escalation, EscalationState, Origin,
    TaskQuery,
};
use crate::timing::now_ms;

/// How long an ended run's outcome may take to reach the record after it was handed over.
const SETTLE_WITHIN: Duration = Duration::from_secs(10);

/// `SendMessage`: the task once the bot answered (or, with `returnImmediately`, at once).
/// `params` is the send request (`SendMessageRequest`): JSON-RPC's `params`, HTTP+JSON's body.
pub(super) async fn send(
    relay: &Relay,
    bot: &Bot,
    params: &Value,
    base: &str,
) -> Result<Value, A2aError> {
    let at_once = params
        .pointer("/configuration/returnImmediately")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let wait = if at_once {
        Duration::ZERO
    } else {
        Duration::from_secs(relay.engine().config().gateway.turn_timeout_seconds)
    };
    match accept(relay, bot, params, wait).await? {
        // Its run asked no question: nothing to look up.
        Accepted::Ended(ended) => Ok(wrapped("task", task(&*ended, None, base))),
        Accepted::Row(d) => {
            let asked = waits_on(relay.engine(), &d).await?;
            Ok(wrapped("task", task(&*d, asked.as_ref(), base)))
        }
    }
}

/// A message accepted: the task it started or answered, as it stands after the wait.
pub(super) enum Accepted {
    /// The task's row.
    Row(Box<Delivery>),
    /// A new task whose run ended here, as the run handed its outcome over once committed,
    /// having made nothing but its text: no file, and no question, so none is looked up.
    /// Reading the row and its pending question back cost a round trip through A2A ~2.6 store
    /// reads (BENCHMARKS.md).
    Ended(Box<Ended>),
}

impl Accepted {
    /// The task's row (read for a task known from its run's hand-over).
    pub(super) async fn into_row(self, engine: &Engine, bot: &Bot) -> Result<Delivery, A2aError> {
        match self {
            Accepted::Row(d) => Ok(*d),
            Accepted::Ended(ended) => task_by_id(engine, bot, &ended.run_id).await,
        }
    }
}

/// A new task's end as its run handed it over ([`Accepted::Ended`]): what its row says.
pub(super) struct Ended {
    run_id: String,
    session: SessionKey,
    idempotency_key: String,
    message: String,
    state: DeliveryState,
    reason: Option<String>,
    reply: Option<String>,
    settled_ms: i64,
}

impl<'a> From<&'a Ended> for Task<'a> {
    fn from(e: &'a Ended) -> Self {
        Task {
            run_id: &e.run_id,
            context: &e.session,
            idempotency_key: Some(&e.idempotency_key),
            message: &e.message,
            state: e.state,
            reason: e.reason.as_deref(),
            reply: e.reply.as_deref(),
            // It made nothing.
            artifacts: &[],
            at_ms: e.settled_ms,
        }
    }
}

/// The message of `params` handed to `bot` as a delivery from the caller, waited on up to
/// `wait`: the task as it stands then.
pub(super) async fn accept(
    relay: &Relay,
    bot: &Bot,
    params: &Value,
    wait: Duration,
) -> Result<Accepted, A2aError> {
    let engine = relay.engine();
    let message = params.get("message").ok_or_else(|| {
        A2aError::invalid("the request has no `message`; send one with its `messageId` and `parts`")
    })?;
    let message_id = message
        .get("messageId")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| A2aError::invalid("message.messageId is missing"))?;
    let (text, files) = read_message(message)?;
    let caller = caller_of(params, message)?;
    if let Some(task_id) = message
        .get("taskId")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    {
        if !files.is_empty() {
            return Err(A2aError::invalid(
                "an answer on a task carries text only; send files without `taskId`, as a new \
                 task in the same `contextId`",
            ));
        }
        let answer = Answer {
            caller: &caller,
            message_id,
            text,
        };
        let answered = answer_task(relay, bot, task_id, answer, wait).await?;
        return Ok(Accepted::Row(Box::new(answered)));
    }
    let account = engine
        .roster()
        .account_of_bot(Platform::Local, bot.id())
        .map(|a| a.id.clone())
        .ok_or_else(|| A2aError::internal("the bot has no local account"))?;
    let session = match message.get("contextId").and_then(Value::as_str) {
        Some(context) if !context.is_empty() => continued(bot.id(), &caller, context)?,
        // Named after the message, so a resend of it without a context finds its task.
        _ => SessionKey::a2a(bot.id(), account.clone(), &caller, &new_context(message_id)),
    };
    let from = Caller::external(&SessionKey::a2a_caller(bot.id(), account, &caller));
    let artifacts = keep_files(engine, &session, files).await?;
    let idempotency_key = format!("a2a:{caller}:{message_id}");
    let request = SendRequest {
        target: session.render(),
        message: text.clone(),
        timeout: wait,
        idempotency_key: Some(idempotency_key.clone()),
        artifacts,
        expect: None,
    };
    let sent = relay::send(relay, &from, request)
        .await
        .map_err(A2aError::internal)?;
    // Handed over by a new task's run, once committed, having made nothing: as its row says.
    let handed = sent
        .report
        .as_ref()
        .filter(|r| r.made_nothing && !sent.deduplicated)
        .and_then(|r| r.settled_ms);
    let ended = |run_id, state, reason, reply, settled_ms| {
        Accepted::Ended(Box::new(Ended {
            run_id,
            session,
            idempotency_key,
            message: text,
            state,
            reason,
            reply,
            settled_ms,
        }))
    };
    let found = match (sent.outcome, handed) {
        (SendOutcome::Answered { run_id, reply, .. }, Some(at)) => {
            return Ok(ended(
                run_id,
                DeliveryState::Delivered,
                None,
                Some(reply),
                at,
            ));
        }
        (
            SendOutcome::Ended {
                run_id,
                state,
                reason,
                ..
            },
            Some(at),
        ) => return Ok(ended(run_id, state, Some(reason), None, at)),
        (outcome @ (SendOutcome::StillWorking { .. } | SendOutcome::Accepted { .. }), _) => {
            engine.store().delivery(outcome.run_id()).await
        }
        // Refused, or its run's outcome read from the row: read once on record.
        (outcome, _) => relay::settled(relay, outcome.run_id(), SETTLE_WITHIN).await,
    };
    found
        .map_err(A2aError::internal)?
        .map(|d| Accepted::Row(Box::new(d)))
        .ok_or_else(|| A2aError::internal("the task was not recorded; send it again"))
}

/// The caller's answer to the question a task waits on.
struct Answer<'a> {
    caller: &'a A2aCaller,
    message_id: &'a str,
    text: String,
}

/// A message on task `task_id`: the answer to the question it waits on (`input-required`),
/// routed back to the bot, whose turn then goes on with the task. The task as it stands after
/// `wait`. The same answer sent again finds the task as it stands; a task that waits on
/// nothing takes no message.
async fn answer_task(
    relay: &Relay,
    bot: &Bot,
    task_id: &str,
    answer: Answer<'_>,
    wait: Duration,
) -> Result<Delivery, A2aError> {
    let engine = relay.engine();
    let d = task_by_id(engine, bot, task_id).await?;
    if d.sender_session.a2a_peer() != Some(answer.caller.as_str()) {
        return Err(A2aError::task_not_found(task_id));
    }
    let asked_in = d.target_session.a2a_task(&d.run_id);
    let speaker = format!("a2a:{}", answer.caller);
    let candidate = AnswerCandidate {
        chat: d.target_session.chat_key(),
        chat_key: asked_in.chat_key(),
        reply_to: None,
        message_id: answer.message_id.to_owned(),
        sent_ms: 0,
        by: speaker.clone(),
        text: answer.text.clone(),
    };
    let taken = engine
        .store()
        .answer_escalation(candidate, now_ms())
        .await
        .map_err(A2aError::internal)?;
    match taken {
        Some(AnswerMatch::First(escalation)) => {
            // Running again before this call returns: the task is read as working, not as the
            // turn that asked left it.
            relay::resume_task(engine, &d.run_id).await;
            let text = format!(
                "Answer from A2A agent '{}' to your question {}: {}",
                answer.caller, escalation.id, answer.text
            );
            let meta = json!({"escalation": escalation.id, "message_id": answer.message_id,
                              "name": speaker});
            route_back(engine, &escalation, &speaker, Origin::Bot, text, meta);
        }
        // Sent again: the answer was taken the first time.
        Some(AnswerMatch::Copy(_)) => {}
        None => {
            return Err(A2aError::new(
                ErrorKind::UnsupportedOperation,
                format!(
                    "task `{task_id}` is not waiting for input ({}); send the message without \
                     `taskId` to start a new task in its `contextId`",
                    d.state.as_str()
                ),
            ));
        }
    }
    let found = if wait.is_zero() {
        engine.store().delivery(&d.run_id).await
    } else {
        relay::settled(relay, &d.run_id, wait).await
    };
    found
        .map_err(A2aError::internal)?
        .ok_or_else(|| A2aError::task_not_found(task_id))
}

/// The question task `d` waits on its caller for (`input-required`): one pending, asked in the
/// task by a turn that has ended.
pub(super) async fn waits_on(
    engine: &Engine,
    d: &Delivery,
) -> Result<Option<Escalation>, A2aError> {
    if d.state != DeliveryState::Delivered {
        return Ok(None);
    }
    let asked_in = d.target_session.a2a_task(&d.run_id);
    engine
        .store()
        .pending_escalation_in(&asked_in)
        .await
        .map_err(A2aError::internal)
}

/// The context a message without one starts: named after its `messageId`.
fn new_context(message_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(message_id.as_bytes());
    digest[..12].iter().map(|b| format!("{b:02x}")).collect()
}

/// The session of an earlier task's `contextId`: only one of this bot's with this caller.
fn continued(bot: &BotId, caller: &A2aCaller, context: &str) -> Result<SessionKey, A2aError> {
    let unknown = || {
        A2aError::invalid(format!(
            "contextId `{context}` is not one of this agent's conversations with `{caller}`; \
             leave it out to start one"
        ))
    };
    let key: SessionKey = context.parse().map_err(|_| unknown())?;
    if key.bot == *bot && key.a2a_peer() == Some(caller.as_str()) {
        Ok(key)
    } else {
        Err(unknown())
    }
}

/// The caller's name: `metadata.caller` on the request or the message, else `client`.
fn caller_of(params: &Value, message: &Value) -> Result<A2aCaller, A2aError> {
    let named = [params, message]
        .iter()
        .find_map(|v| v.pointer("/metadata/caller").and_then(Value::as_str));
    match named {
        None => Ok(A2aCaller::anonymous()),
        Some(name) => A2aCaller::parse(name).ok_or_else(|| {
            A2aError::invalid(format!(
                "metadata.caller `{name}` cannot name a caller: use lowercase letters, digits, \
                 `-` and `_` (at most 64)"
            ))
        }),
    }
}

/// `GetTask`: task `id` as it stands.
pub(super) async fn get(
    engine: &Engine,
    bot: &Bot,
    id: &str,
    base: &str,
) -> Result<Value, A2aError> {
    let d = task_by_id(engine, bot, id).await?;
    let asked = waits_on(engine, &d).await?;
    Ok(task(&d, asked.as_ref(), base))
}

/// `CancelTask`: the bot's turn is stopped and nothing of it is posted; a task waiting on its
/// caller has its question withdrawn; a task already ended cannot be canceled.
pub(super) async fn cancel(
    relay: &Relay,
    bot: &Bot,
    id: &str,
    base: &str,
) -> Result<Value, A2aError> {
    let engine = relay.engine();
    let mut d = task_by_id(engine, bot, id).await?;
    if let Some(asked) = waits_on(engine, &d).await? {
        let by = format!("a2a:{}", d.sender_session.a2a_peer().unwrap_or_default());
        let withdrawn = engine
            .store()
            .resolve_escalation(
                &asked.id,
                EscalationState::Failed,
                Some("the A2A caller canceled the task"),
                &by,
                now_ms(),
            )
            .await
            .map_err(A2aError::internal)?;
        // Open again only to be canceled; answered meanwhile, it runs on its answer.
        d = match withdrawn {
            Some(_) => relay::resume_task(engine, &d.run_id).await.unwrap_or(d),
            None => task_by_id(engine, bot, &d.run_id).await?,
        };
    }
    if d.state.is_settled() {
        return Err(A2aError::new(
            ErrorKind::TaskNotCancelable,
            format!("task `{}` already ended ({})", d.run_id, d.state.as_str()),
        ));
    }
    let canceled = relay::cancel(relay, &d.run_id)
        .await
        .map_err(A2aError::internal)?
        .ok_or_else(|| A2aError::task_not_found(&d.run_id))?;
    Ok(task(&canceled, None, base))
}

/// Task `id` of `bot`.
pub(super) async fn task_by_id(engine: &Engine, bot: &Bot, id: &str) -> Result<Delivery, A2aError> {
    let found = engine
        .store()
        .delivery(id)
        .await
        .map_err(A2aError::internal)?;
    found
        .filter(|d| is_task_of(d, bot.id()))
        .ok_or_else(|| A2aError::task_not_found(id))
}

fn is_task_of(d: &Delivery, bot: &BotId) -> bool {
    d.target == *bot && d.sender_session.a2a_peer().is_some()
}

/// `ListTasks`: this agent's tasks, newest first, in `contextId` when given, a page at a
/// time (`pages.rs`).
pub(super) async fn list(
    engine: &Engine,
    bot: &Bot,
    params: &Value,
    base: &str,
) -> Result<Value, A2aError> {
    let session = match params.get("contextId").and_then(Value::as_str) {
        Some(context) if !context.is_empty() => Some(
            context
                .parse::<SessionKey>()
                .map_err(|_| A2aError::invalid(format!("contextId `{context}` is not one")))?,
        ),
        _ => None,
    };
    let bad = |err: pages::PageError| A2aError::invalid(err.to_string());
    let limit = pages::page_size(params).map_err(bad)?;
    let page = engine
        .store()
        .a2a_tasks(TaskQuery {
            bot: bot.id().clone(),
            session,
            after: pages::page_start(params).map_err(bad)?,
            limit,
        })
        .await
        .map_err(A2aError::internal)?;
    let mut tasks: Vec<Value> = Vec::with_capacity(page.tasks.len());
    for d in &page.tasks {
        let asked = waits_on(engine, d).await?;
        tasks.push(task(d, asked.as_ref(), base));
    }
    Ok(json!({
        "tasks": tasks,
        "nextPageToken": pages::next_page_token(page.next.as_ref()),
        "pageSize": limit,
        "totalSize": page.total,
    }))
}
