//! A turn whose reply goes into a chat, with what people there see while the bot works
//! (`[feedback]`): a typing indicator for a turn addressed to the bot, and the reply streaming
//! in, posted once its first characters are certain and then edited as the model writes. A
//! turn with no chat (an A2A task's) streams its reply the same way to a tap alone
//! ([`SessionTurn::take_tapped`]).
//!
//! The turn runs and the stream is posted side by side in one task: the backend hands each
//! piece of text to a channel, and the follower posts and edits from it at most once per
//! `edit_interval_ms`, always the certain part of the text ([`Draft`]), so nothing of a silent
//! turn and no prefix of the silent token is ever shown. When the turn ends, the posts are
//! made to hold exactly the reply ([`Streamer::finish`]); a silent turn deletes any draft it
//! showed before calling tools, and a turn that fails after its reply began to show ends its
//! posts with the error reply (the gateway's `error_reply`, under the text shown so far) rather
//! than leave them cut off. The first post also waits until the text has been coming in for
//! one interval: a reply that is complete sooner is posted whole, without edits.

use std::time::Duration;

use baton_contract::{MessageId, StreamFor, TypingTarget, UserId};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::reply_gate::{NotAdmitted, ReplyGate};
use super::session_turn::SessionTurn;
use super::turn::{TurnPlan, undelivered};
use super::turn_end::TurnEnd;
use super::typing::Typing;
use crate::backend::TextSink;
use crate::config::{FeedbackConfig, StreamMode};
use crate::post::{DeliveryFailed, Draft, Streamer, Target};
use crate::roster::Account;

/// Where a turn's reply goes, and who is waiting for it.
pub(crate) struct ChatReply<'a> {
    /// The account that posts it.
    pub account: &'a Account,
    /// Where it goes.
    pub target: Target,
    /// The message it answers, if it answers one (a `/v1` stream may be listening for it).
    pub answering: Option<&'a MessageId>,
    /// Where the typing indicator shows, for a turn addressed to the bot (a mention, a DM, a
    /// reply to it, a chain giving it the turn): the message it answers. `None`: no typing.
    pub typing_at: Option<&'a MessageId>,
    /// The flow that must still take the reply when the turn ends (a chain), if any.
    pub gate: Option<&'a dyn ReplyGate>,
    /// The person the reply answers, if a person asked (a platform's own stream is shown to
    /// them: Slack's `recipient_user_id`).
    pub asker: Option<&'a UserId>,
}

/// How a turn that answers into a chat ended.
pub(crate) struct Answered {
    /// The turn's end.
    pub end: TurnEnd,
    /// The ids of what was posted (none for silence or a reply its flow refused; for a failed
    /// turn, the posts its reply had begun to show, now ending with the error reply), or why
    /// a reply was not (fully) posted (already recorded).
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
        let engine = self.engine();
        let settings = engine.config().feedback.with(&plan.bot.config.feedback);
        let adapter = &reply.account.adapter;
        let shows = settings.typing && adapter.shows_typing();
        let typing = reply.typing_at.filter(|_| shows).map(|message| {
            let at = TypingTarget {
                chat: reply.target.chat.clone(),
                thread: reply.target.thread.clone(),
                message: message.clone(),
            };
            Typing::start(engine, adapter.clone(), at, self.journal().run_id())
        });
        let tap = reply
            .answering
            .and_then(|message| engine.taps().sender(&reply.account.id, message));
        // A gated reply's posts are its flow's lines: remembered before they are posted.
        let bot = plan.bot.id().clone();
        let quiet = reply.gate.map(|gate| {
            move |text: &str| engine.own_notices().remember(gate.quiet_in(), &bot, text)
        });
        let before_post = quiet.as_ref().map(|q| q as &(dyn Fn(&str) + Sync));
        // An ephemeral answer cannot be edited: it is posted whole.
        let native_mode = settings.stream == StreamMode::Native;
        let native = native_mode && adapter.streams_in(&reply.target.chat);
        let preview = native_mode && !native && adapter.previews_in(&reply.target.chat);
        let stream_chat =
            (preview || native || settings.stream != StreamMode::Off && adapter.can_edit())
                && reply.target.ephemeral.is_none();
        let (end, streamer, followed) = if stream_chat || tap.is_some() {
            let mut streamer = stream_chat.then(|| {
                let handover = engine.handover(reply.account);
                let limits = &engine.config().limits;
                let streamer =
                    Streamer::new(&**adapter, handover, &reply.target, self.journal().pen())
                        .before_post(before_post)
                        .bounded(limits.max_reply_bytes, limits.max_posts_per_reply);
                if preview {
                    streamer.previewing()
                } else if native {
                    streamer.streaming_for(StreamFor {
                        user: reply.asker.cloned(),
                    })
                } else {
                    streamer
                }
            });
            let (tx, rx) = mpsc::unbounded_channel();
            let take = async {
                let pieces = Pieces(tx);
                self.take_with(plan, Some(&pieces)).await
                // `pieces` is dropped here: the follower sees the channel close.
            };
            let silent_token = &engine.config().gateway.silent_token;
            let follower = Follower {
                settings: &settings,
                silent_token,
                gate: reply.gate,
            };
            let follow = follower.follow(rx, streamer.as_mut(), || tap.clone());
            let (end, followed) = tokio::join!(take, follow);
            (end, streamer, followed)
        } else {
            (self.take(plan).await, None, Ok(String::new()))
        };
        let posted = match (&end, streamer, followed) {
            (_, _, Err(failed)) => Err(undelivered(self.journal(), failed).await),
            (TurnEnd::Failed(_), Some(mut streamer), Ok(shown)) if streamer.has_posted() => {
                // The reply had begun to show: the error reply ends it, in its posts.
                let error_reply = engine.config().gateway.error_reply.trim();
                let text = match (shown.is_empty(), error_reply.is_empty()) {
                    (_, true) => shown,
                    (true, false) => error_reply.to_owned(),
                    (false, false) => format!("{shown}\n\n{error_reply}"),
                };
                match streamer.finish(&text).await {
                    Ok(ids) => Ok(ids),
                    Err(failed) => Err(undelivered(self.journal(), failed).await),
                }
            }
            (TurnEnd::Reply { text, .. }, streamer, Ok(_)) => {
                match admitted(reply.gate, text).await {
                    Err(refused) => {
                        if let Some(mut streamer) = streamer {
                            streamer.withdraw(&refused.to_string()).await;
                        }
                        Ok(Vec::new())
                    }
                    Ok(()) => match streamer {
                        Some(mut streamer) => match streamer.finish(text).await {
                            Ok(ids) => Ok(ids),
                            Err(failed) => Err(undelivered(self.journal(), failed).await),
                        },
                        None => {
                            if let Some(before_post) = before_post {
                                before_post(text);
                            }
                            self.post(reply.account, &reply.target, text).await
                        }
                    },
                }
            }
            // Silent after all: a draft it showed before calling tools is taken back.
            (TurnEnd::Silent { .. }, Some(mut streamer), Ok(_)) => {
                streamer
                    .withdraw("the turn ended silent after showing a draft")
                    .await;
                Ok(Vec::new())
            }
            _ => Ok(Vec::new()),
        };
        finish(typing, Answered { end, posted }).await
    }
}

impl SessionTurn<'_> {
    /// Take the turn with its reply's certain text handed, as it is written, to whoever taps
    /// run `run_id` (an A2A stream following its task: [`Taps::open_run`](super::Taps)). No
    /// chat shows it.
    pub(crate) async fn take_tapped(&self, plan: TurnPlan<'_>, run_id: &str) -> TurnEnd {
        let engine = self.engine();
        let settings = engine.config().feedback.with(&plan.bot.config.feedback);
        let (tx, rx) = mpsc::unbounded_channel();
        let take = async {
            let pieces = Pieces(tx);
            self.take_with(plan, Some(&pieces)).await
        };
        let follower = Follower {
            settings: &settings,
            silent_token: &engine.config().gateway.silent_token,
            gate: None,
        };
        let taps = engine.taps();
        let follow = follower.follow(rx, None, || taps.run_sender(run_id));
        let (end, _shown) = tokio::join!(take, follow);
        end
    }
}

/// Whether the reply's flow (if it has one) takes `text`.
async fn admitted(gate: Option<&dyn ReplyGate>, text: &str) -> Result<(), NotAdmitted> {
    match gate {
        Some(gate) => gate.admit(text).await,
        None => Ok(()),
    }
}

/// The turn is over: its indicator goes.
async fn finish(typing: Option<Typing>, answered: Answered) -> Answered {
    if let Some(typing) = typing {
        typing.end().await;
    }
    answered
}

/// What the follower of a streamed reply goes by.
struct Follower<'a> {
    settings: &'a FeedbackConfig,
    silent_token: &'a str,
    gate: Option<&'a dyn ReplyGate>,
}

impl Follower<'_> {
    /// Follow the reply as the backend writes it, until the turn ends: show its certain part in
    /// the chat (at most once per interval, and only while its flow lets it) and hand each new
    /// certain piece to the tap, looked for (`find_tap`) with each piece until there is one: a
    /// tap found late first gets all of the certain text so far. Returns the certain part at
    /// the end.
    async fn follow(
        &self,
        mut pieces: mpsc::UnboundedReceiver<Piece>,
        mut streamer: Option<&mut Streamer<'_>>,
        find_tap: impl Fn() -> Option<mpsc::UnboundedSender<String>>,
    ) -> Result<String, DeliveryFailed> {
        let mut tap = None;
        let settings = self.settings;
        let interval = Duration::from_millis(settings.edit_interval_ms);
        let mut draft = Draft::new(self.silent_token);
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
                    let Some(shows) = streamer.as_deref_mut() else { continue };
                    let certain = draft.certain();
                    let long_enough = certain.chars().count() >= settings.stream_min_chars;
                    if certain != shown && (shows.has_posted() || long_enough) {
                        if !shows.has_posted() && !self.may_show().await {
                            // Its flow no longer wants it: the reply is not shown while written.
                            streamer = None;
                            continue;
                        }
                        shows.show(&certain).await?;
                        shown = certain;
                        last_show = Some(Instant::now());
                    }
                    continue;
                }
            };
            match piece {
                None => return Ok(draft.certain()),
                Some(Piece::Text(text)) => {
                    draft.push(&text);
                    first_text.get_or_insert_with(Instant::now);
                }
                Some(Piece::Retract) => draft.retract(),
            }
            fresh = true;
            if tap.is_none() {
                tap = find_tap();
            }
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

    /// Whether the reply's flow still lets it show (always, without a flow).
    async fn may_show(&self) -> bool {
        match self.gate {
            None => true,
            Some(gate) => match gate.open().await {
                Ok(()) => true,
                Err(why) => {
                    tracing::debug!(%why, "a streamed reply is not shown while written");
                    false
                }
            },
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use baton_contract::{Call, ChatKey, Platform, StubAdapter};

    use super::*;
    use crate::engine::testing::{End, Scripted, account_on, bot, bot_on, plan, target};
    use crate::engine::{Engine, Seat, TurnFailure};
    use crate::gateway::testing::{echo_config, parts};
    use crate::lanes::Lane;
    use crate::roster::Bot;
    use crate::session::{SessionKey, test_key};

    /// Shows what is certain, however short, and edits it at most every 100 ms (the pieces
    /// below come a second apart).
    const SHOWS_AT_ONCE: &str = "feedback = { stream_min_chars = 1, edit_interval_ms = 100 }\n";

    /// A reply into chat `room` through `account`, answering nothing, showing no typing.
    fn into_room(account: &Account) -> ChatReply<'_> {
        ChatReply {
            account,
            target: target("room"),
            answering: None,
            typing_at: None,
            gate: None,
            asker: None,
        }
    }

    /// `bot`'s turn in chat `room`, woken by `text` (its run named for it), answered as `reply`
    /// says.
    async fn answer(engine: &Engine, bot: &Arc<Bot>, text: &str, reply: ChatReply<'_>) -> Answered {
        let session = SessionKey {
            bot: bot.id().clone(),
            ..test_key("room")
        };
        let seat = Seat {
            session: &session,
            run_id: format!("in-{text}"),
            lane: Lane::Main,
        };
        let turn = SessionTurn::enter(engine, seat).await;
        turn.answer(plan(bot, &session, text), reply).await
    }

    fn streaming(pieces: Vec<&'static str>, end: End) -> Scripted {
        Scripted {
            pieces,
            gap: Duration::from_secs(1),
            end,
        }
    }

    fn texts(calls: &[Call]) -> Vec<String> {
        calls
            .iter()
            .filter_map(|call| match call {
                Call::Send(message) => Some(format!("send {}", message.text)),
                Call::Edit(edit) => Some(format!("edit {}", edit.text)),
                Call::Delete(_) => Some("delete".to_owned()),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn a_reply_where_posts_cannot_be_edited_is_posted_whole() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b"));
        let account = account_on(&bot(&gw.engine, "b"), &stub);
        let bot = bot(&gw.engine, "b");
        let answered = answer(&gw.engine, &bot, "hello", into_room(&account)).await;
        assert_eq!(answered.posted, Ok(vec!["m0".into()]));
        assert_eq!(texts(&stub.calls()), ["send hello"]);
    }

    #[tokio::test]
    async fn a_turn_addressed_to_the_bot_shows_typing_until_it_has_answered() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b").typing(None));
        let account = account_on(&bot(&gw.engine, "b"), &stub);
        let asked = MessageId::from("m1");
        let reply = ChatReply {
            typing_at: Some(&asked),
            ..into_room(&account)
        };
        answer(&gw.engine, &bot(&gw.engine, "b"), "hello", reply).await;
        let calls = stub.calls();
        let at = TypingTarget {
            chat: "room".into(),
            thread: None,
            message: asked.clone(),
        };
        let starts = calls
            .iter()
            .filter(|c| **c == Call::TypingStart(at.clone()));
        assert_eq!(starts.count(), 1);
        assert_eq!(texts(&calls), ["send hello"]);
        assert_eq!(
            calls.last(),
            Some(&Call::TypingStop(at)),
            "gone when it returns"
        );
    }

    #[tokio::test]
    async fn no_typing_shows_for_a_turn_not_addressed_to_the_bot_nor_for_a_bot_without_it() {
        let without = "feedback = { typing = false }\n";
        let gw = parts(&echo_config(&["a", "b"], without)).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b").typing(None));
        let a = bot(&gw.engine, "a");
        let account = account_on(&a, &stub);
        answer(&gw.engine, &a, "hello", into_room(&account)).await;
        let b = bot(&gw.engine, "b");
        let account = account_on(&b, &stub);
        let asked = MessageId::from("m1");
        let reply = ChatReply {
            typing_at: Some(&asked),
            ..into_room(&account)
        };
        answer(&gw.engine, &b, "hello again", reply).await;
        let calls = stub.calls();
        assert_eq!(texts(&calls), ["send hello", "send hello again"]);
        assert_eq!(calls.len(), 2, "no typing indicator: {calls:?}");
    }

    #[tokio::test]
    async fn a_silent_turn_posts_nothing() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b").editable(20));
        let account = account_on(&bot(&gw.engine, "b"), &stub);
        let answered = answer(
            &gw.engine,
            &bot(&gw.engine, "b"),
            "NO_REPLY",
            into_room(&account),
        )
        .await;
        assert!(matches!(answered.end, TurnEnd::Silent { .. }));
        assert_eq!(answered.posted, Ok(Vec::new()));
        assert!(stub.calls().is_empty());
    }

    /// The error reply for a turn that showed nothing is its flow's to post (or not).
    #[tokio::test]
    async fn a_failed_turn_that_showed_nothing_posts_nothing() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b").editable(20));
        let failing = bot_on(&gw.engine, "b", Scripted::ends(End::Fails));
        let account = account_on(&failing, &stub);
        let answered = answer(&gw.engine, &failing, "hi", into_room(&account)).await;
        assert!(matches!(answered.end, TurnEnd::Failed(_)));
        assert_eq!(answered.posted, Ok(Vec::new()));
        assert!(stub.calls().is_empty());
    }

    /// Shown once its first characters are certain (never what may be the silent token's
    /// start), edited as it grows, and made to hold exactly the reply at the end.
    #[tokio::test]
    async fn a_streamed_reply_shows_what_is_certain_and_ends_as_exactly_the_reply() {
        let gw = parts(&echo_config(&["b"], SHOWS_AT_ONCE)).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b").editable(20));
        let pieces = vec!["Hello there, ", "how are you today?", ""];
        let writer = bot_on(
            &gw.engine,
            "b",
            streaming(pieces, End::Says("Hello there, how are you today?")),
        );
        let account = account_on(&writer, &stub);
        let answered = answer(&gw.engine, &writer, "hi", into_room(&account)).await;
        assert_eq!(answered.posted, Ok(vec!["m0".into()]));
        let calls = texts(&stub.calls());
        let first = calls.first().map(String::as_str);
        assert_eq!(
            first,
            Some("send Hello"),
            "shown from its first certain piece"
        );
        assert!(
            calls.contains(&"edit Hello there, how are yo".to_owned()),
            "{calls:?}"
        );
        let whole = ("m0".into(), "Hello there, how are you today?".to_owned());
        assert_eq!(stub.shown(), [whole]);
    }

    #[tokio::test]
    async fn a_reply_written_within_one_interval_is_posted_whole_without_edits() {
        let gw = parts(&echo_config(&["b"], SHOWS_AT_ONCE)).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b").editable(20));
        let quick = Scripted {
            pieces: vec!["Hello there, ", "how are you today?"],
            gap: Duration::from_millis(10),
            end: End::Says("Hello there, how are you today?"),
        };
        let writer = bot_on(&gw.engine, "b", quick);
        let account = account_on(&writer, &stub);
        answer(&gw.engine, &writer, "hi", into_room(&account)).await;
        assert_eq!(
            texts(&stub.calls()),
            ["send Hello there, how are you today?"]
        );
    }

    /// A reply that began to show is not left cut off.
    #[tokio::test]
    async fn a_turn_failing_after_its_reply_began_to_show_ends_it_with_the_error_reply() {
        let gw = parts(&echo_config(&["b"], SHOWS_AT_ONCE)).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b").editable(20));
        let pieces = vec!["Hello there, ", "how are you today?"];
        let writer = bot_on(&gw.engine, "b", streaming(pieces, End::Fails));
        let account = account_on(&writer, &stub);
        let answered = answer(&gw.engine, &writer, "hi", into_room(&account)).await;
        assert!(matches!(
            answered.end,
            TurnEnd::Failed(TurnFailure::Backend(_))
        ));
        assert_eq!(answered.posted, Ok(vec!["m0".into()]));
        let error_reply = gw.engine.config().gateway.error_reply.trim();
        let ended = format!("Hello there, how are yo\n\n{error_reply}");
        assert_eq!(stub.shown(), [("m0".into(), ended)]);
    }

    #[tokio::test]
    async fn a_turn_ending_silent_takes_back_the_draft_it_showed() {
        let gw = parts(&echo_config(&["b"], SHOWS_AT_ONCE)).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b").editable(20));
        let pieces = vec!["Let me look into that for you.", ""];
        let writer = bot_on(&gw.engine, "b", streaming(pieces, End::Says("NO_REPLY")));
        let account = account_on(&writer, &stub);
        let answered = answer(&gw.engine, &writer, "hi", into_room(&account)).await;
        assert!(matches!(answered.end, TurnEnd::Silent { .. }));
        assert_eq!(answered.posted, Ok(Vec::new()));
        assert_eq!(
            texts(&stub.calls()),
            ["send Let me look into that", "delete"]
        );
        assert!(stub.shown().is_empty());
    }

    /// A `/v1` stream listening for the answer gets each new certain piece, in order, and
    /// nothing of a reply that may still turn out silent.
    #[tokio::test]
    async fn a_tap_on_the_message_gets_each_certain_piece_and_nothing_of_silence() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b"));
        let asked = MessageId::from("m1");
        let cases = [
            (
                vec!["Hello there, ", "how are you today?"],
                "Hello there, how are you today?",
                vec!["Hello", " there, how are yo"],
            ),
            (vec!["NO_", "REPLY"], "NO_REPLY", Vec::new()),
        ];
        for (pieces, says, tapped) in cases {
            let writer = bot_on(&gw.engine, "b", streaming(pieces, End::Says(says)));
            let account = account_on(&writer, &stub);
            let mut tap = gw.engine.taps().open(&account.id, &asked);
            let reply = ChatReply {
                answering: Some(&asked),
                ..into_room(&account)
            };
            answer(&gw.engine, &writer, says, reply).await;
            let mut heard = Vec::new();
            while let Ok(piece) = tap.pieces.try_recv() {
                heard.push(piece);
            }
            assert_eq!(heard, tapped);
        }
    }

    /// A chain's reply: its flow may still refuse it, and its posts must wake no bot.
    struct Chain {
        quiet: ChatKey,
        admits: bool,
    }

    #[async_trait]
    impl ReplyGate for Chain {
        fn quiet_in(&self) -> &ChatKey {
            &self.quiet
        }

        async fn open(&self) -> Result<(), NotAdmitted> {
            Ok(())
        }

        async fn admit(&self, _text: &str) -> Result<(), NotAdmitted> {
            match self.admits {
                true => Ok(()),
                false => Err(NotAdmitted("the turn moved on".into())),
            }
        }
    }

    #[tokio::test]
    async fn a_reply_its_flow_refuses_is_not_posted_and_one_it_takes_wakes_no_bot() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let stub = Arc::new(StubAdapter::new(Platform::Local, "b"));
        let b = bot(&gw.engine, "b");
        let account = account_on(&b, &stub);
        let quiet = ChatKey::new(Platform::Local, &"room".into(), None);
        for (admits, text) in [(false, "not mine"), (true, "my turn")] {
            let chain = Chain {
                quiet: quiet.clone(),
                admits,
            };
            let reply = ChatReply {
                gate: Some(&chain),
                ..into_room(&account)
            };
            let answered = answer(&gw.engine, &b, text, reply).await;
            let posted = usize::from(admits);
            assert_eq!(answered.posted.map(|ids| ids.len()), Ok(posted));
        }
        assert_eq!(texts(&stub.calls()), ["send my turn"]);
        assert!(gw.engine.own_notices().is_notice(&quiet, b.id(), "my turn"));
    }
}
