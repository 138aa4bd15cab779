//! The local hub: in-process chat rooms where humans and baton bots talk without any platform.
//!
//! A room behaves like a group channel: a message posted there reaches every local bot account
//! (its author's own account too, flagged `is_self`), and a bot's reply is posted back into the
//! room, where the other bots see it as a bot-authored message. That is enough to exercise
//! activation, silence, history and every bot-message guard on a laptop or in a test.
//! Direct messages (terminal chat, `/v1/chat/completions`) are chats named `dm:<user>`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use baton_contract::{
    AccountId, ChatId, ChatKind, InboundEvent, InboundKind, MessageId, Platform, Sender, ThreadId,
    UserId,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::mirror::now_ms;

/// How many messages a room keeps for `GET`; older ones live on in the transcripts.
const ROOM_LOG_LIMIT: usize = 2000;

/// One message as the room shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoomMessage {
    /// Position in the room, from 1.
    pub seq: u64,
    /// The message id.
    pub id: String,
    /// Who wrote it: a human's name or a bot's id.
    pub author: String,
    /// Written by a bot.
    pub is_bot: bool,
    /// The text.
    pub text: String,
    /// The thread it belongs to.
    pub thread: Option<String>,
    /// The message it answers.
    pub reply_to: Option<String>,
    /// When, in ms since the epoch.
    pub ts_ms: i64,
}

/// A message to post.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Post {
    /// Author: a human's name, or a bot's id when a bot posts.
    pub sender: String,
    /// The text; `@name` mentions a bot or person.
    pub text: String,
    /// Message id; a repeated id is a platform redelivery (generated when absent).
    #[serde(default)]
    pub message_id: Option<String>,
    /// Delivery id, as Slack and Feishu send one.
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

#[derive(Default)]
struct Room {
    next_seq: u64,
    log: Vec<RoomMessage>,
}

struct Member {
    account: AccountId,
    bot: String,
    inbox: mpsc::UnboundedSender<InboundEvent>,
}

/// Every local room and the local bot accounts that listen to them.
#[derive(Default)]
pub struct LocalHub {
    rooms: Mutex<HashMap<String, Room>>,
    members: Mutex<Vec<Member>>,
    /// Idempotency keys already posted, with the message id they produced.
    posted: Mutex<HashMap<String, String>>,
    /// Events handed to an inbox and not yet accepted by the pipeline.
    pending: AtomicUsize,
}

impl LocalHub {
    /// An empty hub.
    pub fn new() -> Arc<LocalHub> {
        Arc::new(LocalHub::default())
    }

    /// Add a bot account to every room; returns its inbox.
    pub fn join(&self, account: AccountId, bot: String) -> mpsc::UnboundedReceiver<InboundEvent> {
        let (inbox, rx) = mpsc::unbounded_channel();
        let mut members = self.members.lock().expect("hub poisoned");
        members.push(Member {
            account,
            bot,
            inbox,
        });
        rx
    }

    /// Whether `name` is a local bot's id (humans may not post under it).
    pub fn is_bot(&self, name: &str) -> bool {
        let members = self.members.lock().expect("hub poisoned");
        members.iter().any(|m| m.bot == name)
    }

    /// Post to a room and hand the message to every member account. A repeated `message_id` is
    /// shown once but handed out again, as a platform redelivery would be.
    pub fn post(&self, room: &str, post: Post) -> RoomMessage {
        let message = self.record(room, &post);
        let members = self.members.lock().expect("hub poisoned");
        for member in members.iter() {
            let event = self.event(room, &post, &message, member);
            // A closed inbox means that account stopped; the others still get the message.
            if member.inbox.send(event).is_ok() {
                self.pending.fetch_add(1, Ordering::SeqCst);
            }
        }
        message
    }

    /// A bot posts `text` (its reply). The same idempotency key never posts twice.
    pub fn bot_post(&self, room: &str, bot: &str, key: &str, mut post: Post) -> RoomMessage {
        if let Some(id) = self.posted.lock().expect("hub poisoned").get(key)
            && let Some(existing) = self.find(room, id)
        {
            return existing;
        }
        post.sender = bot.to_owned();
        post.is_bot = true;
        let message = if room.starts_with("dm:") {
            self.record(room, &post)
        } else {
            self.post(room, post)
        };
        self.posted
            .lock()
            .expect("hub poisoned")
            .insert(key.to_owned(), message.id.clone());
        message
    }

    /// A human's direct message to one bot account, recorded in the DM's log; the caller runs
    /// the event through the pipeline itself and waits for the answer.
    pub fn direct(&self, account: &AccountId, user: &str, text: &str) -> Option<InboundEvent> {
        let room = format!("dm:{user}");
        let post = Post {
            sender: user.to_owned(),
            text: text.to_owned(),
            ..Post::default()
        };
        let message = self.record(&room, &post);
        let members = self.members.lock().expect("hub poisoned");
        let member = members.iter().find(|m| &m.account == account)?;
        Some(self.event(&room, &post, &message, member))
    }

    /// An adapter took one event from its inbox and the pipeline accepted it.
    pub(crate) fn taken(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }

    /// Events posted but not yet accepted by the pipeline (for "settled" checks in tests).
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    /// The room's messages after `after_seq` (all when `None`), oldest first.
    pub fn messages(&self, room: &str, after_seq: Option<u64>) -> Vec<RoomMessage> {
        let rooms = self.rooms.lock().expect("hub poisoned");
        rooms.get(room).map_or_else(Vec::new, |r| {
            r.log
                .iter()
                .filter(|m| after_seq.is_none_or(|after| m.seq > after))
                .cloned()
                .collect()
        })
    }

    fn find(&self, room: &str, id: &str) -> Option<RoomMessage> {
        let rooms = self.rooms.lock().expect("hub poisoned");
        rooms.get(room)?.log.iter().find(|m| m.id == id).cloned()
    }

    fn record(&self, room: &str, post: &Post) -> RoomMessage {
        let mut rooms = self.rooms.lock().expect("hub poisoned");
        let room = rooms.entry(room.to_owned()).or_default();
        if let Some(id) = &post.message_id
            && let Some(seen) = room.log.iter().find(|m| &m.id == id)
        {
            return seen.clone();
        }
        room.next_seq += 1;
        let message = RoomMessage {
            seq: room.next_seq,
            id: post
                .message_id
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()),
            author: post.sender.clone(),
            is_bot: post.is_bot,
            text: post.text.clone(),
            thread: post.thread.clone(),
            reply_to: post.reply_to.clone(),
            ts_ms: now_ms(),
        };
        room.log.push(message.clone());
        if room.log.len() > ROOM_LOG_LIMIT {
            room.log.remove(0);
        }
        message
    }

    fn author_of(&self, room: &str, id: &str) -> Option<UserId> {
        self.find(room, id).map(|m| UserId(m.author))
    }

    fn event(
        &self,
        room: &str,
        post: &Post,
        message: &RoomMessage,
        member: &Member,
    ) -> InboundEvent {
        let mentions = mentions(&post.text);
        let chat_kind = if room.starts_with("dm:") {
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
            reply_to_author: post
                .reply_to
                .as_deref()
                .and_then(|id| self.author_of(room, id)),
            timestamp_ms: message.ts_ms,
            kind: InboundKind::Message,
            raw: serde_json::Value::Null,
        }
    }
}

/// The `@name` tokens of a post.
#[derive(Debug, PartialEq, Eq)]
struct Mentions {
    /// In order of appearance.
    found: Vec<UserId>,
    /// How many of `found` open the text, before any other word (the addressees).
    leading: usize,
    /// `@everyone`, `@here` or `@all` appears.
    everyone: bool,
}

/// Read the `@name` tokens of `text`.
fn mentions(text: &str) -> Mentions {
    let mut out = Mentions {
        found: Vec::new(),
        leading: 0,
        everyone: false,
    };
    let mut opening = true;
    for word in text.split(|c: char| c.is_whitespace() || c == ',' || c == ':') {
        if word.is_empty() {
            continue;
        }
        let Some(name) = word.strip_prefix('@') else {
            opening = false;
            continue;
        };
        let name = name.trim_end_matches(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'));
        match name {
            "" => opening = false,
            "everyone" | "here" | "all" => out.everyone = true,
            _ => {
                out.found.push(UserId(name.to_owned()));
                if opening {
                    out.leading += 1;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(sender: &str, text: &str) -> Post {
        Post {
            sender: sender.into(),
            text: text.into(),
            ..Post::default()
        }
    }

    #[test]
    fn mentions_are_structural_tokens() {
        let m = mentions("@snark, can you ask @caid: what about @here?");
        assert_eq!(m.found, vec![UserId::from("snark"), UserId::from("caid")]);
        assert_eq!(m.leading, 1, "snark is addressed, caid only named");
        assert!(m.everyone);
        assert_eq!(mentions("email me at a@b.c").found, Vec::<UserId>::new());
        assert_eq!(mentions(" @snark @caid: hi @sec").leading, 2);
        assert_eq!(mentions("can @caid help?").leading, 0);
    }

    #[test]
    fn a_post_reaches_every_member_and_the_author_is_self() {
        let hub = LocalHub::new();
        let mut a = hub.join("snark".into(), "snark".into());
        let mut b = hub.join("caid".into(), "caid".into());
        let human = hub.post("room", post("alice", "@snark hi"));
        let ev = a.try_recv().unwrap();
        assert_eq!(ev.message_id.as_str(), human.id);
        assert!(!ev.sender.is_self && !ev.sender.is_bot);
        b.try_recv().unwrap();
        let reply = hub.bot_post(
            "room",
            "snark",
            "k1",
            Post {
                reply_to: Some(human.id.clone()),
                ..post("", "hello")
            },
        );
        assert!(a.try_recv().unwrap().sender.is_self);
        let seen_by_caid = b.try_recv().unwrap();
        assert!(seen_by_caid.sender.is_bot && !seen_by_caid.sender.is_self);
        assert_eq!(seen_by_caid.reply_to_author, Some(UserId::from("alice")));
        let again = hub.bot_post("room", "snark", "k1", post("", "hello"));
        assert_eq!(again, reply, "an idempotency key posted twice");
        assert_eq!(hub.messages("room", None).len(), 2);
        assert_eq!(hub.messages("room", Some(1)), vec![reply]);
    }

    #[test]
    fn a_redelivered_message_id_is_shown_once_but_handed_out_again() {
        let hub = LocalHub::new();
        let mut a = hub.join("snark".into(), "snark".into());
        let p = Post {
            message_id: Some("m1".into()),
            ..post("alice", "hi")
        };
        hub.post("room", p.clone());
        hub.post("room", p);
        assert_eq!(hub.messages("room", None).len(), 1);
        assert!(a.try_recv().is_ok() && a.try_recv().is_ok());
    }
}
