//! Steps 9 to 13 for one woken bot: wait for the lane, run the turn, decide the outcome,
//! deliver, mirror. Also the gateway's own short answers (notices, admin replies), which are
//! delivered and mirrored the same way but never run a model.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::context::{self, Current, SESSION_TAIL};
use super::{Handled, Inbound, Shared, Wake};
use crate::deliver::{DeliveryFailed, deliver};
use crate::lanes::Lane;
use crate::metrics;
use crate::mirror::{Journal, RecordingTools, now_ms};
use crate::outcome::Outcome;
use crate::roster::Bot;
use crate::store::{EntryKind, HistoryEntry, HistoryTake, Origin};
use crate::tools::{AgentTools, Caller};

/// Run the woken bot's turn for `inbound`.
///
/// The turn's state (context, backend call, delivery) is boxed: only an event that wakes a bot
/// pays for it, while an inline state machine would make every event's pipeline future as big
/// as the largest turn, copied each time the runtime moves the task (BENCHMARKS.md).
pub(crate) async fn run(shared: &Arc<Shared>, inbound: &Inbound<'_>, wake: Wake) -> Handled {
    Box::pin(run_turn(shared, inbound, wake)).await
}

async fn run_turn(shared: &Arc<Shared>, inbound: &Inbound<'_>, wake: Wake) -> Handled {
    let session = inbound.session();
    let key = session.render();
    let journal = journal(shared, inbound, "in");
    let queued = match shared.lanes.queue(Lane::Main, inbound.bot(), &key) {
        Ok(queued) => queued,
        Err(full) => return super::busy::refuse(shared, inbound, &journal, full).await,
    };
    touch(shared, inbound).await;
    let _slot = queued.wait().await;

    let event = &inbound.event;
    let me = inbound.account.adapter.self_id();
    let history = shared
        .store
        .history_take(HistoryTake {
            chat_key: &inbound.chat_key,
            bot: inbound.bot(),
            skip_sender: me.as_ref().map(|m| m.as_str()),
            skip_message: Some(event.message_id.as_str()),
            limit: inbound.policy.history_limit,
        })
        .await
        .unwrap_or_else(|err| {
            tracing::error!(%err, "could not read the history buffer; answering without it");
            Vec::new()
        });
    let speaker = &inbound.speaker;
    let heard = Heard {
        speaker: &speaker.label,
        name: &speaker.name,
        origin: speaker.origin,
        text: &event.text,
        message_id: Some(event.message_id.as_str()),
        meta: json!({
            "name": speaker.name,
            "wake": format!("{wake:?}"),
            "history": history.len(),
            "raw": event.raw,
        }),
    };
    let turn = TurnPlan {
        bot: &inbound.account.bot,
        journal: &journal,
        caller: Caller::from_chat(&session),
        history: &history,
        heard,
        limit: Duration::from_secs(shared.config.gateway.turn_timeout_seconds),
        recall: Recall::SessionTail,
    };
    match take_turn(shared, turn).await {
        TurnEnd::Silent { .. } => Handled::Silent,
        TurnEnd::Failed(err) => fail(shared, inbound, &journal, err.to_string()).await,
        TurnEnd::Reply { text, .. } => {
            let adapter = &*inbound.account.adapter;
            match deliver(adapter, &inbound.reply_target(), &text, &journal).await {
                Ok(_) => Handled::Replied(text),
                Err(err) => Handled::Failed(undelivered(&journal, err).await),
            }
        }
    }
}

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
}

/// One turn to take, whatever caused it: a chat message, another bot's send, a late reply.
pub(crate) struct TurnPlan<'a> {
    /// The bot taking it.
    pub bot: &'a Arc<Bot>,
    /// The run's pen; its session is the turn's session.
    pub journal: &'a Journal,
    /// Who the turn calls tools as.
    pub caller: Caller,
    /// The chat's history buffer, for turns woken in a chat.
    pub history: &'a [HistoryEntry],
    /// The message.
    pub heard: Heard<'a>,
    /// Longest the backend may take.
    pub limit: Duration,
    /// How much of the session the bot is given back.
    pub recall: Recall,
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

/// How a turn ended, before anything is posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TurnEnd {
    /// The bot said this (silent token already stripped).
    Reply {
        /// The text.
        text: String,
        /// The model that said it.
        model: String,
    },
    /// The bot chose silence (recorded).
    Silent {
        /// The model that chose it.
        model: String,
    },
    /// The backend failed or ran out of time (recorded).
    Failed(TurnFailure),
}

/// Why a turn produced nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TurnFailure {
    /// The backend answered with an error.
    #[error("{0}")]
    Backend(String),
    /// The backend was still working at the time limit and was stopped.
    #[error("the turn took longer than {} s and was stopped", .0.as_secs())]
    TimedOut(Duration),
}

/// Steps 10 and 11 for any turn: record what woke the bot, run its backend with its tools
/// under the time limit, and decide the outcome. Silence and failures are recorded here;
/// posting a reply is the caller's business (a chat reply, or an answer to another bot).
/// The caller holds the session's lane slot.
pub(crate) async fn take_turn(shared: &Arc<Shared>, plan: TurnPlan<'_>) -> TurnEnd {
    let journal = plan.journal;
    let session = journal.session().to_owned();
    let tail = match plan.recall {
        Recall::SessionTail => shared
            .store
            .session_tail(&session, SESSION_TAIL)
            .await
            .unwrap_or_default(),
        Recall::MessageOnly => Vec::new(),
    };
    let heard = plan.heard;
    journal
        .heard(
            heard.speaker,
            heard.origin,
            heard.text,
            heard.message_id,
            heard.meta,
        )
        .await;
    let bot = plan.bot;
    let current = Current {
        name: heard.name,
        text: heard.text,
    };
    let request = context::turn_request(
        bot,
        &session,
        plan.history,
        &tail,
        current,
        bot.tools.specs(),
    );
    let agent_tools = AgentTools::new(Arc::clone(shared), plan.caller);
    let tools = RecordingTools::new(&agent_tools, journal);
    let started = std::time::Instant::now();
    let ran = tokio::time::timeout(plan.limit, bot.backend.run(&request, &tools)).await;
    shared.metrics.turn_took(started.elapsed());
    let reply = match ran {
        Ok(Ok(reply)) => reply,
        Ok(Err(err)) => {
            return failed(shared, journal, TurnFailure::Backend(err.to_string())).await;
        }
        Err(_) => return failed(shared, journal, TurnFailure::TimedOut(plan.limit)).await,
    };
    match Outcome::from_backend(&reply, &shared.config.gateway.silent_token) {
        Outcome::Silent => {
            shared.metrics.add(&metrics::TURNS, "silent");
            journal
                .bot_did(EntryKind::Silent, "", json!({"model": reply.model}))
                .await;
            TurnEnd::Silent { model: reply.model }
        }
        Outcome::Reply(text) => {
            shared.metrics.add(&metrics::TURNS, "reply");
            TurnEnd::Reply {
                text,
                model: reply.model,
            }
        }
    }
}

async fn failed(shared: &Shared, journal: &Journal, err: TurnFailure) -> TurnEnd {
    shared.metrics.add(&metrics::TURNS, "failed");
    tracing::error!(session = journal.session(), %err, "turn failed");
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
pub(crate) async fn undelivered(journal: &Journal, err: DeliveryFailed) -> String {
    let err = err.to_string();
    tracing::error!(session = journal.session(), %err, "reply not delivered");
    journal
        .bot_did(EntryKind::Failure, &err, json!({"stage": "deliver"}))
        .await;
    err
}

/// The backend failed (already recorded): tell the user briefly, unless `error_reply` is empty.
async fn fail(shared: &Shared, inbound: &Inbound<'_>, journal: &Journal, err: String) -> Handled {
    let text = &shared.config.gateway.error_reply;
    if !text.trim().is_empty()
        && let Err(e) = gateway_says(shared, inbound, journal, text).await
    {
        tracing::error!(bot = inbound.bot(), err = %e, "error reply not delivered");
    }
    Handled::Failed(err)
}

/// A short answer from the gateway itself (rate-limit and policy notices, admin replies),
/// delivered to the sender's chat and recorded in the bot's transcript. Boxed like [`run`]:
/// rare, and its delivery state would otherwise sit in every event's future.
pub(crate) async fn notice(shared: &Shared, inbound: &Inbound<'_>, text: &str) {
    Box::pin(post_notice(shared, inbound, text)).await;
}

async fn post_notice(shared: &Shared, inbound: &Inbound<'_>, text: &str) {
    let journal = journal(shared, inbound, "notice");
    touch(shared, inbound).await;
    if let Err(err) = gateway_says(shared, inbound, &journal, text).await {
        tracing::warn!(bot = inbound.bot(), %err, "notice not delivered");
        journal
            .bot_did(
                EntryKind::Failure,
                &err.to_string(),
                json!({"stage": "notice"}),
            )
            .await;
    }
}

/// Post a line on the gateway's behalf through the bot's account, remembered first so that
/// other bots do not take it for the bot speaking.
async fn gateway_says(
    shared: &Shared,
    inbound: &Inbound<'_>,
    journal: &Journal,
    text: &str,
) -> Result<(), DeliveryFailed> {
    shared
        .own_notices
        .remember(&inbound.chat_key, inbound.bot(), text);
    let adapter = &*inbound.account.adapter;
    deliver(adapter, &inbound.reply_target(), text, journal)
        .await
        .map(drop)
}

/// A journal for a run answering `inbound`. The run id derives from the event, so a replay of
/// the same event reuses the same idempotency keys and cannot post twice.
pub(crate) fn journal(shared: &Shared, inbound: &Inbound<'_>, kind: &str) -> Journal {
    let event = &inbound.event;
    let run_id = format!(
        "{kind}:{}:{}:{}",
        event.platform, inbound.account.id, event.message_id
    );
    Journal::new(
        shared.store.clone(),
        inbound.session().render(),
        inbound.bot().to_owned(),
        run_id,
    )
    .replaying(inbound.arrival)
}

async fn touch(shared: &Shared, inbound: &Inbound<'_>) {
    if let Err(err) = shared
        .store
        .touch_session(&inbound.session().store_ref(), now_ms())
        .await
    {
        tracing::error!(%err, "could not record the session");
    }
}
