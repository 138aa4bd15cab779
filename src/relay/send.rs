//! `sessions_send` from the sender's side: resolve the target, ask the guards, find or write the
//! delivery, start the target's run, and wait for it (or not).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::home::{Home, home_of};
use super::{a2a_out, moved, run};

use super::{Finished, HandAt, Listening, Relay, RunResult, Waited};
use crate::bot_id::BotId;
use crate::engine::{Caller, Engine};
use crate::guards::{SendAttempt, SendRefusal};
use crate::session::SessionKey;
use crate::store::{
    Artifact, Begun, Delivery, DeliveryChange, DeliveryState, NewDelivery, Notify, SendMode,
    StoreError, Topic,
};
use crate::timing::now_ms;
use crate::trace::{Span, SpanKind, attr};

/// Without an idempotency key, the same text to the same target within this window is the same
/// request.
const SAME_TEXT_WINDOW_MS: i64 = 10 * 60 * 1000;

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
    /// Artifacts handed to the target with the message.
    pub artifacts: Vec<String>,
    /// The JSON Schema the target's answer must match.
    pub expect: Option<serde_json::Value>,
}

/// What became of a `sessions_send`. The tool renders it as the result the model reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The outcome.
    pub outcome: SendOutcome,
    /// The request repeated an earlier one (same idempotency key, or the same text within 10
    /// minutes): this is the earlier run's outcome, and nothing ran twice.
    pub deduplicated: bool,
    /// What the settled run made and reported; `None` when the outcome is not a settled run's
    /// (refused now, accepted, still working). Taken from the settled row the outcome was read
    /// from (or handed over by the run), not read again.
    pub report: Option<RunReport>,
}

/// What a settled run left its sender beside its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    /// The artifacts it made, then those it attached to its reply.
    pub artifacts: Vec<Artifact>,
    /// Its report (`output`, `errors`, `usage`, `tool_calls`), when it got as far as one.
    pub report: Option<Value>,
    /// When it settled (its row's `finished_ms`).
    pub settled_ms: Option<i64>,
    /// Handed over by the run itself, here, having made nothing but its text: it called no
    /// tool, so it made no artifact, reported no progress and asked no question. False when the
    /// outcome was read from the row.
    pub made_nothing: bool,
}

impl From<Delivery> for RunReport {
    fn from(d: Delivery) -> Self {
        RunReport {
            artifacts: d.artifacts_out,
            report: d.result,
            settled_ms: d.finished_ms,
            made_nothing: false,
        }
    }
}

/// The outcome of one send, as far as the sender learns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendOutcome {
    /// The target answered in time; `reply` is empty when it chose silence.
    Answered {
        /// The target bot.
        bot: BotId,
        /// The delivery's run id.
        run_id: String,
        /// What it said.
        reply: String,
        /// The model that said it.
        model: String,
        /// From the call to the answer.
        elapsed: Duration,
    },
    /// The target's run ended without an answer (`failed`, `timeout`).
    Ended {
        /// The target bot.
        bot: BotId,
        /// The delivery's run id.
        run_id: String,
        /// How it ended.
        state: DeliveryState,
        /// Why.
        reason: String,
    },
    /// The guards refused it now; nothing ran.
    Refused {
        /// The target bot.
        bot: BotId,
        /// The refused delivery's run id (on record, refused).
        run_id: String,
        /// Which rule or budget.
        refusal: SendRefusal,
    },
    /// An earlier send this one repeats was refused.
    RefusedEarlier {
        /// The target bot.
        bot: BotId,
        /// The earlier delivery's run id.
        run_id: String,
        /// The refusal as recorded.
        reason: Option<String>,
    },
    /// The sender's wait ran out; the run goes on and its reply will be pushed to the sender's
    /// session.
    StillWorking {
        /// The target bot.
        bot: BotId,
        /// The delivery's run id.
        run_id: String,
    },
    /// Fire-and-forget: the run started (or, `in_flight`, an earlier one is still running).
    Accepted {
        /// The target bot.
        bot: BotId,
        /// The delivery's run id.
        run_id: String,
        /// An earlier run of the same request is still working.
        in_flight: bool,
    },
}

impl SendOutcome {
    /// The outcome in a word, as the `sessions_send` span tells it.
    fn name(&self) -> &'static str {
        match self {
            SendOutcome::Answered { .. } => "answered",
            SendOutcome::Ended { .. } => "ended",
            SendOutcome::Refused { .. } => "refused",
            SendOutcome::RefusedEarlier { .. } => "refused_earlier",
            SendOutcome::StillWorking { .. } => "still_working",
            SendOutcome::Accepted { .. } => "accepted",
        }
    }

    /// The run the outcome is of.
    pub fn run_id(&self) -> &str {
        match self {
            SendOutcome::Answered { run_id, .. }
            | SendOutcome::Ended { run_id, .. }
            | SendOutcome::Refused { run_id, .. }
            | SendOutcome::RefusedEarlier { run_id, .. }
            | SendOutcome::StillWorking { run_id, .. }
            | SendOutcome::Accepted { run_id, .. } => run_id,
        }
    }
}

/// Why a send could not be made at all.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The target names no bot or session of a configured bot.
    #[error("no bot or session `{name}`; known bots: {} (bots_list shows them)", known.join(", "))]
    UnknownTarget {
        /// As given.
        name: String,
        /// The configured bots.
        known: Vec<String>,
    },
    /// `a2a:<name>` names no `[[a2a.peers]]`.
    #[error("no A2A peer `{name}`; known peers: {} (configured under [[a2a.peers]])", known.join(", "))]
    UnknownPeer {
        /// As given.
        name: String,
        /// The configured peers.
        known: Vec<String>,
    },
    /// The store could not record the delivery.
    #[error("the message could not be recorded, so it was not sent: {0}")]
    NotRecorded(#[from] StoreError),
}

/// What a `sessions_send` span is named for: the target bot (or `a2a:<peer>`), not a whole
/// session key (an A2A caller's send names its conversation's), so that span names stay few.
/// The full target is the span's `baton.target`.
fn target_name(target: &str) -> String {
    match target.parse::<SessionKey>() {
        Ok(session) => session.bot.to_string(),
        Err(_) => target.to_owned(),
    }
}

/// Send `request` as `caller` and say what became of it, under a `sessions_send` span whose
/// `traceparent` the delivery keeps: the target's turn is its child wherever it runs.
pub async fn send(relay: &Relay, caller: &Caller, request: SendRequest) -> Result<Sent, SendError> {
    let span = Span::start(
        || format!("sessions_send {}", target_name(&request.target)),
        SpanKind::Producer,
        || {
            vec![
                attr("baton.bot", caller.bot.as_str().to_owned()),
                attr("baton.target", request.target.clone()),
            ]
        },
    );
    let sent = send_as(relay, caller, request, span.traceparent()).await;
    match &sent {
        Ok(sent) => span.set(|| {
            vec![
                attr("baton.send.outcome", sent.outcome.name()),
                attr("baton.send.deduplicated", sent.deduplicated),
            ]
        }),
        Err(err) => span.failed(|| err.to_string()),
    }
    sent
}

async fn send_as(
    relay: &Relay,
    caller: &Caller,
    request: SendRequest,
    trace_parent: Option<String>,
) -> Result<Sent, SendError> {
    let engine = relay.engine();
    let started = Instant::now();
    let target = resolve(engine, caller, &request.target)?;
    let new = NewDelivery {
        run_id: format!("run_{}", uuid::Uuid::new_v4().simple()),
        sender: caller.bot.clone(),
        sender_session: caller.session.clone(),
        target: target.bot.clone(),
        target_session: target.clone(),
        message: request.message,
        idempotency_key: request.idempotency_key,
        depth: caller.depth + 1,
        origin: caller.origin.clone(),
        trigger: caller.trigger.clone(),
        trace_parent,
        mode: if request.timeout.is_zero() {
            SendMode::Fire
        } else {
            SendMode::Wait
        },
        artifacts_in: request.artifacts,
        expect: request.expect,
        created_ms: now_ms(),
        waiter: (!request.timeout.is_zero()).then(|| engine.instance().to_owned()),
    };
    let attempt = SendAttempt {
        sender: &caller.bot,
        target: &target.bot,
        depth: new.depth,
        passive_to: caller.passive_to.as_ref(),
        from_outside: caller.session.a2a_peer().is_some(),
    };
    if let Err(refusal) = relay.sends().check_rules(&attempt) {
        return Ok(fresh(refuse_new(engine, new, refusal).await));
    }
    let since = new.created_ms - SAME_TEXT_WINDOW_MS;
    // A peer outside baton has no home instance: its call is made here.
    let home = if target.a2a_out_peer().is_some() {
        Home::Here
    } else {
        home_of(engine, &target.bot).await
    };
    let runner = (home == Home::Here).then(|| engine.instance());
    // Taken as soon as the writer ran it: the run's start is queued after it (see
    // `Store::delivery_begin_early`).
    let (begun, committed) = engine
        .store()
        .delivery_begin_early(new, since, runner)
        .await?;
    let delivery = match begun {
        Begun::New(delivery) => {
            moved(engine, &delivery, DeliveryState::Queued, None, None);
            delivery
        }
        Begun::Existing(earlier) => {
            let (outcome, report) = follow(relay, earlier, request.timeout, started).await;
            return Ok(Sent {
                outcome,
                deduplicated: true,
                report,
            });
        }
    };
    if let Err(refusal) = relay.sends().charge(&caller.bot, &target.bot) {
        count_refusal(engine, &delivery.sender, delivery.origin.as_ref(), refusal);
        let change = DeliveryChange {
            reason: Some(refusal.as_str().to_owned()),
            ..DeliveryChange::to(&delivery.run_id, DeliveryState::Refused, now_ms())
        };
        if let Err(err) = engine.store().delivery_settle(change).await {
            tracing::error!(%err, "could not record a refused send");
        }
        // Answered in the tool call: nobody waits.
        waited(relay, &delivery).await;
        let reason = Some(refusal.as_str());
        moved(engine, &delivery, DeliveryState::Refused, reason, None);
        return Ok(fresh(SendOutcome::Refused {
            bot: delivery.target,
            run_id: delivery.run_id,
            refusal,
        }));
    }
    // Listening before the run can start: its settle cannot come unheard, so the wait does
    // not read the row it just wrote. A run here hands its outcome over too; to a sender
    // outside baton (an A2A caller, an MCP client), which tells it outside the process at
    // once, only once its settle is committed.
    let hand_at = if caller.session.is_external() {
        HandAt::Commit
    } else {
        HandAt::Run
    };
    let listening = (delivery.mode == SendMode::Wait).then(|| Listening::SinceStart {
        notices: engine.store().subscribe(),
        handed: (home == Home::Here).then(|| relay.waiters().expect(&delivery.run_id, hand_at)),
    });
    match home {
        Home::Here => start(relay, &delivery),
        Home::There(instance) => hand_over(relay, &delivery, &instance).await,
    }
    // Committed before anything the run records; a commit that failed undid the row.
    committed.answer().await?;
    let (outcome, report) = match listening {
        None => (accepted(&delivery, false), None),
        Some(listening) => wait(relay, &delivery, request.timeout, started, listening).await,
    };
    Ok(Sent {
        outcome,
        deduplicated: false,
        report,
    })
}

/// An outcome learned now, not from a settled row.
fn fresh(outcome: SendOutcome) -> Sent {
    Sent {
        outcome,
        deduplicated: false,
        report: None,
    }
}

/// Start the target's run here, in the background (claimed by this instance already). The run
/// holds a whole turn, over 9 KB: boxed, it is copied once, where tokio's spawn would move it
/// by value through several calls (BENCHMARKS.md, issue 23).
pub(super) fn start(relay: &Relay, delivery: &Delivery) {
    let task = run::run(relay.clone(), delivery.clone());
    relay.engine().tasks().spawn(Box::pin(task));
}

/// Leave the run to the target's home `instance`: announced, it claims the delivery and runs
/// it. Should the announcement fail, the run is claimed and started here instead, so it is
/// never left to nobody.
async fn hand_over(relay: &Relay, delivery: &Delivery, instance: &str) {
    let engine = relay.engine();
    let run_id = &delivery.run_id;
    let Err(err) = engine.store().announce(Topic::Handed, run_id).await else {
        tracing::debug!(run = %run_id, home = instance, "delivery handed to the target's home instance");
        return;
    };
    tracing::warn!(run = %run_id, home = instance, %err, "could not hand the delivery to the target's home instance; running it here");
    match engine
        .store()
        .delivery_claim(run_id, None, Some(engine.instance()))
        .await
    {
        Ok(true) => start(relay, delivery),
        Ok(false) => {}
        Err(err) => {
            tracing::error!(run = %run_id, %err, "could not claim the delivery; the target's home runs it when it next reads the store");
        }
    }
}

/// The target's session: a session key as given, the target bot's backchannel for `caller`, or
/// for `a2a:<peer>` the record of `caller`'s conversation with that peer. The model's text is
/// read here, once.
fn resolve(engine: &Engine, caller: &Caller, target: &str) -> Result<SessionKey, SendError> {
    if let Some(name) = target.strip_prefix("a2a:") {
        let config = engine.config();
        let peer = a2a_out::peer(config, name).and_then(|p| p.id.parse::<BotId>().ok());
        return match peer {
            Some(peer) => Ok(SessionKey::a2a_out(&peer, &caller.bot)),
            None => Err(SendError::UnknownPeer {
                name: name.to_owned(),
                known: config.a2a.peers.iter().map(|p| p.id.clone()).collect(),
            }),
        };
    }
    let roster = engine.roster();
    let key = match target.parse::<SessionKey>() {
        Ok(key) => key,
        Err(_) => {
            let bot: Option<BotId> = target.parse().ok();
            let Some(account) = bot
                .as_ref()
                .and_then(|bot| roster.account_of_bot(baton_contract::Platform::Local, bot))
            else {
                return Err(unknown_bot(engine, target));
            };
            SessionKey::backchannel(account.bot.id(), account.id.clone(), &caller.bot)
        }
    };
    if roster.bot(&key.bot).is_none() {
        return Err(unknown_bot(engine, key.bot.as_str()));
    }
    Ok(key)
}

fn unknown_bot(engine: &Engine, name: &str) -> SendError {
    SendError::UnknownTarget {
        name: name.to_owned(),
        known: engine
            .roster()
            .bots()
            .iter()
            .map(|b| b.id().to_string())
            .collect(),
    }
}

/// A send the rules refused before anything ran: kept on record, answered with the reason.
async fn refuse_new(engine: &Engine, new: NewDelivery, refusal: SendRefusal) -> SendOutcome {
    tracing::info!(sender = %new.sender, target = %new.target, reason = refusal.as_str(), "sessions_send refused");
    count_refusal(engine, &new.sender, new.origin.as_ref(), refusal);
    let reason = Some(refusal.as_str());
    moved(engine, &new, DeliveryState::Refused, reason, None);
    let bot = new.target.clone();
    let run_id = new.run_id.clone();
    if let Err(err) = engine.store().delivery_refused(new, refusal.as_str()).await {
        tracing::error!(%err, "could not record a refused send");
    }
    SendOutcome::Refused {
        bot,
        run_id,
        refusal,
    }
}

/// Keep a refusal for `/baton status` and `limits`, under the chat the work started from.
fn count_refusal(
    engine: &Engine,
    sender: &BotId,
    origin: Option<&SessionKey>,
    refusal: SendRefusal,
) {
    let chat = origin.map(|o| baton_contract::ChatKey::new(o.platform, &o.chat, None));
    engine.refused("sessions_send", refusal.as_str(), chat, sender);
}

/// An outcome, and what the settled run left beside it when it settled.
type Learned = (SendOutcome, Option<RunReport>);

/// A retry of an earlier request: its outcome, or a wait for it; never a second run.
async fn follow(relay: &Relay, earlier: Delivery, timeout: Duration, started: Instant) -> Learned {
    let engine = relay.engine();
    let me = engine.instance();
    let mut earlier = earlier;
    // The sender's turn run again after the instance it waited on died: it takes the wait
    // over, unless the outcome is (or is to be) pushed to its session instead, which it is
    // told. Either way the session gets the outcome once.
    if let Some(gone) = earlier
        .waiter
        .clone()
        .filter(|w| w != me && !timeout.is_zero())
    {
        match engine
            .store()
            .delivery_take_wait(&earlier.run_id, &gone, Some(me))
            .await
        {
            Ok(Some(taken)) => earlier = taken,
            Ok(None) => return (accepted(&earlier, !earlier.state.is_settled()), None),
            Err(err) => {
                tracing::error!(run = %earlier.run_id, %err, "could not take over the wait on a delivery");
                return (still_working(&earlier), None);
            }
        }
    } else if earlier.mode == SendMode::Wait && earlier.notify != Notify::None {
        return (accepted(&earlier, !earlier.state.is_settled()), None);
    }
    if earlier.state.is_settled() {
        waited(relay, &earlier).await;
        (stored(&earlier, started), Some(earlier.into()))
    } else if timeout.is_zero() {
        (accepted(&earlier, true), None)
    } else {
        wait(relay, &earlier, timeout, started, Listening::FromNow).await
    }
}

async fn wait(
    relay: &Relay,
    d: &Delivery,
    timeout: Duration,
    started: Instant,
    listening: Listening,
) -> Learned {
    let waited_for = relay
        .waiters()
        .wait(relay.engine().store(), &d.run_id, timeout, listening)
        .await;
    if matches!(waited_for, Ok(Waited::Got(_) | Waited::Handed(_))) {
        waited(relay, d).await;
    }
    match waited_for {
        Ok(Waited::Got(row)) => (stored(&row, started), Some(RunReport::from(*row))),
        Ok(Waited::Handed(Finished {
            result,
            report,
            settled_ms,
        })) => {
            // A run that made nothing: no artifacts.
            let report = RunReport {
                artifacts: Vec::new(),
                report: Some(report),
                settled_ms: Some(settled_ms),
                made_nothing: true,
            };
            (answered(d, result, started), Some(report))
        }
        Ok(Waited::GaveUp) => (still_working(d), None),
        Err(err) => {
            tracing::error!(run = %d.run_id, %err, "could not follow the delivery; the sender is told it is still working");
            (still_working(d), None)
        }
    }
}

/// The sender got `d`'s outcome in its tool call: nobody waits on this instance any more, so
/// none pushes it should this instance die now (its turn, run again, finds it settled). Only
/// queued here: the writer commits it no later than what the turn writes next.
async fn waited(relay: &Relay, d: &Delivery) {
    let engine = relay.engine();
    if let Err(err) = engine
        .store()
        .delivery_waited(&d.run_id, engine.instance())
        .await
    {
        tracing::warn!(run = %d.run_id, %err, "could not record that the sender got its outcome; should this instance die before its turn ends, the outcome may reach the session twice");
    }
}

fn answered(d: &Delivery, result: RunResult, started: Instant) -> SendOutcome {
    match result {
        RunResult::Answered { reply, model } => SendOutcome::Answered {
            bot: d.target.clone(),
            run_id: d.run_id.clone(),
            reply,
            model,
            elapsed: started.elapsed(),
        },
        RunResult::Failed { state, reason } => SendOutcome::Ended {
            bot: d.target.clone(),
            run_id: d.run_id.clone(),
            state,
            reason,
        },
    }
}

/// The outcome a stored delivery stands for.
fn stored(d: &Delivery, started: Instant) -> SendOutcome {
    match d.state {
        DeliveryState::Delivered => {
            let result = RunResult::Answered {
                reply: d.reply.clone().unwrap_or_default(),
                model: d.model.clone().unwrap_or_default(),
            };
            answered(d, result, started)
        }
        DeliveryState::Refused => SendOutcome::RefusedEarlier {
            bot: d.target.clone(),
            run_id: d.run_id.clone(),
            reason: d.reason.clone(),
        },
        DeliveryState::Queued | DeliveryState::Running => still_working(d),
        state => answered(
            d,
            RunResult::Failed {
                state,
                reason: d.reason.clone().unwrap_or_default(),
            },
            started,
        ),
    }
}

fn still_working(d: &Delivery) -> SendOutcome {
    SendOutcome::StillWorking {
        bot: d.target.clone(),
        run_id: d.run_id.clone(),
    }
}

fn accepted(d: &Delivery, in_flight: bool) -> SendOutcome {
    SendOutcome::Accepted {
        bot: d.target.clone(),
        run_id: d.run_id.clone(),
        in_flight,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::testing::{echo_config, parts};
    use crate::store::DeliveryQuery;

    #[test]
    fn a_send_span_is_named_for_its_target_bot_or_peer_never_a_session() {
        assert_eq!(target_name("caid"), "caid");
        assert_eq!(target_name("a2a:peer"), "a2a:peer");
        assert_eq!(target_name("bot:caid:local:caid:a2a-in:client:c1"), "caid");
    }

    fn caller(bot: &str, depth: u32, passive_to: Option<&str>) -> Caller {
        let key: SessionKey = format!("bot:{bot}:local:{bot}:room").parse().unwrap();
        Caller {
            depth,
            passive_to: passive_to.map(|p| p.parse().unwrap()),
            ..Caller::from_chat(&key)
        }
    }

    fn request(target: &str, message: &str, timeout: Duration, key: Option<&str>) -> SendRequest {
        SendRequest {
            target: target.into(),
            message: message.into(),
            timeout,
            idempotency_key: key.map(str::to_owned),
            artifacts: Vec::new(),
            expect: None,
        }
    }

    async fn refused_on_record(engine: &Engine) -> Vec<(String, Option<String>)> {
        let rows = engine
            .store()
            .deliveries(DeliveryQuery::default())
            .await
            .unwrap();
        rows.into_iter()
            .filter(|d| d.state == DeliveryState::Refused)
            .map(|d| (d.target.to_string(), d.reason))
            .collect()
    }

    #[tokio::test]
    async fn an_answered_send_returns_the_reply_and_an_unknown_target_names_the_known_bots() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let relay = &gw.relay;
        let wait = Duration::from_secs(10);
        let sent = send(
            relay,
            &caller("alpha", 1, None),
            request("beta", "ping", wait, None),
        )
        .await
        .unwrap();
        let SendOutcome::Answered { bot, reply, .. } = &sent.outcome else {
            panic!("not answered: {sent:?}");
        };
        assert_eq!(
            (bot.as_str(), reply.as_str(), sent.deduplicated),
            ("beta", "ping", false)
        );

        let err = send(
            relay,
            &caller("alpha", 1, None),
            request("gamma", "hi", wait, None),
        )
        .await
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no bot or session `gamma`; known bots: alpha, beta (bots_list shows them)"
        );
    }

    /// The rules refuse before anything runs, and every refusal is on record with its reason.
    #[tokio::test]
    async fn the_guards_refuse_deep_passive_and_self_sends_on_record() {
        let config = echo_config(&["alpha", "beta"], "\n[limits]\nmax_depth = 2\n");
        let gw = parts(&config).await;
        let relay = &gw.relay;
        let fire = Duration::ZERO;
        let cases = [
            (caller("alpha", 2, None), "beta", SendRefusal::TooDeep),
            (
                caller("alpha", 1, Some("beta")),
                "beta",
                SendRefusal::PassiveReply,
            ),
            (caller("alpha", 1, None), "alpha", SendRefusal::SelfSend),
        ];
        for (who, target, why) in cases {
            let sent = send(relay, &who, request(target, "hi", fire, None))
                .await
                .unwrap();
            let SendOutcome::Refused { bot, refusal, .. } = &sent.outcome else {
                panic!("not refused: {sent:?}");
            };
            assert_eq!((bot.as_str(), *refusal), (target, why), "{why:?}");
        }
        let mut on_record = refused_on_record(relay.engine()).await;
        on_record.sort();
        let reason = |r: SendRefusal| Some(r.as_str().to_owned());
        assert_eq!(
            on_record,
            [
                ("alpha".to_owned(), reason(SendRefusal::SelfSend)),
                ("beta".to_owned(), reason(SendRefusal::TooDeep)),
                ("beta".to_owned(), reason(SendRefusal::PassiveReply)),
            ]
        );
    }

    /// A retry with the same idempotency key (or the same text within 10 minutes) is the same
    /// request: it gets the first run's outcome, and the target works once.
    #[tokio::test]
    async fn a_retry_is_deduplicated_and_runs_nothing_twice() {
        let gw = parts(&echo_config(&["alpha", "beta"], "")).await;
        let relay = &gw.relay;
        let wait = Duration::from_secs(10);
        let me = caller("alpha", 1, None);
        let ask = |text: &'static str, key: Option<&'static str>| {
            send(relay, &me, request("beta", text, wait, key))
        };
        let keyed = ask("build it", Some("k1")).await.unwrap();
        let same_key = ask("other words", Some("k1")).await.unwrap();
        let first = ask("test it", None).await.unwrap();
        let same_text = ask("test it", None).await.unwrap();
        let run = |sent: &Sent| match &sent.outcome {
            SendOutcome::Answered { run_id, reply, .. } => (run_id.clone(), reply.clone()),
            other => panic!("not answered: {other:?}"),
        };
        assert!(!keyed.deduplicated && !first.deduplicated);
        assert!(same_key.deduplicated && same_text.deduplicated);
        assert_eq!(run(&same_key), run(&keyed));
        assert_eq!(run(&same_text), run(&first));
        assert_ne!(run(&keyed).0, run(&first).0);
        let rows = relay
            .engine()
            .store()
            .deliveries(DeliveryQuery::default())
            .await
            .unwrap();
        assert_eq!(rows.len(), 2, "one delivery, one run each: {rows:?}");
    }
}
