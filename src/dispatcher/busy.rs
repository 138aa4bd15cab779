//! Step 9, refused: the bot's lane or its session already has its maximum of turns waiting
//! (`[lanes] max_queued`, `max_queued_per_session`). Waiting turns hold memory, so past that
//! point a message is refused rather than queued, and never silently: the refusal is counted,
//! written to the bot's transcript as a failure (with the words, so nothing is lost), and the
//! chat is told once a minute at most, so a flood does not turn into a flood of notices. The
//! refusal is a [`Stop`] like the others': its notice is posted where every stop's is.

use serde_json::json;

use super::Inbound;
use super::stop::{DropReason, Notice, Stop};
use crate::engine::Engine;
use crate::engine::Journal;
use crate::lanes::QueueFull;
use crate::metrics;
use crate::store::EntryKind;

/// What the chat is told.
pub(crate) const BUSY_NOTICE: &str =
    "I'm busy with earlier messages and can't take this one now; please try again in a minute.";

/// Refuse the turn for `inbound`: count it, record it; the stop tells the chat (rate-limited).
pub(super) async fn refuse(
    engine: &Engine,
    inbound: &Inbound<'_>,
    journal: &Journal,
    full: QueueFull,
) -> Stop {
    let reason = full.as_str();
    engine.metrics().add(&metrics::QUEUE_REFUSALS, reason);
    let chat = Some(inbound.settings_key.clone());
    engine.refused("lanes", reason, chat, inbound.bot());
    let event = &inbound.event;
    tracing::warn!(
        bot = %inbound.bot(), chat = %event.chat, message = %event.message_id, %full,
        "turn refused: the queue is full"
    );
    let text = format!(
        "message {} from {} was not answered: {full}",
        event.message_id, inbound.speaker.label
    );
    let meta = json!({
        "stage": "lanes",
        "refused": reason,
        "message_id": event.message_id,
        "text": event.text,
    });
    journal.bot_did(EntryKind::Failure, &text, meta).await;
    Stop::dropped(DropReason::Busy(full)).with_notice(Notice::OncePerChat(BUSY_NOTICE.into()))
}

#[cfg(test)]
mod tests {
    use super::super::testing::to_bot;
    use super::*;
    use crate::dispatcher::Handled;
    use crate::gateway::testing::{echo_config, parts};
    use crate::lanes::Lane;
    use crate::pen::Arrival;

    /// A full queue's refusal is a stop like the others: performed where every stop is, its
    /// notice is posted at most once per chat a minute however many messages are refused.
    #[tokio::test]
    async fn a_busy_stop_tells_the_chat_once_a_minute() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let d = &gw.dispatcher;
        let account = &gw.engine.roster().accounts()[0];
        for n in 0..3 {
            let event = to_bot("alpha", n, "room", "ann", "@alpha hi");
            let inbound = d.inbound(event, account, Arrival::Fresh, None);
            let full = QueueFull::Session { max: 1 };
            let stop = Stop::dropped(DropReason::Busy(full))
                .with_notice(Notice::OncePerChat(BUSY_NOTICE.into()));
            let decided = super::super::decision::of(&inbound, &Err(stop.clone()));
            assert_eq!(
                d.stopped(&inbound, stop, decided).await,
                Handled::Dropped(DropReason::Busy(full))
            );
        }
        let posted: Vec<String> = gw
            .hub
            .messages("room", None)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.text)
            .collect();
        assert_eq!(posted, [BUSY_NOTICE], "told once");
    }

    /// `/metrics` shows a zero series for every reason from the start only if the counter knows
    /// each reason this step counts.
    #[test]
    fn every_refusal_reason_is_a_known_metrics_label() {
        let reasons = [
            QueueFull::Lane {
                lane: Lane::Main,
                max: 1,
            },
            QueueFull::Session { max: 1 },
        ];
        for full in reasons {
            assert!(
                metrics::QUEUE_REFUSALS.known.contains(&full.as_str()),
                "{} is not listed in QUEUE_REFUSALS.known",
                full.as_str()
            );
        }
    }
}
