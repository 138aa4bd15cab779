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
use crate::mirror::{Journal, RecordingTools, now_ms};
use crate::outcome::Outcome;
use crate::store::{EntryKind, HistoryTake, SessionRef, TranscriptQuery};
use crate::tools::{AgentTools, Caller};

/// Run the woken bot's turn for `inbound`.
pub(crate) async fn run(shared: &Arc<Shared>, inbound: &Inbound<'_>, wake: Wake) -> Handled {
    let session = inbound.session();
    let key = session.render();
    let journal = journal(shared, inbound, "in");
    touch(shared, inbound, &key).await;
    let _slot = shared.lanes.enter(Lane::Main, &key).await;

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
    let tail = shared
        .store
        .transcript(TranscriptQuery {
            session: key.clone(),
            after_id: None,
            last: Some(SESSION_TAIL),
            since_reset: true,
        })
        .await
        .unwrap_or_default();
    let speaker = &inbound.speaker;
    let meta = json!({
        "name": speaker.name,
        "wake": format!("{wake:?}"),
        "history": history.len(),
        "raw": event.raw,
    });
    journal
        .heard(
            &speaker.label,
            speaker.origin,
            &event.text,
            Some(event.message_id.as_str()),
            meta,
        )
        .await;

    let bot = &inbound.account.bot;
    let current = Current {
        name: &speaker.name,
        text: &event.text,
    };
    let agent_tools = AgentTools::new(Arc::clone(shared), Caller::from_chat(&session));
    let request = context::turn_request(bot, &key, &history, &tail, current, bot.tools.specs());
    let tools = RecordingTools::new(&agent_tools, &journal);
    let limit = Duration::from_secs(shared.config.gateway.turn_timeout_seconds);
    let reply = match tokio::time::timeout(limit, bot.backend.run(&request, &tools)).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(err)) => return fail(shared, inbound, &journal, err.to_string()).await,
        Err(_) => {
            let err = format!(
                "the turn took longer than {} s and was stopped",
                limit.as_secs()
            );
            return fail(shared, inbound, &journal, err).await;
        }
    };
    match Outcome::from_backend(&reply, &shared.config.gateway.silent_token) {
        Outcome::Silent => {
            journal
                .bot_did(EntryKind::Silent, "", json!({"model": reply.model}))
                .await;
            Handled::Silent
        }
        Outcome::Reply(text) => {
            let adapter = &*inbound.account.adapter;
            match deliver(adapter, &inbound.reply_target(), &text, &journal).await {
                Ok(_) => Handled::Replied(text),
                Err(err) => {
                    let err = err.to_string();
                    tracing::error!(bot = inbound.bot(), %err, "reply not delivered");
                    journal
                        .bot_did(EntryKind::Failure, &err, json!({"stage": "deliver"}))
                        .await;
                    Handled::Failed(err)
                }
            }
        }
    }
}

/// The backend failed: record it, and tell the user briefly (unless `error_reply` is empty).
async fn fail(shared: &Shared, inbound: &Inbound<'_>, journal: &Journal, err: String) -> Handled {
    tracing::error!(bot = inbound.bot(), %err, "turn failed");
    journal
        .bot_did(EntryKind::Failure, &err, json!({"stage": "turn"}))
        .await;
    let text = &shared.config.gateway.error_reply;
    if !text.trim().is_empty() {
        if let Err(e) = gateway_says(shared, inbound, journal, text).await {
            tracing::error!(bot = inbound.bot(), err = %e, "error reply not delivered");
        }
    }
    Handled::Failed(err)
}

/// A short answer from the gateway itself (rate-limit and policy notices, admin replies),
/// delivered to the sender's chat and recorded in the bot's transcript.
pub(crate) async fn notice(shared: &Shared, inbound: &Inbound<'_>, text: &str) {
    let journal = journal(shared, inbound, "notice");
    touch(shared, inbound, journal.session()).await;
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
fn journal(shared: &Shared, inbound: &Inbound<'_>, kind: &str) -> Journal {
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
}

async fn touch(shared: &Shared, inbound: &Inbound<'_>, key: &str) {
    let event = &inbound.event;
    let session = SessionRef {
        key: key.to_owned(),
        bot: inbound.bot().to_owned(),
        platform: event.platform.to_string(),
        account: inbound.account.id.to_string(),
        chat: event.chat.to_string(),
        thread: event.thread.as_ref().map(ToString::to_string),
    };
    if let Err(err) = shared.store.touch_session(&session, now_ms()).await {
        tracing::error!(%err, "could not record the session");
    }
}
