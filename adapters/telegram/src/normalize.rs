//! A Bot API `Update` to an [`InboundEvent`] (pipeline step 1).
//!
//! - The chat is its numeric id; a private chat is a DM (its id is the person's), a group or
//!   supergroup a group, and a forum topic (`message_thread_id` of a topic message) a thread.
//! - Mentions come from the entities (offsets in UTF-16 code units): a `mention` (`@username`)
//!   of a baton bot, a `text_mention` (a user without a username, by id), and a bot command
//!   addressed to a bot (`/ask@snark_bot`), which mentions it. `/baton@snark_bot help` reaches the
//!   admin step as `/baton help` when this account is the one addressed.
//! - A reply to a message names that message's author, so a reply to the bot's own post wakes it.
//! - The text is the message's text or a file's caption; a document or the largest size of a
//!   photo is an [`InboundFile`] fetched later with `getFile`.
//! - `event_id` is the `update_id`; the message id is `<chat>:<message>` ([`crate::ids`]), so a
//!   redelivered update and the same message seen again are one event.

use baton_contract::{
    AccountId, ChatId, ChatKind, FileRef, InboundEvent, InboundFile, InboundKind, Platform, Sender,
    ThreadId, UserId,
};
use serde::Deserialize;
use serde_json::Value;

use crate::directory::Directory;
use crate::ids::message_id;

/// One update, as far as baton reads it.
#[derive(Debug, Deserialize)]
pub(crate) struct Update {
    pub(crate) update_id: i64,
    #[serde(default)]
    message: Option<Message>,
}

#[derive(Debug, Deserialize)]
struct Message {
    message_id: i64,
    #[serde(default)]
    message_thread_id: Option<i64>,
    #[serde(default)]
    is_topic_message: bool,
    #[serde(default)]
    from: Option<User>,
    chat: Chat,
    date: i64,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    caption: Option<String>,
    #[serde(default)]
    entities: Vec<Entity>,
    #[serde(default)]
    caption_entities: Vec<Entity>,
    #[serde(default)]
    reply_to_message: Option<Box<Message>>,
    #[serde(default)]
    document: Option<Document>,
    #[serde(default)]
    photo: Vec<PhotoSize>,
}

#[derive(Debug, Deserialize)]
struct User {
    id: i64,
    #[serde(default)]
    is_bot: bool,
    #[serde(default)]
    first_name: String,
    #[serde(default)]
    last_name: Option<String>,
    #[serde(default)]
    username: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Chat {
    id: i64,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Deserialize)]
struct Entity {
    #[serde(rename = "type")]
    kind: String,
    offset: usize,
    length: usize,
    #[serde(default)]
    user: Option<User>,
}

#[derive(Debug, Deserialize)]
struct Document {
    file_id: String,
    #[serde(default)]
    file_name: Option<String>,
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default)]
    file_size: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct PhotoSize {
    file_id: String,
    #[serde(default)]
    width: u64,
    #[serde(default)]
    height: u64,
    #[serde(default)]
    file_size: Option<u64>,
}

/// The account reading the update.
pub(crate) struct Me<'a> {
    pub(crate) account: &'a AccountId,
    pub(crate) id: i64,
    pub(crate) username: &'a str,
    pub(crate) directory: &'a Directory,
}

/// Why an update is not an event.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Skip {
    /// Not a new message (an edit, a channel post, a member change, a callback...).
    NotAMessage,
    /// A message in a channel: baton answers in private chats and groups.
    Channel,
    /// A message with no author (an anonymous admin is still attributed to the group).
    NoSender,
}

/// Normalize `update` for the account `me`.
pub(crate) fn update(me: &Me<'_>, raw: &Value) -> Result<InboundEvent, Skip> {
    let update: Update = serde_json::from_value(raw.clone()).map_err(|_| Skip::NotAMessage)?;
    let message = update.message.ok_or(Skip::NotAMessage)?;
    let chat_kind = match message.chat.kind.as_str() {
        "private" => ChatKind::Dm,
        "group" | "supergroup" => ChatKind::Group,
        _ => return Err(Skip::Channel),
    };
    let from = message.from.as_ref().ok_or(Skip::NoSender)?;
    let (text, entities) = match (&message.text, &message.caption) {
        (Some(text), _) => (text.clone(), &message.entities),
        (None, Some(caption)) => (caption.clone(), &message.caption_entities),
        (None, None) => (String::new(), &message.entities),
    };
    let read = read_entities(me, &text, entities);
    let reply_to = message.reply_to_message.as_deref();
    let thread = message
        .message_thread_id
        .filter(|_| message.is_topic_message)
        .map(|id| ThreadId(id.to_string()));
    Ok(InboundEvent {
        platform: Platform::Telegram,
        account: me.account.clone(),
        event_id: Some(update.update_id.to_string()),
        message_id: message_id(message.chat.id, message.message_id),
        chat: ChatId(message.chat.id.to_string()),
        chat_kind,
        thread,
        sender: Sender {
            id: UserId(from.id.to_string()),
            name: display_name(from),
            is_bot: from.is_bot,
            is_self: from.id == me.id,
        },
        text: read.text,
        mentions: read.mentions,
        leading_mentions: read.leading,
        mentions_everyone: false,
        reply_to: reply_to.map(|parent| message_id(message.chat.id, parent.message_id)),
        reply_to_author: reply_to
            .and_then(|parent| parent.from.as_ref())
            .map(|author| UserId(author.id.to_string())),
        timestamp_ms: message.date.saturating_mul(1000),
        kind: InboundKind::Message,
        files: files(&message),
        raw: raw.clone(),
    })
}

fn display_name(user: &User) -> String {
    match (&user.last_name, &user.username) {
        (Some(last), _) => format!("{} {last}", user.first_name),
        (None, Some(name)) if user.first_name.is_empty() => name.clone(),
        _ => user.first_name.clone(),
    }
}

/// What the entities of a text say.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Read {
    /// The text, with this account's `@username` taken off a command addressed to it.
    pub(crate) text: String,
    /// Structural mentions, in order, as user ids.
    pub(crate) mentions: Vec<UserId>,
    /// How many of them open the text.
    pub(crate) leading: usize,
}

/// Read mentions and commands out of `text` by its entities.
fn read_entities(me: &Me<'_>, text: &str, entities: &[Entity]) -> Read {
    let mut mentions = Vec::new();
    let mut leading = 0;
    let mut opening = true;
    let mut last_end = 0;
    // The byte range of a command's `@me` suffix, removed from the text afterwards.
    let mut strip = None;
    for entity in entities {
        let Some((start, end)) = byte_range(text, entity.offset, entity.length) else {
            continue;
        };
        let named = &text[start..end];
        let who = match entity.kind.as_str() {
            "mention" => resolve(me, named),
            "text_mention" => entity.user.as_ref().map(|u| u.id),
            "bot_command" => named.split_once('@').and_then(|(_, bot)| {
                let who = resolve(me, bot);
                if who == Some(me.id) && strip.is_none() {
                    strip = Some((start + named.len() - bot.len() - 1, end));
                }
                who
            }),
            _ => continue,
        };
        if opening && !only_separators(&text[last_end.min(start)..start]) {
            opening = false;
        }
        last_end = end;
        match who {
            Some(id) => {
                mentions.push(UserId(id.to_string()));
                if opening && entity.kind != "bot_command" {
                    leading += 1;
                }
            }
            None => opening = false,
        }
        if entity.kind == "bot_command" {
            opening = false;
        }
    }
    let text = match strip {
        Some((from, to)) => format!("{}{}", &text[..from], &text[to..]),
        None => text.to_owned(),
    };
    Read {
        text,
        mentions,
        leading,
    }
}

/// The user id of `@name`: this account, or another baton bot.
fn resolve(me: &Me<'_>, name: &str) -> Option<i64> {
    let name = name.trim_start_matches('@');
    if name.eq_ignore_ascii_case(me.username) {
        Some(me.id)
    } else {
        me.directory.id_of(name)
    }
}

fn only_separators(between: &str) -> bool {
    between
        .chars()
        .all(|c| c.is_whitespace() || c == ',' || c == ':')
}

/// The byte range of an entity given in UTF-16 code units.
fn byte_range(text: &str, offset: usize, length: usize) -> Option<(usize, usize)> {
    let mut units = 0;
    let mut start = None;
    for (byte, c) in text.char_indices() {
        if units == offset {
            start = Some(byte);
        }
        if units == offset + length {
            return Some((start?, byte));
        }
        units += c.len_utf16();
    }
    if units == offset + length {
        return Some((start.unwrap_or(text.len()), text.len()));
    }
    None
}

/// The files a message carries: a document, or the largest size of a photo.
fn files(message: &Message) -> Vec<InboundFile> {
    if let Some(doc) = &message.document {
        return vec![InboundFile {
            name: doc.file_name.clone().unwrap_or_else(|| "document".into()),
            media_type: doc.mime_type.clone(),
            size: doc.file_size,
            source: FileRef(doc.file_id.clone()),
        }];
    }
    message
        .photo
        .iter()
        .max_by_key(|p| p.width * p.height)
        .map(|photo| InboundFile {
            name: "photo.jpg".into(),
            media_type: Some("image/jpeg".into()),
            size: photo.file_size,
            source: FileRef(photo.file_id.clone()),
        })
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SNARK: i64 = 1001;
    const CAID: i64 = 1002;

    fn me<'a>(account: &'a AccountId, directory: &'a Directory) -> Me<'a> {
        Me {
            account,
            id: SNARK,
            username: "snark_bot",
            directory,
        }
    }

    fn group_message(text: &str, entities: Value) -> Value {
        json!({"update_id": 7, "message": {
            "message_id": 42, "date": 1_700_000_000,
            "from": {"id": 55, "is_bot": false, "first_name": "Ada", "last_name": "L"},
            "chat": {"id": -1001, "type": "supergroup", "title": "room"},
            "text": text, "entities": entities}})
    }

    fn read(raw: &Value) -> InboundEvent {
        let account = AccountId::from("snark");
        let directory = Directory::new();
        directory.add("caid_bot", CAID);
        update(&me(&account, &directory), raw).unwrap()
    }

    #[test]
    fn mentions_come_from_entities_in_utf16_units() {
        // "é" is one UTF-16 unit, "🙂" two: the offsets after them count units, not bytes.
        let text = "@snark_bot 🙂 ask @caid_bot é";
        let event = read(&group_message(
            text,
            json!([{"type": "mention", "offset": 0, "length": 10},
                   {"type": "mention", "offset": 18, "length": 9}]),
        ));
        assert_eq!(event.mentions, [UserId::from("1001"), UserId::from("1002")]);
        assert_eq!(event.leading_mentions, 1, "caid is named in the body");
        assert_eq!(event.message_id.as_str(), "-1001:42");
        assert_eq!(event.event_id.as_deref(), Some("7"));
        assert_eq!(event.chat_kind, ChatKind::Group);
        assert_eq!(event.sender.name, "Ada L");
        assert_eq!(event.timestamp_ms, 1_700_000_000_000);
    }

    #[test]
    fn a_command_addressed_to_the_bot_mentions_it() {
        let event = read(&group_message(
            "/baton@snark_bot status",
            json!([{"type": "bot_command", "offset": 0, "length": 16}]),
        ));
        assert_eq!(event.mentions, [UserId::from("1001")]);
        assert_eq!(event.text, "/baton status");
        let other = read(&group_message(
            "/ask@caid_bot hi",
            json!([{"type": "bot_command", "offset": 0, "length": 13}]),
        ));
        assert_eq!(other.mentions, [UserId::from("1002")]);
        assert_eq!(
            other.text, "/ask@caid_bot hi",
            "only this bot's own name is taken off"
        );
    }

    #[test]
    fn a_reply_names_the_author_and_a_topic_is_a_thread() {
        let raw = json!({"update_id": 8, "message": {
            "message_id": 43, "date": 1, "message_thread_id": 9, "is_topic_message": true,
            "from": {"id": 55, "is_bot": false, "first_name": "Ada"},
            "chat": {"id": -1001, "type": "supergroup"},
            "text": "and then?",
            "reply_to_message": {"message_id": 40, "date": 1,
                "from": {"id": SNARK, "is_bot": true, "first_name": "Snark", "username": "snark_bot"},
                "chat": {"id": -1001, "type": "supergroup"}, "text": "earlier"}}});
        let event = read(&raw);
        assert_eq!(event.reply_to.unwrap().as_str(), "-1001:40");
        assert_eq!(event.reply_to_author, Some(UserId::from("1001")));
        assert_eq!(event.thread, Some(ThreadId::from("9")));
    }

    #[test]
    fn a_caption_and_its_photo_are_read_and_channels_are_skipped() {
        let raw = json!({"update_id": 9, "message": {
            "message_id": 44, "date": 1,
            "from": {"id": 55, "is_bot": false, "first_name": "Ada"},
            "chat": {"id": 55, "type": "private"},
            "caption": "what is this",
            "photo": [{"file_id": "small", "width": 90, "height": 90},
                      {"file_id": "big", "width": 800, "height": 600, "file_size": 5000}]}});
        let event = read(&raw);
        assert_eq!(event.chat_kind, ChatKind::Dm);
        assert_eq!(event.text, "what is this");
        assert_eq!(event.files[0].source, FileRef("big".into()));
        let account = AccountId::from("snark");
        let directory = Directory::new();
        let channel = json!({"update_id": 10, "channel_post": {"message_id": 1, "date": 1,
            "chat": {"id": -100, "type": "channel"}, "text": "news"}});
        assert_eq!(
            update(&me(&account, &directory), &channel).unwrap_err(),
            Skip::NotAMessage
        );
    }
}
