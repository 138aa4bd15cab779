//! `sessions_send` from the sender's side: resolve the target, ask the guards, find or write the
//! delivery, start the target's run, and wait for it (or not).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::run;

use crate::engine::{Caller, RunResult, Services, Waited};
use crate::guards::{SendAttempt, SendRefusal};
use crate::mirror::now_ms;
use crate::session::SessionKey;
use crate::store::{Begun, Delivery, DeliveryChange, DeliveryState, NewDelivery, SendMode};

/// Without an idempotency key, the same text to the same target within this window is the same
/// request (SPEC.md 5.1).
const SAME_TEXT_WINDOW_MS: i64 = 10 * 60 * 1000;

/// Told to a sender whose wait ran out, so a model does not "helpfully" send again.
const STILL_WORKING: &str = "The target is still working on it. Do not send it again: that \
    would make it work twice. Its reply will be delivered to your session when it is ready.";

/// One `sessions_send` call.
#[derive(Debug, Clone)]
pub struct SendRequest {
    /// A bot id (its backchannel session for the sender) or a session key.
    pub target: String,
    /// The message.
    pub message: String,
    /// How long to wait for the reply; zero = fire-and-forget.
    pub timeout: Duration,
    /// The sender's key for "the same request".
    pub idempotency_key: Option<String>,
}

/// Send `request` as `caller` and return the tool result (SPEC.md 5.1 shapes).
pub async fn send(shared: &Arc<Services>, caller: &Caller, request: SendRequest) -> Value {
    let started = Instant::now();
    let target = match resolve(shared, caller, &request.target) {
        Ok(target) => target,
        Err(result) => return result,
    };
    let new = NewDelivery {
        run_id: format!("run_{}", uuid::Uuid::new_v4().simple()),
        sender: caller.bot.clone(),
        sender_session: caller.session.clone(),
        target: target.bot.clone(),
        target_session: target.render(),
        message: request.message,
        idempotency_key: request.idempotency_key,
        depth: caller.depth + 1,
        origin: caller.origin.as_ref().map(SessionKey::render),
        mode: if request.timeout.is_zero() {
            SendMode::Fire
        } else {
            SendMode::Wait
        },
        created_ms: now_ms(),
    };
    let attempt = SendAttempt {
        sender: &caller.bot,
        target: &target.bot,
        depth: new.depth,
        passive_to: caller.passive_to.as_deref(),
    };
    if let Err(refusal) = shared.guards().sends.check_rules(&attempt) {
        return refuse_new(shared, new, refusal).await;
    }
    let since = new.created_ms - SAME_TEXT_WINDOW_MS;
    let delivery = match shared.store().delivery_begin(new, since).await {
        Ok(Begun::New(delivery)) => delivery,
        Ok(Begun::Existing(earlier)) => {
            return follow(shared, &earlier, request.timeout, started).await;
        }
        Err(err) => {
            return crate::tools::error(format!(
                "the message could not be recorded, so it was not sent: {err}"
            ));
        }
    };
    if let Err(refusal) = shared.guards().sends.charge(&caller.bot, &target.bot) {
        count_refusal(shared, delivery.origin.as_deref(), refusal);
        let change = DeliveryChange {
            reason: Some(refusal.as_str().to_owned()),
            ..DeliveryChange::to(&delivery.run_id, DeliveryState::Refused, now_ms())
        };
        if let Err(err) = shared.store().delivery_settle(change).await {
            tracing::error!(%err, "could not record a refused send");
        }
        return refused(refusal, &delivery.target);
    }
    start(shared, &delivery);
    match delivery.mode {
        SendMode::Fire => accepted(&delivery, false),
        SendMode::Wait => wait(shared, &delivery, request.timeout, started).await,
    }
}

/// Start the target's run in the background; waiters find it in the relay.
pub(super) fn start(shared: &Arc<Services>, delivery: &Delivery) {
    shared.waiters().open(&delivery.run_id);
    let task = run::run(Arc::clone(shared), delivery.clone());
    shared.tasks().spawn(task);
}

/// The target's session: a session key as given, or the target bot's backchannel for `caller`.
fn resolve(shared: &Services, caller: &Caller, target: &str) -> Result<SessionKey, Value> {
    let roster = shared.roster();
    let key = match SessionKey::parse(target) {
        Some(key) => key,
        None => {
            let Some(account) = roster.account_of_bot(baton_contract::Platform::Local, target)
            else {
                return Err(unknown_bot(shared, target));
            };
            SessionKey::backchannel(target, account.id.clone(), &caller.bot)
        }
    };
    if roster.bot(&key.bot).is_none() {
        return Err(unknown_bot(shared, &key.bot));
    }
    Ok(key)
}

fn unknown_bot(shared: &Services, name: &str) -> Value {
    let known: Vec<&str> = shared.roster().bots().iter().map(|b| b.id()).collect();
    crate::tools::error(format!(
        "no bot or session `{name}`; known bots: {} (bots_list shows them)",
        known.join(", ")
    ))
}

/// A send the rules refused before anything ran: kept on record, answered with the reason.
async fn refuse_new(shared: &Services, new: NewDelivery, refusal: SendRefusal) -> Value {
    tracing::info!(sender = %new.sender, target = %new.target, reason = refusal.as_str(), "sessions_send refused");
    count_refusal(shared, new.origin.as_deref(), refusal);
    let target = new.target.clone();
    if let Err(err) = shared.store().delivery_refused(new, refusal.as_str()).await {
        tracing::error!(%err, "could not record a refused send");
    }
    refused(refusal, &target)
}

/// Keep a refusal for `/baton status` and `limits`, under the chat the work started from.
fn count_refusal(shared: &Services, origin: Option<&str>, refusal: SendRefusal) {
    let chat = origin
        .and_then(SessionKey::parse)
        .map(|o| crate::session::chat_key(o.platform, &o.chat, None));
    shared
        .metrics()
        .refused("sessions_send", refusal.as_str(), chat);
}

/// A retry of an earlier request: its outcome, or a wait for it; never a second run.
async fn follow(
    shared: &Services,
    earlier: &Delivery,
    timeout: Duration,
    started: Instant,
) -> Value {
    let mut result = if earlier.state.is_settled() {
        stored(earlier, started)
    } else if timeout.is_zero() {
        accepted(earlier, true)
    } else {
        wait(shared, earlier, timeout, started).await
    };
    result["deduplicated"] = json!(true);
    result
}

async fn wait(shared: &Services, d: &Delivery, timeout: Duration, started: Instant) -> Value {
    match shared.waiters().wait(&d.run_id, timeout).await {
        Waited::Got(result) => answered(d, &result, started),
        Waited::GaveUp => still_working(d),
        Waited::Unknown => match shared.store().delivery(&d.run_id).await {
            Ok(Some(row)) if row.state.is_settled() => stored(&row, started),
            _ => still_working(d),
        },
    }
}

fn answered(d: &Delivery, result: &RunResult, started: Instant) -> Value {
    match result {
        RunResult::Answered { reply, model } => {
            let mut value = json!({
                "status": "ok",
                "reply": reply,
                "bot": d.target,
                "run_id": d.run_id,
                "model": model,
                "elapsed_ms": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            });
            if reply.is_empty() {
                value["silent"] = json!(true);
            }
            value
        }
        RunResult::Failed { state, reason } => json!({
            "status": state.as_str(),
            "bot": d.target,
            "run_id": d.run_id,
            "error": reason,
        }),
    }
}

/// The result a stored delivery stands for.
fn stored(d: &Delivery, started: Instant) -> Value {
    match d.state {
        DeliveryState::Delivered => {
            let result = RunResult::Answered {
                reply: d.reply.clone().unwrap_or_default(),
                model: d.model.clone().unwrap_or_default(),
            };
            answered(d, &result, started)
        }
        DeliveryState::Refused => json!({
            "status": "refused",
            "bot": d.target,
            "run_id": d.run_id,
            "reason": d.reason,
        }),
        DeliveryState::Queued | DeliveryState::Running => still_working(d),
        state => answered(
            d,
            &RunResult::Failed {
                state,
                reason: d.reason.clone().unwrap_or_default(),
            },
            started,
        ),
    }
}

fn still_working(d: &Delivery) -> Value {
    json!({
        "status": "timeout",
        "in_flight": true,
        "bot": d.target,
        "run_id": d.run_id,
        "warning": STILL_WORKING,
    })
}

fn accepted(d: &Delivery, in_flight: bool) -> Value {
    let mut value = json!({"status": "accepted", "bot": d.target, "run_id": d.run_id});
    if in_flight {
        value["in_flight"] = json!(true);
    }
    value
}

fn refused(refusal: SendRefusal, target: &str) -> Value {
    json!({
        "status": "refused",
        "reason": refusal.as_str(),
        "message": refusal.explain(),
        "bot": target,
    })
}
