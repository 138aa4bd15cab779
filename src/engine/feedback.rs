//! A turn whose reply goes into a chat, with what people there see while the bot works
//! (`[feedback]`): a typing indicator for a turn addressed to the bot, and the reply streaming
//! in, posted once its first characters are certain and then edited as the model writes.
//!
//! The turn runs and the stream is posted side by side in one task: the backend hands each
//! piece of text to a channel, and the follower posts and edits from it at most once per
//! `edit_interval_ms`, always the certain part of the text ([`Draft`]), so nothing of a silent
//! turn and no prefix of the silent token is ever shown. When the turn ends, the posts are
//! made to hold exactly the reply ([`Streamer::finish`]); a silent or failed turn posts nothing
//! more. The first post also waits until the text has been coming in for one interval: a reply
//! that is complete sooner is posted whole, without edits.

use std::time::Duration;

use baton_contract::{MessageId, TypingTarget};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::session_turn::SessionTurn;
use super::turn::{TurnEnd, TurnPlan, undelivered};
use super::typing::Typing;
use crate::config::{FeedbackConfig, StreamMode};
use crate::deliver::{DeliveryFailed, Draft, Streamer, Target};
use crate::roster::Account;
use crate::turn::TextSink;

/// Where a turn's reply goes, and who is waiting for it.
pub(crate) struct ChatReply<'a> {
    /// The account that posts it.
    pub account: &'a Account,
    /// Where it goes.
    pub target: Target,
    /// The message it answers, if it answers one (a `/v1` stream may be listening for it).
    pub answering: Option<&'a MessageId>,
    /// Whether the bot was addressed (mention, DM, reply to it): only then does it show typing.
    pub addressed: bool,
}

/// How a turn that answers into a chat ended.
pub(crate) struct Answered {
    /// The turn's end.
    pub end: TurnEnd,
    /// The ids of what was posted (none for silence or a failure), or why a reply was not
    /// (fully) posted (already recorded).
    pub posted: Result<Vec<MessageId>, String>,
}

/// A piece of the reply as the backend writes it.
enum Piece {
    Text(String),
    Retract,
}

/// The backend's side of the channel.
struct Pieces(mpsc::UnboundedSender<Piece>);

impl TextSink for Pieces {
    fn text(&self, delta: &str) {
        let _ = self.0.send(Piece::Text(delta.to_owned()));
    }

    fn retract(&self) {
        let _ = self.0.send(Piece::Retract);
    }
}

impl SessionTurn<'_> {
    /// Take the turn and post its reply to `reply`'s chat, with typing and streaming as the
    /// bot's `[feedback]` says.
    pub(crate) async fn answer(&self, plan: TurnPlan<'_>, reply: ChatReply<'_>) -> Answered {
        let services = self.services();
        let settings = services.config().feedback.with(&plan.bot.config.feedback);
        let adapter = &reply.account.adapter;
        let typing = match reply.answering {
            Some(message) if settings.typing && reply.addressed => Some(Typing::start(
                services,
                adapter.clone(),
                TypingTarget {
                    chat: reply.target.chat.clone(),
                    thread: reply.target.thread.clone(),
                    message: message.clone(),
                },
            )),
            _ => None,
        };
        let tap = reply
            .answering
            .and_then(|message| services.taps().sender(&reply.account.id, message));
        // An ephemeral answer cannot be edited: it is posted whole.
        let stream_chat = settings.stream == StreamMode::Edit
            && adapter.can_edit()
            && reply.target.ephemeral.is_none();
        let answered = if stream_chat || tap.is_some() {
            let mut streamer = stream_chat.then(|| {
                let handover = services.handover(reply.account);
                Streamer::new(&**adapter, handover, &reply.target, self.journal())
            });
            let (tx, rx) = mpsc::unbounded_channel();
            let take = async {
                let pieces = Pieces(tx);
                self.take_with(plan, Some(&pieces)).await
                // `pieces` is dropped here: the follower sees the channel close.
            };
            let silent_token = &services.config().gateway.silent_token;
            let follow = follow(rx, streamer.as_mut(), tap, &settings, silent_token);
            let (end, followed) = tokio::join!(take, follow);
            let posted = match (&end, streamer) {
                (TurnEnd::Reply { text, .. }, Some(mut streamer)) => {
                    let done = match followed {
                        Ok(()) => streamer.finish(text).await,
                        Err(failed) => Err(failed),
                    };
                    match done {
                        Ok(ids) => Ok(ids),
                        Err(failed) => Err(undelivered(self.journal(), failed).await),
                    }
                }
                (TurnEnd::Reply { text, .. }, None) => {
                    self.post(reply.account, &reply.target, text).await
                }
                // Posts a silent or failed turn made stay as they are (recorded).
                _ => Ok(Vec::new()),
            };
            Answered { end, posted }
        } else {
            let end = self.take(plan).await;
            let posted = match &end {
                TurnEnd::Reply { text, .. } => self.post(reply.account, &reply.target, text).await,
                _ => Ok(Vec::new()),
            };
            Answered { end, posted }
        };
        finish(typing, answered).await
    }
}

/// The turn is over: its indicator goes.
async fn finish(typing: Option<Typing>, answered: Answered) -> Answered {
    if let Some(typing) = typing {
        typing.end().await;
    }
    answered
}

/// Follow the reply as the backend writes it, until the turn ends: show its certain part in the
/// chat (at most once per interval) and hand each new certain piece to the tap.
async fn follow(
    mut pieces: mpsc::UnboundedReceiver<Piece>,
    mut streamer: Option<&mut Streamer<'_>>,
    tap: Option<mpsc::UnboundedSender<String>>,
    settings: &FeedbackConfig,
    silent_token: &str,
) -> Result<(), DeliveryFailed> {
    let interval = Duration::from_millis(settings.edit_interval_ms);
    let mut draft = Draft::new(silent_token);
    let mut first_text: Option<Instant> = None;
    let mut last_show: Option<Instant> = None;
    let mut shown = String::new();
    let mut tapped = String::new();
    let mut fresh = false;
    loop {
        let due = match (fresh, last_show, first_text) {
            (true, Some(last), _) => Some(last + interval),
            (true, None, Some(first)) => Some(first + interval),
            _ => None,
        };
        let piece = tokio::select! {
            piece = pieces.recv() => piece,
            () = at(due) => {
                fresh = false;
                let Some(streamer) = streamer.as_deref_mut() else { continue };
                let certain = draft.certain();
                let long_enough = certain.chars().count() >= settings.stream_min_chars;
                if certain != shown && (streamer.has_posted() || long_enough) {
                    streamer.show(&certain).await?;
                    shown = certain;
                    last_show = Some(Instant::now());
                }
                continue;
            }
        };
        match piece {
            None => return Ok(()),
            Some(Piece::Text(text)) => {
                draft.push(&text);
                first_text.get_or_insert_with(Instant::now);
            }
            Some(Piece::Retract) => draft.retract(),
        }
        fresh = true;
        if let Some(tap) = &tap {
            let certain = draft.certain();
            // Only ever add to what the listener has: text taken back is not sent again.
            if let Some(new) = certain
                .strip_prefix(tapped.as_str())
                .filter(|n| !n.is_empty())
            {
                let _ = tap.send(new.to_owned());
                tapped = certain;
            }
        }
    }
}

/// Wait until `due`, or forever.
async fn at(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}
