//! Steps 9 to 13 for one woken bot: wait for the lane, run the turn, decide the outcome,
//! deliver, mirror. Also the gateway's own short answers (notices, admin replies), which are
//! delivered and mirrored the same way but never run a model.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{Handled, Inbound, Wake};
use crate::deliver::{DeliveryFailed, deliver};
use crate::engine::{Caller, Heard, Recall, Services, TurnEnd, TurnPlan, take_turn, undelivered};
use crate::lanes::Lane;
use crate::mirror::{Journal, now_ms};
use crate::store::{EntryKind, HistoryTake};

/// Run the woken bot's turn for `inbound`.
///
/// The turn's state (context, backend call, delivery) is boxed: only an event that wakes a bot
/// pays for it, while an inline state machine would make every event's pipeline future as big
/// as the largest turn, copied each time the runtime moves the task (BENCHMARKS.md).
pub(crate) async fn run(shared: &Arc<Services>, inbound: &Inbound<'_>, wake: Wake) -> Handled {
    Box::pin(run_turn(shared, inbound, wake)).await
}

async fn run_turn(shared: &Arc<Services>, inbound: &Inbound<'_>, wake: Wake) -> Handled {
    let session = inbound.session();
    let key = session.render();
    let journal = journal(shared, inbound, "in");
    touch(shared, inbound).await;
    let _slot = shared.lanes().enter(Lane::Main, inbound.bot(), &key).await;

    let event = &inbound.event;
    let me = inbound.account.adapter.self_id();
    let history = shared
        .store()
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
        limit: Duration::from_secs(shared.config().gateway.turn_timeout_seconds),
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

/// The backend failed (already recorded): tell the user briefly, unless `error_reply` is empty.
async fn fail(shared: &Services, inbound: &Inbound<'_>, journal: &Journal, err: String) -> Handled {
    let text = &shared.config().gateway.error_reply;
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
pub(crate) async fn notice(shared: &Services, inbound: &Inbound<'_>, text: &str) {
    Box::pin(post_notice(shared, inbound, text)).await;
}

async fn post_notice(shared: &Services, inbound: &Inbound<'_>, text: &str) {
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
    shared: &Services,
    inbound: &Inbound<'_>,
    journal: &Journal,
    text: &str,
) -> Result<(), DeliveryFailed> {
    shared
        .own_notices()
        .remember(&inbound.chat_key, inbound.bot(), text);
    let adapter = &*inbound.account.adapter;
    deliver(adapter, &inbound.reply_target(), text, journal)
        .await
        .map(drop)
}

/// A journal for a run answering `inbound`. The run id derives from the event, so a replay of
/// the same event reuses the same idempotency keys and cannot post twice.
pub(crate) fn journal(shared: &Services, inbound: &Inbound<'_>, kind: &str) -> Journal {
    let event = &inbound.event;
    let run_id = format!(
        "{kind}:{}:{}:{}",
        event.platform, inbound.account.id, event.message_id
    );
    Journal::new(
        shared.store().clone(),
        inbound.session().render(),
        inbound.bot().to_owned(),
        run_id,
    )
}

async fn touch(shared: &Services, inbound: &Inbound<'_>) {
    if let Err(err) = shared
        .store()
        .touch_session(&inbound.session().store_ref(), now_ms())
        .await
    {
        tracing::error!(%err, "could not record the session");
    }
}
