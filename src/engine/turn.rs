//! One turn, whatever caused it (a chat message, another bot's send, a late reply, a schedule,
//! a chain): record what woke the bot, run its backend with its tools under a time limit, and
//! decide the outcome (steps 10 and 11 of the pipeline). Posting the reply is the caller's.

use std::sync::Arc;

use serde_json::json;

use super::budget_step;
use super::context::{self, Attached, Current, SESSION_TAIL};
use super::journal::{Journal, RecordingTools, Said};
use super::reply_bound;
use super::reply_files::attach_backend_files;
use super::turn_end::{TurnEnd, TurnFailure};
use super::{Caller, Engine};
use crate::backend::{BackendReply, TextSink, Trigger, TriggerOrigin};
use crate::config::BackendKind;
use crate::events::{Event, TurnOutcome};
use crate::metrics;
use crate::outcome::Outcome;
use crate::post::DeliveryFailed;
use crate::roster::Bot;
use crate::store::{EntryKind, HistoryEntry, HistoryTake, Origin, TurnStarted};
use crate::trace::{Span, SpanKind, attr, in_span};

/// What woke the bot, as the transcript records it and the model reads it.
pub(crate) struct Heard<'a> {
    /// Transcript speaker: a human id, or `bot:<id>`.
    pub speaker: &'a str,
    /// The name the model sees.
    pub name: &'a str,
    /// Human, bot or gateway.
    pub origin: Origin,
    /// The words, as the bot is given them.
    pub text: &'a str,
    /// The platform message id, for messages from a chat.
    pub message_id: Option<&'a str>,
    /// Kept with the inbound entry.
    pub meta: serde_json::Value,
    /// The files posted with it (`Attached::NONE` for a message that is not from a chat).
    pub attached: Attached<'a>,
}

/// One turn to take, whatever caused it: a chat message, another bot's send, a late reply.
pub(crate) struct TurnPlan<'a> {
    /// The bot taking it.
    pub bot: &'a Arc<Bot>,
    /// Who the turn calls tools as.
    pub caller: Caller,
    /// The chat's history buffer, for turns woken in a chat.
    pub history: History<'a>,
    /// The message.
    pub heard: Heard<'a>,
    /// When a flow's own limit ends the turn (a chain's `turn_timeout_seconds`); `None`: the
    /// bot's turn limit ([`Engine::turn_limit`]) applies.
    pub deadline: Option<std::time::Instant>,
    /// How much of the session the bot is given back.
    pub recall: Recall,
    /// The delivery (its run id) the turn runs for, marked running when the turn starts, in
    /// the same store job; `None` for a turn of no delivery, or a delivery's second turn.
    pub delivery: Option<&'a str>,
}

/// The chat's history buffer a turn is given (what was said there since the bot last spoke).
#[derive(Debug, Clone, Copy)]
pub(crate) enum History<'a> {
    /// These entries (taken already, or none).
    Given(&'a [HistoryEntry]),
    /// Taken for the bot in the store job that records the turn's start
    /// ([`Journal::turn_started`]): one commit less before the reply.
    Take(HistoryTake<'a>),
}

impl History<'_> {
    /// No history: a turn not woken in a chat.
    pub(crate) const NONE: History<'static> = History::Given(&[]);
}

/// How much of its session a bot is given back for a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recall {
    /// The tail of the session since its last reset: the turn continues a conversation.
    SessionTail,
    /// Nothing: the message carries all the context the turn needs (a chain turn, whose block
    /// holds the whole chain; replaying earlier blocks as well would repeat it).
    MessageOnly,
}

/// Steps 10 and 11 for any turn: record what woke the bot, run its backend with its tools
/// under the time limit, and decide the outcome. Silence and failures are recorded here;
/// posting a reply is the caller's business (a chat reply, or an answer to another bot).
/// The caller ([`super::SessionTurn`]) holds the session's lane slot. Its start and its end are
/// announced on the event stream here, for every flow.
pub(super) async fn take_turn(
    engine: &Engine,
    journal: &Journal,
    plan: TurnPlan<'_>,
    sink: Option<&dyn TextSink>,
) -> TurnEnd {
    let bot = plan.bot.id().to_owned();
    let (session, run_id) = (journal.session().render(), journal.run_id().to_owned());
    engine.events().emit(Event::TurnStarted {
        bot: bot.clone(),
        session: session.clone(),
        run_id: run_id.clone(),
    });
    let started = std::time::Instant::now();
    let span = Span::start(
        || format!("turn {bot}"),
        SpanKind::Internal,
        || {
            // The bot is in the span's name.
            vec![
                attr("baton.session", session.clone()),
                attr("baton.run_id", run_id.clone()),
            ]
        },
    );
    let end = in_span!(span, run_turn(engine, journal, plan, sink));
    let (outcome, model) = match &end {
        TurnEnd::Reply { model, .. } => (TurnOutcome::Reply, model.clone()),
        TurnEnd::Silent { model, .. } => (TurnOutcome::Silent, model.clone()),
        TurnEnd::Failed(_) => (TurnOutcome::Failed, String::new()),
    };
    span.set(|| vec![attr("baton.turn.outcome", outcome.as_str())]);
    if let TurnEnd::Failed(err) = &end {
        span.failed(|| err.to_string());
    }
    drop(span);
    engine.events().emit(Event::TurnEnded {
        bot,
        session,
        run_id,
        outcome,
        model,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    });
    end
}

async fn run_turn(
    engine: &Engine,
    journal: &Journal,
    plan: TurnPlan<'_>,
    sink: Option<&dyn TextSink>,
) -> TurnEnd {
    let session = journal.session();
    let heard = plan.heard;
    let (take, given) = match plan.history {
        History::Given(given) => (None, given),
        History::Take(take) => (Some(take), &[][..]),
    };
    let line = Said {
        speaker: heard.speaker,
        origin: heard.origin,
        text: heard.text,
        message_id: heard.message_id,
        meta: heard.meta,
    };
    let recall = match plan.recall {
        Recall::SessionTail => Some(SESSION_TAIL),
        Recall::MessageOnly => None,
    };
    let TurnStarted {
        history: taken,
        mut tail,
        conversation,
        delivery_settled,
        ..
    } = journal
        .turn_started(line, take, recall, plan.delivery)
        .await;
    if delivery_settled {
        // Not a failure of the bot's: what it was asked is on record, and why it said nothing.
        let end = TurnFailure::DeliverySettled;
        tracing::info!(session = %session, "{end}");
        let meta = json!({"stage": "turn"});
        journal
            .bot_did(EntryKind::Failure, &end.to_string(), meta)
            .await;
        return TurnEnd::Failed(end);
    }
    // A replay's tail holds the inbound line its cut-off attempt recorded: the model is given
    // that line once, as the current message.
    let run = Some(journal.run_id());
    tail.retain(|e| !(e.kind == EntryKind::Inbound && e.run_id.as_deref() == run));
    let history = if take.is_some() { &taken[..] } else { given };
    let bot = plan.bot;
    let current = Current {
        name: heard.name,
        text: heard.text,
        attached: heard.attached,
        trigger: Trigger {
            origin: match heard.origin {
                Origin::Human => TriggerOrigin::Human,
                Origin::Bot => TriggerOrigin::Bot,
                Origin::Gateway => TriggerOrigin::Gateway,
            },
            from: heard.speaker.to_owned(),
            message_id: heard.message_id.map(str::to_owned),
        },
    };
    let persona = engine
        .chat_rules()
        .resolve(session.platform, session.chat.as_str())
        .personas
        .of(bot.id().as_str());
    let mut request = context::turn_request(
        bot,
        &persona,
        session,
        conversation,
        history,
        &tail,
        current,
        bot.tools.specs(),
    );
    let Some((kind, backend)) = bot.backends.pick(persona.backend) else {
        let kind = persona.backend.map_or("", BackendKind::as_str);
        let why = format!(
            "this chat gives the bot the {kind} backend, which was not built for it; run \
             `baton check` and restart"
        );
        return failed(engine, journal, TurnFailure::Misconfigured(why)).await;
    };
    journal.using_backend(kind);
    journal.using_model(&request.model);
    let caller = Caller {
        run_id: Some(journal.run_id().to_owned()),
        // The first turn of a trigger names it.
        trigger: plan
            .caller
            .trigger
            .or_else(|| Some(journal.run_id().to_owned())),
        ..plan.caller
    };
    if let Err(refused) = budget_step::admit(engine, journal, bot, &caller).await {
        return refused;
    }
    // An agent calls baton's tools over MCP with its own token; a model through the executor.
    let agent = matches!(kind, BackendKind::Command | BackendKind::Http);
    let (running, access) = engine.running().start(&caller, agent);
    if access.is_some() {
        journal.lends_tools();
    }
    request.access = access;
    let agent_tools = engine.tools_for(caller.clone());
    let recording = RecordingTools::new(&*agent_tools, journal);
    let tools = budget_step::Metered {
        inner: &recording,
        engine,
        journal,
        bot,
        caller: &caller,
        request: &request,
        charged: std::sync::Mutex::new(None),
        stopped: std::sync::Mutex::new(None),
    };
    let started = std::time::Instant::now();
    let run = async {
        match sink {
            Some(sink) => backend.run_streaming(&request, &tools, sink).await,
            None => backend.run(&request, &tools).await,
        }
    };
    let limit = plan.deadline.map_or_else(
        || engine.turn_limit(bot),
        |at| at.saturating_duration_since(std::time::Instant::now()),
    );
    let ran = tokio::select! {
        ran = tokio::time::timeout(limit, run) => ran,
        why = running.stopped() => {
            return failed(engine, journal, TurnFailure::Stopped(why)).await;
        }
    };
    drop(running);
    engine.metrics().turn_took(started.elapsed());
    let mut reply = match ran {
        Ok(Ok(reply)) => {
            tools.settle(&reply).await;
            reply
        }
        Ok(Err(err)) => {
            if let Some(refused) = tools.refused().await {
                return refused;
            }
            let failure = if err.is_permanent() {
                TurnFailure::Misconfigured(err.to_string())
            } else {
                TurnFailure::Backend(err.to_string())
            };
            return failed(engine, journal, failure).await;
        }
        Err(_) => return failed(engine, journal, TurnFailure::TimedOut(limit)).await,
    };
    if let Some(usage) = reply.usage {
        tracing::debug!(
            %session,
            prompt_tokens = usage.prompt_tokens,
            completion_tokens = usage.completion_tokens,
            "turn's token usage"
        );
    }
    if !reply.attachments.is_empty() {
        let files = std::mem::take(&mut reply.attachments);
        if let Err(refused) = attach_backend_files(engine, journal, files).await {
            let err = format!("the backend's attachments: {refused}");
            return failed(engine, journal, TurnFailure::Backend(err)).await;
        }
    }
    let outcome = match Outcome::from_backend(&reply, &engine.config().gateway.silent_token) {
        // An empty reply with files attached posts the files alone.
        Outcome::Silent if empty_with_files(&reply, journal).await => Outcome::Reply(String::new()),
        outcome => outcome,
    };
    match outcome {
        Outcome::Silent => {
            engine.metrics().add(&metrics::TURNS, "silent");
            journal
                .bot_did(
                    EntryKind::Silent,
                    "",
                    json!({"backend": kind.as_str(), "model": reply.model, "usage": reply.usage}),
                )
                .await;
            TurnEnd::Silent {
                model: reply.model,
                usage: reply.usage,
            }
        }
        Outcome::Reply(text) => {
            engine.metrics().add(&metrics::TURNS, "reply");
            journal.using_model(&reply.model);
            TurnEnd::Reply {
                text: reply_bound::bound(engine, journal, text).await,
                model: reply.model,
                usage: reply.usage,
            }
        }
    }
}

/// Whether `reply` is empty text (not an explicit silence, nor the silent token) and its run
/// attached files.
async fn empty_with_files(reply: &BackendReply, journal: &Journal) -> bool {
    if !reply.text.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return false;
    }
    match journal.reply_files().await {
        Ok(files) => !files.is_empty(),
        Err(err) => {
            tracing::error!(session = %journal.session(), %err, "could not read the run's attached files; an empty reply stays silent");
            false
        }
    }
}

async fn failed(engine: &Engine, journal: &Journal, err: TurnFailure) -> TurnEnd {
    engine.metrics().add(&metrics::TURNS, "failed");
    tracing::error!(session = %journal.session(), %err, "turn failed");
    journal
        .bot_did(
            EntryKind::Failure,
            &err.to_string(),
            json!({"stage": "turn"}),
        )
        .await;
    TurnEnd::Failed(err)
}

/// A reply that did not reach the platform: logged and recorded, never silently lost.
pub(super) async fn undelivered(journal: &Journal, err: DeliveryFailed) -> String {
    let err = err.to_string();
    tracing::error!(session = %journal.session(), %err, "reply not delivered");
    journal
        .bot_did(EntryKind::Failure, &err, json!({"stage": "deliver"}))
        .await;
    err
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::engine::journal::journal;
    use crate::engine::testing::{End, Scripted, bot, bot_on, kinds, plan, transcript, until};
    use crate::engine::{Engine, Stop};
    use crate::gateway::testing::{echo_config, parts};
    use crate::session::test_key;
    use crate::store::Entry;

    /// Bot `b`'s turn in chat `room`, woken by `text`: how it ended, and the session's
    /// transcript after it.
    async fn take(engine: &Engine, bot: &Arc<Bot>, text: &str) -> (TurnEnd, Vec<Entry>) {
        let session = test_key("room");
        let journal = journal(engine, &session, "r1".into()).await;
        let end = take_turn(engine, &journal, plan(bot, &session, text), None).await;
        (end, transcript(engine, &session).await)
    }

    /// The reply is the caller's to post: the turn records only what woke the bot.
    #[tokio::test]
    async fn a_reply_is_handed_back_not_posted() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let (end, entries) = take(&gw.engine, &bot(&gw.engine, "b"), "hello there").await;
        let reply = TurnEnd::Reply {
            text: "hello there".into(),
            model: "echo".into(),
            usage: None,
        };
        assert_eq!(end, reply);
        assert_eq!(kinds(&entries), [EntryKind::Inbound]);
        assert_eq!(entries[0].text, "hello there");
    }

    #[tokio::test]
    async fn the_silent_token_ends_the_turn_in_recorded_silence() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let (end, entries) = take(&gw.engine, &bot(&gw.engine, "b"), "NO_REPLY").await;
        let silent = TurnEnd::Silent {
            model: "echo".into(),
            usage: None,
        };
        assert_eq!(end, silent);
        assert_eq!(kinds(&entries), [EntryKind::Inbound, EntryKind::Silent]);
    }

    #[tokio::test]
    async fn a_backend_error_fails_the_turn_on_record() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let failing = bot_on(&gw.engine, "b", Scripted::ends(End::Fails));
        let (end, entries) = take(&gw.engine, &failing, "hi").await;
        let TurnEnd::Failed(TurnFailure::Backend(why)) = end else {
            panic!("a backend failure, not {end:?}");
        };
        assert!(why.contains("connection refused"), "{why}");
        assert_eq!(kinds(&entries), [EntryKind::Inbound, EntryKind::Failure]);
        assert_eq!(entries[1].text, why);
        assert_eq!(entries[1].meta["stage"], "turn");
    }

    /// A refusal only the config can mend is told as such, not as "try again".
    #[tokio::test]
    async fn a_backend_refusal_fails_the_turn_as_misconfigured() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let refusing = bot_on(&gw.engine, "b", Scripted::ends(End::Refused));
        let (end, _) = take(&gw.engine, &refusing, "hi").await;
        assert!(
            matches!(end, TurnEnd::Failed(TurnFailure::Misconfigured(_))),
            "{end:?}"
        );
    }

    #[tokio::test]
    async fn a_backend_still_working_at_the_bots_time_limit_is_stopped() {
        let gw = parts(&echo_config(&["b"], "turn_timeout_seconds = 1\n")).await;
        let hanging = bot_on(&gw.engine, "b", Scripted::ends(End::Hangs));
        let (end, entries) = take(&gw.engine, &hanging, "hi").await;
        let limit = TurnFailure::TimedOut(Duration::from_secs(1));
        assert_eq!(end, TurnEnd::Failed(limit));
        assert_eq!(kinds(&entries), [EntryKind::Inbound, EntryKind::Failure]);
    }

    #[tokio::test]
    async fn a_turn_stopped_in_its_chat_ends_as_stopped() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let engine = &gw.engine;
        let hanging = bot_on(engine, "b", Scripted::ends(End::Hangs));
        let session = test_key("room");
        let stop = async {
            until("the turn runs", || engine.running().count() == 1).await;
            engine
                .running()
                .stop(&session.bot, session.platform, &session.chat)
        };
        let (end, stopped) = tokio::join!(take(engine, &hanging, "hi"), stop);
        assert_eq!(stopped, 1);
        assert_eq!(end.0, TurnEnd::Failed(TurnFailure::Stopped(Stop::Stopped)));
        assert_eq!(engine.running().count(), 0);
    }

    /// Every flow's turn is announced when it starts and when it ends, with its outcome.
    #[tokio::test]
    async fn a_turn_is_announced_at_its_start_and_at_its_end_with_its_outcome() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let mut announced = gw.engine.events().subscribe(None).live;
        let failing = bot_on(&gw.engine, "b", Scripted::ends(End::Fails));
        take(&gw.engine, &failing, "hi").await;
        let mut turns = Vec::new();
        while let Ok(stamped) = announced.try_recv() {
            match &stamped.event {
                Event::TurnStarted { run_id, .. } => turns.push(format!("started {run_id}")),
                Event::TurnEnded {
                    run_id, outcome, ..
                } => turns.push(format!("ended {run_id} {outcome:?}")),
                _ => {}
            }
        }
        assert_eq!(turns, ["started r1", "ended r1 Failed"]);
    }
}
