//! The local hub: chat rooms where humans and baton bots talk without any platform.
//!
//! A room behaves like a group channel: a message posted there reaches every local bot account
//! (its author's own account too, flagged `is_self`), and a bot's reply is posted back into the
//! room, where the other bots see it as a bot-authored message. That is enough to exercise
//! activation, silence, history and every bot-message guard on a laptop or in a test.
//! Direct messages (terminal chat, `/v1/chat/completions`) are chats named `dm:<user>`.
//!
//! The rooms' messages live in the store (`store::local_rooms`), so every instance sharing a
//! database shows every room, and a bot's reply written by whichever instance ran its turn is
//! in the room for all. A message is handed to the bot accounts of the instance it was posted
//! through, once: every instance runs every bot's local account, and the pipeline's dedupe and
//! the session's home decide where a turn runs, as for a platform's message.
//!
//! Everything is bounded by `[local]`: at most `max_rooms` group rooms (a post that would open
//! one more is refused with [`HubRefusal::TooManyRooms`]), as many direct-message logs (the
//! least recently active one is dropped for a new one), the last `room_log_messages` messages of
//! each (older ones roll off; the transcripts keep every word), and posts of at most
//! `max_message_bytes`. The bot replies' idempotency keys are kept for the last
//! [`POSTED_KEYS`] posts.
//!
//! A person's post is answered only once every bot account's pipeline has recorded it
//! ([`Accepted::recorded`]): the room API's 202 means recorded, as a webhook's 2xx does. When
//! the store cannot record it, the post is refused, for the client to send again (with the
//! same `message_id`, it is then one message).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::time::Duration;

use baton_contract::{
    AccountId, ChatId, ChatKind, InboundEvent, InboundKind, MessageId, NotTaken, Platform, Sender,
    ThreadId, UserId,
};
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot};

use super::mentions::mentions;
use super::sender_name::{NameRefused, NameRules};
use crate::config::LocalConfig;
use crate::field_bound::{self, Cap, FieldTooLong};
pub use crate::store::RoomMessage;
use crate::store::{NewRoomMessage, RoomBounds, RoomWrite, Store, StoreError};
use crate::trace::Handoff;

/// How many bot posts' idempotency keys are remembered. A key guards a delivery retried within
/// seconds; thousands of posts later nobody retries it.
pub const POSTED_KEYS: usize = 4096;

/// Longest room name, message id, delivery id, thread or reply-to a post may carry, in bytes:
/// each is kept in the room's log and the store, so none may be larger than an id needs.
pub use crate::field_bound::MAX_ID_BYTES;

/// How long a post waits for the bot accounts to record it before it is refused.
const RECORD_WAIT: Duration = Duration::from_secs(10);

/// An event handed to a bot account, and where to say whether the gateway recorded it.
pub struct Handed {
    /// The event.
    pub event: InboundEvent,
    /// Told what the account's pipeline made of it; `None` when nobody waits (a bot's post).
    pub recorded: Option<oneshot::Sender<Result<(), NotTaken>>>,
    /// The span a person's post was made under (its request's `traceparent`): the pipeline
    /// runs in that trace.
    pub trace: Handoff,
}

/// A person's post, shown in its room, on its way to the bot accounts.
#[derive(Debug)]
pub struct Accepted {
    /// The message as the room shows it.
    pub message: RoomMessage,
    recorded: Vec<oneshot::Receiver<Result<(), NotTaken>>>,
}

impl Accepted {
    /// The message, once every bot account has recorded it; else why not.
    pub async fn recorded(self) -> Result<RoomMessage, NotRecorded> {
        let all = async {
            for recorded in self.recorded {
                match recorded.await {
                    Ok(Ok(())) => {}
                    Ok(Err(not)) => return Err(NotRecorded::Refused(not)),
                    Err(_) => return Err(NotRecorded::Stopped),
                }
            }
            Ok(())
        };
        match tokio::time::timeout(RECORD_WAIT, all).await {
            Ok(Ok(())) => Ok(self.message),
            Ok(Err(not)) => Err(not),
            Err(_) => Err(NotRecorded::TimedOut),
        }
    }
}

/// Why a post was not recorded; each means: send it again later.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotRecorded {
    /// The gateway refused it (its store cannot write, or it is stopping).
    #[error("{0}; the message was not recorded, send it again shortly (same message_id)")]
    Refused(NotTaken),
    /// A bot account stopped before it took the message.
    #[error("a bot account stopped before it took the message; send it again shortly")]
    Stopped,
    /// The accounts did not record it in time.
    #[error(
        "the message was not recorded within {}s; send it again shortly (same message_id)",
        RECORD_WAIT.as_secs()
    )]
    TimedOut,
}

/// Why the hub did not take a post. Each says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubRefusal {
    /// Opening the room would pass `[local] max_rooms`.
    #[error(
        "the local hub already holds its {max} rooms ([local] max_rooms); post in an existing \
         room, or raise the cap and restart"
    )]
    TooManyRooms {
        /// `[local] max_rooms`.
        max: usize,
    },
    /// The text is over `[local] max_message_bytes`.
    #[error(
        "the message is {len} bytes, over the room's limit of {max} ([local] max_message_bytes); \
         send less text"
    )]
    TooLong {
        /// The text's length in bytes.
        len: usize,
        /// `[local] max_message_bytes`.
        max: usize,
    },
    /// The sender name could pass for someone else's, or forge a line (`sender_name.rs`).
    #[error(transparent)]
    BadSender(#[from] NameRefused),
    /// An id-like field (room, message id, delivery id, thread, reply-to) over
    /// [`MAX_ID_BYTES`].
    #[error(transparent)]
    FieldTooLong(#[from] FieldTooLong),
    /// No running local account for that bot.
    #[error("the bot's local account is not running")]
    NotRunning,
    /// The store could not keep the message (logged with the reason).
    #[error(
        "the message was not recorded: the gateway's store is failing (see its log); send it \
         again shortly (same message_id)"
    )]
    StoreFailing,
}

/// Whether `name` may speak in a room, whatever bots and admins there are (the hub also
/// checks against its own: [`LocalHub::check_sender`]).
pub fn check_sender(name: &str) -> Result<(), HubRefusal> {
    Ok(NameRules::default().check(name)?)
}

/// A message to post.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Post {
    /// Author: a human's name, or a bot's id when a bot posts.
    pub sender: String,
    /// The text; `@name` mentions a bot or person.
    pub text: String,
    /// Message id; a repeated id is a platform redelivery (when absent, the delivery id,
    /// else generated).
    #[serde(default)]
    pub message_id: Option<String>,
    /// Delivery id, as Slack and Feishu send one. A post that has one and no message id is
    /// that message redelivered when the id repeats, as on those platforms.
    #[serde(default)]
    pub event_id: Option<String>,
    /// Post into this thread.
    #[serde(default)]
    pub thread: Option<String>,
    /// Answer this message.
    #[serde(default)]
    pub reply_to: Option<String>,
    /// The author is a bot (set by the hub for bot replies).
    #[serde(skip)]
    pub is_bot: bool,
}

fn is_dm(room: &str) -> bool {
    room.starts_with("dm:")
}

struct Member {
    account: AccountId,
    bot: String,
    inbox: mpsc::UnboundedSender<Handed>,
}

/// Every local room and the local bot accounts that listen to them.
pub struct LocalHub {
    limits: LocalConfig,
    names: NameRules,
    store: Store,
    members: Mutex<Vec<Member>>,
    /// Events handed to an inbox and not yet accepted by the pipeline.
    pending: AtomicUsize,
}

impl LocalHub {
    /// A hub keeping its rooms in `store`, bounded by `limits`.
    pub fn new(limits: &LocalConfig, store: Store) -> Arc<LocalHub> {
        LocalHub::with_names(limits, store, NameRules::default())
    }

    /// A hub keeping its rooms in `store`, bounded by `limits`, refusing sender names by
    /// `names`.
    pub fn with_names(limits: &LocalConfig, store: Store, names: NameRules) -> Arc<LocalHub> {
        Arc::new(LocalHub {
            limits: limits.clone(),
            names,
            store,
            members: Mutex::default(),
            pending: AtomicUsize::new(0),
        })
    }

    /// Add a bot account to every room; returns its inbox.
    pub fn join(&self, account: AccountId, bot: String) -> mpsc::UnboundedReceiver<Handed> {
        let (inbox, rx) = mpsc::unbounded_channel();
        let mut members = self.members.lock().expect("hub poisoned");
        members.push(Member {
            account,
            bot,
            inbox,
        });
        rx
    }

    /// Whether `name` may speak in a room: see `sender_name.rs`; a local bot's id is refused
    /// too.
    pub fn check_sender(&self, name: &str) -> Result<(), HubRefusal> {
        self.names.check(name)?;
        let members = self.members.lock().expect("hub poisoned");
        if members.iter().any(|m| m.bot.eq_ignore_ascii_case(name)) {
            return Err(NameRefused::Reserved(name.to_owned()).into());
        }
        Ok(())
    }

    /// A person posts to a room; the message is handed to every member account. A repeated
    /// `message_id` is shown once but handed out again, as a platform redelivery would be.
    /// Refused over `[local]`'s bounds, or from a name that could forge a line. The post is
    /// recorded once [`Accepted::recorded`] says so.
    pub async fn post(&self, room: &str, post: Post) -> Result<Accepted, HubRefusal> {
        self.check_sender(&post.sender)?;
        self.check_length(&post.text)?;
        check_ids(room, &post)?;
        let message = self.keep(room, &post, None).await?.message()?;
        Ok(self
            .deliver(room, &post, message, Some(Handoff::here()))
            .await)
    }

    /// Hand the kept `message` to every member account. A person's post (`person`: the span
    /// it was made under) waits: each account says when its pipeline recorded it
    /// ([`Accepted::recorded`]).
    async fn deliver(
        &self,
        room: &str,
        post: &Post,
        message: RoomMessage,
        person: Option<Handoff>,
    ) -> Accepted {
        let wait = person.is_some();
        let trace = person.unwrap_or_default();
        let answered = self.author_of(room, post.reply_to.as_deref()).await;
        let members = self.members.lock().expect("hub poisoned");
        let mut waits = Vec::new();
        for member in members.iter() {
            let event = event(room, post, &message, member, answered.clone());
            let (tell, told) = oneshot::channel();
            let handed = Handed {
                event,
                recorded: wait.then_some(tell),
                trace: trace.clone(),
            };
            // A closed inbox means that account stopped; the others still get the message.
            if member.inbox.send(handed).is_ok() {
                self.pending.fetch_add(1, Ordering::SeqCst);
                if wait {
                    waits.push(told);
                }
            }
        }
        Accepted {
            message,
            recorded: waits,
        }
    }

    fn check_length(&self, text: &str) -> Result<(), HubRefusal> {
        let max = self.limits.max_message_bytes;
        if text.len() > max {
            return Err(HubRefusal::TooLong {
                len: text.len(),
                max,
            });
        }
        Ok(())
    }

    /// A bot posts `text` (its reply) and learns the message's id. The same idempotency key
    /// never posts twice, whichever instance posts it. Bot replies come in chunks the adapter
    /// already sized, so only the room count or the store can refuse one.
    pub async fn bot_post(
        &self,
        room: &str,
        bot: &str,
        key: &str,
        mut post: Post,
    ) -> Result<String, HubRefusal> {
        post.sender = bot.to_owned();
        post.is_bot = true;
        let message = match self.keep(room, &post, Some(key)).await? {
            Kept::Message(message) => message,
            Kept::Posted(id) => return Ok(id),
        };
        let id = message.id.clone();
        if !is_dm(room) {
            self.deliver(room, &post, message, None).await;
        }
        Ok(id)
    }

    /// A human's direct message to one bot account, recorded in the DM's log; the caller runs
    /// the event through the pipeline itself and waits for the answer. The log keeps at most
    /// `max_message_bytes` of the text; the event carries all of it.
    pub async fn direct(
        &self,
        account: &AccountId,
        user: &str,
        text: &str,
    ) -> Result<InboundEvent, HubRefusal> {
        self.check_sender(user)?;
        let room = format!("dm:{user}");
        let post = Post {
            sender: user.to_owned(),
            text: text.to_owned(),
            ..Post::default()
        };
        let message = self.keep(&room, &post, None).await?.message()?;
        let members = self.members.lock().expect("hub poisoned");
        let member = members
            .iter()
            .find(|m| &m.account == account)
            .ok_or(HubRefusal::NotRunning)?;
        Ok(event(&room, &post, &message, member, None))
    }

    /// An adapter took one event from its inbox and the pipeline accepted it.
    pub(crate) fn taken(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }

    /// Events posted but not yet accepted by the pipeline (for "settled" checks in tests).
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// The room's messages after `after_seq` (all when `None`), oldest first, whichever
    /// instance they were posted through.
    pub async fn messages(
        &self,
        room: &str,
        after_seq: Option<u64>,
    ) -> Result<Vec<RoomMessage>, StoreError> {
        self.store.room_messages(room, after_seq).await
    }

    /// How many group rooms and direct-message logs the store holds, and how many bot posts'
    /// idempotency keys it remembers.
    pub async fn counts(&self) -> Result<(usize, usize, usize), StoreError> {
        self.store.room_counts().await
    }

    fn bounds(&self) -> RoomBounds {
        RoomBounds {
            max_rooms: self.limits.max_rooms,
            log_messages: self.limits.room_log_messages,
            posted_keys: POSTED_KEYS,
        }
    }

    /// Keeps `post` in the room, unless `key` was posted already.
    async fn keep(&self, room: &str, post: &Post, key: Option<&str>) -> Result<Kept, HubRefusal> {
        let message = NewRoomMessage {
            id: post.message_id.clone().or_else(|| post.event_id.clone()),
            author: post.sender.clone(),
            is_bot: post.is_bot,
            text: shown(&post.text, self.limits.max_message_bytes),
            thread: post.thread.clone(),
            reply_to: post.reply_to.clone(),
            key: key.map(str::to_owned),
        };
        match self
            .store
            .keep_room_message(room, message, self.bounds())
            .await
        {
            Ok(RoomWrite::Kept(message)) => Ok(Kept::Message(message)),
            Ok(RoomWrite::AlreadyPosted(id)) => Ok(Kept::Posted(id)),
            Ok(RoomWrite::Full) => Err(HubRefusal::TooManyRooms {
                max: self.limits.max_rooms,
            }),
            Err(err) => {
                tracing::error!(%room, %err, "a local room message could not be kept");
                Err(HubRefusal::StoreFailing)
            }
        }
    }

    /// Who wrote the message `reply_to` answers, while the room's log keeps it.
    async fn author_of(&self, room: &str, reply_to: Option<&str>) -> Option<UserId> {
        let id = reply_to?;
        match self.store.room_message(room, id).await {
            Ok(found) => found.map(|m| UserId(m.author)),
            Err(err) => {
                tracing::warn!(%room, %err, "could not read the message a local post answers");
                None
            }
        }
    }
}

/// What [`LocalHub::keep`] did with a post.
enum Kept {
    /// It is in the room: new, or the message already there with its id.
    Message(RoomMessage),
    /// Its idempotency key already posted this message id.
    Posted(String),
}

impl Kept {
    /// The message of a post without a key (which is always kept).
    fn message(self) -> Result<RoomMessage, HubRefusal> {
        match self {
            Kept::Message(message) => Ok(message),
            Kept::Posted(_) => Err(HubRefusal::StoreFailing),
        }
    }
}

/// The event `member` is handed for `message`.
fn event(
    room: &str,
    post: &Post,
    message: &RoomMessage,
    member: &Member,
    reply_to_author: Option<UserId>,
) -> InboundEvent {
    let mentions = mentions(&post.text);
    let chat_kind = if is_dm(room) {
        ChatKind::Dm
    } else {
        ChatKind::Group
    };
    InboundEvent {
        platform: Platform::Local,
        account: member.account.clone(),
        event_id: post.event_id.clone(),
        message_id: MessageId(message.id.clone()),
        chat: ChatId(room.to_owned()),
        chat_kind,
        thread: post.thread.clone().map(ThreadId),
        sender: Sender {
            id: UserId(post.sender.clone()),
            name: post.sender.clone(),
            is_bot: post.is_bot,
            is_self: post.is_bot && post.sender == member.bot,
        },
        text: post.text.clone(),
        mentions: mentions.found,
        leading_mentions: mentions.leading,
        mentions_everyone: mentions.everyone,
        reply_to: post.reply_to.clone().map(MessageId),
        reply_to_author,
        timestamp_ms: message.ts_ms,
        kind: InboundKind::Message,
        files: Vec::new(),
        raw: serde_json::Value::Null,
    }
}

/// Every id-like field of a post into `room` fits [`MAX_ID_BYTES`].
fn check_ids(room: &str, post: &Post) -> Result<(), HubRefusal> {
    let fields = [
        ("room", Some(room)),
        ("message_id", post.message_id.as_deref()),
        ("event_id", post.event_id.as_deref()),
        ("thread", post.thread.as_deref()),
        ("reply_to", post.reply_to.as_deref()),
    ];
    for (field, value) in fields {
        field_bound::check_str(field, value, Cap::Id)?;
    }
    Ok(())
}

/// What a log keeps of `text`: at most `max` bytes, cut at a character boundary and marked.
fn shown(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::TestDb;

    fn post(sender: &str, text: &str) -> Post {
        Post {
            sender: sender.into(),
            text: text.into(),
            ..Post::default()
        }
    }

    /// A hub on a fresh SQLite store (the store's own tests run on both engines).
    async fn hub_with(limits: LocalConfig) -> (TestDb, Arc<LocalHub>) {
        let db = TestDb::sqlite();
        let store = db.open().await;
        (db, LocalHub::new(&limits, store))
    }

    async fn hub() -> (TestDb, Arc<LocalHub>) {
        hub_with(LocalConfig::default()).await
    }

    async fn small_hub() -> (TestDb, Arc<LocalHub>) {
        hub_with(LocalConfig {
            max_rooms: 2,
            room_log_messages: 3,
            max_message_bytes: 8,
        })
        .await
    }

    #[tokio::test]
    async fn a_post_reaches_every_member_and_the_author_is_self() {
        let (_db, hub) = hub().await;
        let mut a = hub.join("snark".into(), "snark".into());
        let mut b = hub.join("caid".into(), "caid".into());
        let human = hub
            .post("room", post("alice", "@snark hi"))
            .await
            .unwrap()
            .message;
        let ev = a.try_recv().unwrap().event;
        assert_eq!(ev.message_id.as_str(), human.id);
        assert!(!ev.sender.is_self && !ev.sender.is_bot);
        b.try_recv().unwrap();
        let reply = hub
            .bot_post(
                "room",
                "snark",
                "k1",
                Post {
                    reply_to: Some(human.id.clone()),
                    ..post("", "hello")
                },
            )
            .await
            .unwrap();
        assert!(a.try_recv().unwrap().event.sender.is_self);
        let seen_by_caid = b.try_recv().unwrap().event;
        assert!(seen_by_caid.sender.is_bot && !seen_by_caid.sender.is_self);
        assert_eq!(seen_by_caid.reply_to_author, Some(UserId::from("alice")));
        let again = hub.bot_post("room", "snark", "k1", post("", "hello")).await;
        assert_eq!(again, Ok(reply.clone()), "an idempotency key posted twice");
        assert_eq!(hub.messages("room", None).await.unwrap().len(), 2);
        assert_eq!(hub.messages("room", Some(1)).await.unwrap()[0].id, reply);
    }

    /// A post with a message id, or with only a delivery id (a platform event redelivered, as
    /// the pipeline's dedupe goes by the message id), sent twice is one message; a post with
    /// neither is a new message each time.
    #[tokio::test]
    async fn a_redelivery_is_shown_once_but_handed_out_again() {
        let by_message = Post {
            message_id: Some("m1".into()),
            ..post("alice", "hi")
        };
        let by_event = Post {
            event_id: Some("Ev1".into()),
            ..post("alice", "hi")
        };
        for (p, id) in [(by_message, "m1"), (by_event, "Ev1")] {
            let (_db, hub) = hub().await;
            let mut a = hub.join("snark".into(), "snark".into());
            hub.post("room", p.clone()).await.unwrap();
            hub.post("room", p).await.unwrap();
            hub.post("room", post("alice", "hi")).await.unwrap();
            assert_eq!(hub.messages("room", None).await.unwrap().len(), 2, "{id}");
            for _ in 0..2 {
                assert_eq!(a.try_recv().unwrap().event.message_id.as_str(), id);
            }
        }
    }

    #[tokio::test]
    async fn a_room_past_the_cap_is_refused_and_a_log_keeps_its_newest_messages() {
        let (_db, hub) = small_hub().await;
        hub.post("one", post("alice", "a")).await.unwrap();
        hub.post("two", post("alice", "b")).await.unwrap();
        assert_eq!(
            hub.post("three", post("alice", "c")).await.unwrap_err(),
            HubRefusal::TooManyRooms { max: 2 }
        );
        assert!(hub.messages("three", None).await.unwrap().is_empty());
        for text in ["1", "2", "3", "4", "5"] {
            hub.post("one", post("alice", text)).await.unwrap();
        }
        let shown: Vec<_> = hub
            .messages("one", None)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.text)
            .collect();
        assert_eq!(shown, ["3", "4", "5"], "older messages roll off");
        assert_eq!(
            hub.post("one", post("alice", "123456789"))
                .await
                .unwrap_err(),
            HubRefusal::TooLong { len: 9, max: 8 }
        );
    }

    #[tokio::test]
    async fn every_id_a_post_carries_is_bounded() {
        let (_db, hub) = hub().await;
        let long = "i".repeat(MAX_ID_BYTES + 1);
        let posts = [
            (
                "message_id",
                Post {
                    message_id: Some(long.clone()),
                    ..post("alice", "hi")
                },
            ),
            (
                "event_id",
                Post {
                    event_id: Some(long.clone()),
                    ..post("alice", "hi")
                },
            ),
            (
                "thread",
                Post {
                    thread: Some(long.clone()),
                    ..post("alice", "hi")
                },
            ),
            (
                "reply_to",
                Post {
                    reply_to: Some(long.clone()),
                    ..post("alice", "hi")
                },
            ),
        ];
        for (field, p) in posts {
            let HubRefusal::FieldTooLong(refused) = hub.post("room", p).await.unwrap_err() else {
                panic!("{field} not refused as too long");
            };
            assert_eq!(
                (refused.field.as_str(), refused.len),
                (field, MAX_ID_BYTES + 1)
            );
        }
        assert!(matches!(
            hub.post(&long, post("alice", "hi")).await.unwrap_err(),
            HubRefusal::FieldTooLong(refused) if refused.field == "room"
        ));
        assert!(hub.messages("room", None).await.unwrap().is_empty());
        let fits = "i".repeat(MAX_ID_BYTES);
        let p = Post {
            message_id: Some(fits.clone()),
            thread: Some(fits),
            ..post("alice", "hi")
        };
        assert!(hub.post("room", p).await.is_ok());
    }

    #[tokio::test]
    async fn direct_logs_past_the_cap_drop_the_least_recently_active() {
        let (_db, hub) = small_hub().await;
        let account = AccountId::from("snark");
        let _inbox = hub.join(account.clone(), "snark".into());
        for user in ["u1", "u2", "u1", "u3"] {
            hub.direct(&account, user, "a long direct message")
                .await
                .unwrap();
        }
        assert_eq!(hub.counts().await.unwrap(), (0, 2, 0));
        assert!(
            hub.messages("dm:u2", None).await.unwrap().is_empty(),
            "u2 was least recent"
        );
        let kept = hub.messages("dm:u1", None).await.unwrap();
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].text, "a long d…", "the log keeps max_message_bytes");
    }

    #[tokio::test]
    async fn sender_names_that_could_forge_a_line_are_refused() {
        let (_db, hub) = hub().await;
        for name in [
            "",
            " ",
            "ali\0ce",
            "bob\u{1b}[2J",
            "eve\u{202e}nimda",
            &"x".repeat(65),
        ] {
            assert!(
                matches!(
                    hub.post("room", post(name, "hi")).await.unwrap_err(),
                    HubRefusal::BadSender(_)
                ),
                "{name:?}"
            );
            let account = AccountId::from("snark");
            assert!(hub.direct(&account, name, "hi").await.is_err(), "{name:?}");
        }
        assert!(hub.messages("room", None).await.unwrap().is_empty());
        assert_eq!(hub.counts().await.unwrap(), (0, 0, 0));
        assert!(hub.post("room", post("Zoë Wang", "hi")).await.is_ok());
    }
}
