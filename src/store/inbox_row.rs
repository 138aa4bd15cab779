//! An event's inbox row: the event in a compact binary form, written at every filing and read
//! only when a stopped run is taken over.
//!
//! Every event that is not chatter is filed before it is acknowledged, on the accepting task.
//! As JSON its row cost ~7k instructions to write (serde's keys, escapes and number formatting),
//! the largest single part of taking in a mention (BENCHMARKS.md, issue 23), and every field's
//! name went into the log with every filing. Here each field is its bytes behind a length, in a
//! fixed order: about a tenth of the instructions, and under half the bytes (a test holds it). Reading back happens once in a rerun, so it checks
//! everything (lengths, UTF-8, tags, no trailing bytes) and says what it found wrong.
//!
//! Rows filed before this form are JSON; a row starting with `{` is read as JSON, so an upgrade
//! in the middle of a run loses nothing.
//!
//! The form (version 1), each string a LEB128 length then its UTF-8 bytes, an option a 0 or a 1
//! then its value:
//!
//! ```text
//! 0x01 platform account event_id? message_id chat thread? sender.id sender.name flags text
//! mentions(count, strings) leading_mentions(LEB128) reply_to? reply_to_author? timestamp_ms(i64 LE)
//! kind(0 | 1 token) files(count, each: name media_type? size?(u64 LE) source) raw(0 | 1 JSON text)
//! ```
//!
//! `flags`: bit 0 the sender is a bot, bit 1 it is this account, bit 2 `@everyone`, bit 3 a
//! group chat (else a DM).

use baton_contract::{
    ChatKind, CommandReply, FileRef, InboundEvent, InboundFile, InboundKind, MessageId, Platform,
    Sender,
};

use super::sql::{Column, Value};

/// The first byte of a row in this form (JSON rows start with `{`).
const VERSION: u8 = 1;

const SENDER_IS_BOT: u8 = 1;
const SENDER_IS_SELF: u8 = 1 << 1;
const MENTIONS_EVERYONE: u8 = 1 << 2;
const GROUP_CHAT: u8 = 1 << 3;

/// Why an inbox row could not be read back as an event.
#[derive(Debug, thiserror::Error)]
pub enum InboxRowError {
    /// A row filed as JSON (before the binary form) that is not an event.
    #[error("the row is JSON but not an event: {0}")]
    Json(#[from] serde_json::Error),
    /// A row in a form this version does not know: written by a newer baton, or damaged.
    #[error("the row starts with byte {0:#04x}, which is no form this version of baton reads")]
    UnknownForm(u8),
    /// The row ends in the middle of a field.
    #[error("the row ends in the middle of its {0}")]
    Truncated(&'static str),
    /// A text field that is not UTF-8.
    #[error("the row's {0} is not UTF-8")]
    NotUtf8(&'static str),
    /// A tag byte with no meaning for its field.
    #[error("the row's {field} has tag {tag}, which means nothing there")]
    BadTag {
        /// Which field.
        field: &'static str,
        /// The byte found.
        tag: u8,
    },
    /// A length that does not fit in a number: the row is damaged.
    #[error("the row's {0} has a length too large to be one")]
    BadLength(&'static str),
    /// A platform this version does not know.
    #[error("the row names platform `{0}`, which this version of baton does not know")]
    UnknownPlatform(String),
    /// Bytes after the last field.
    #[error("the row has {0} bytes after its last field")]
    Trailing(usize),
    /// The copy of the platform's payload kept with the event is not JSON.
    #[error("the row's copy of the platform payload is not JSON: {0}")]
    Raw(serde_json::Error),
}

/// `event` as an inbox row.
pub(crate) fn encode(event: &InboundEvent) -> Vec<u8> {
    let mut out = Row(Vec::with_capacity(128 + event.text.len()));
    out.byte(VERSION);
    out.str(event.platform.as_str());
    out.str(event.account.as_str());
    out.opt_str(event.event_id.as_deref());
    out.str(event.message_id.as_str());
    out.str(event.chat.as_str());
    out.opt_str(event.thread.as_ref().map(|t| t.as_str()));
    out.str(event.sender.id.as_str());
    out.str(&event.sender.name);
    out.byte(flags(event));
    out.str(&event.text);
    out.len(event.mentions.len());
    for mention in &event.mentions {
        out.str(mention.as_str());
    }
    out.len(event.leading_mentions);
    out.opt_str(event.reply_to.as_ref().map(MessageId::as_str));
    out.opt_str(event.reply_to_author.as_ref().map(|u| u.as_str()));
    out.0.extend_from_slice(&event.timestamp_ms.to_le_bytes());
    match &event.kind {
        InboundKind::Message => out.byte(0),
        InboundKind::Command { reply } => {
            out.byte(1);
            out.str(&reply.token);
        }
    }
    out.len(event.files.len());
    for file in &event.files {
        out.str(&file.name);
        out.opt_str(file.media_type.as_deref());
        match file.size {
            None => out.byte(0),
            Some(size) => {
                out.byte(1);
                out.0.extend_from_slice(&size.to_le_bytes());
            }
        }
        out.str(&file.source.0);
    }
    if event.raw.is_null() {
        out.byte(0);
    } else {
        out.byte(1);
        out.str(&event.raw.to_string());
    }
    out.0
}

/// The event an inbox row holds, in this form or as JSON (a row filed before it).
pub(super) fn decode(row: &[u8]) -> Result<InboundEvent, InboxRowError> {
    match row.first() {
        Some(b'{') => Ok(serde_json::from_slice(row)?),
        Some(&VERSION) => Fields { row, at: 1 }.event(),
        Some(&other) => Err(InboxRowError::UnknownForm(other)),
        None => Err(InboxRowError::Truncated("form")),
    }
}

/// A row's cell as stored: bytes, or text where SQLite keeps a row filed as JSON before this
/// form (a cell keeps its own type there; PostgreSQL's column became bytes, JSON rows with it).
pub(super) struct Stored(pub(super) Vec<u8>);

impl Column for Stored {
    fn from_value(value: Value<'_>) -> Result<Self, String> {
        match value {
            Value::Blob(bytes) => Ok(Stored(bytes.to_vec())),
            Value::Text(text) => Ok(Stored(text.as_bytes().to_vec())),
            other => Err(format!("{} where an inbox row was expected", other.kind())),
        }
    }
}

fn flags(event: &InboundEvent) -> u8 {
    let mut flags = 0;
    for (set, bit) in [
        (event.sender.is_bot, SENDER_IS_BOT),
        (event.sender.is_self, SENDER_IS_SELF),
        (event.mentions_everyone, MENTIONS_EVERYONE),
        (event.chat_kind == ChatKind::Group, GROUP_CHAT),
    ] {
        if set {
            flags |= bit;
        }
    }
    flags
}

/// A row being written.
struct Row(Vec<u8>);

impl Row {
    fn byte(&mut self, b: u8) {
        self.0.push(b);
    }

    /// A LEB128 length.
    fn len(&mut self, mut n: usize) {
        while n >= 0x80 {
            self.0.push((n as u8) | 0x80);
            n >>= 7;
        }
        self.0.push(n as u8);
    }

    fn str(&mut self, s: &str) {
        self.len(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }

    fn opt_str(&mut self, s: Option<&str>) {
        match s {
            None => self.byte(0),
            Some(s) => {
                self.byte(1);
                self.str(s);
            }
        }
    }
}

/// A row being read, from `at`.
struct Fields<'a> {
    row: &'a [u8],
    at: usize,
}

impl Fields<'_> {
    fn event(mut self) -> Result<InboundEvent, InboxRowError> {
        let platform = self.string("platform")?;
        let platform = platform
            .parse::<Platform>()
            .map_err(|_| InboxRowError::UnknownPlatform(platform))?;
        let account = self.string("account")?.into();
        let event_id = self.opt_string("event id")?;
        let message_id = self.string("message id")?.into();
        let chat = self.string("chat")?.into();
        let thread = self.opt_string("thread")?.map(Into::into);
        let sender_id = self.string("sender id")?.into();
        let sender_name = self.string("sender name")?;
        let flags = self.byte("flags")?;
        let text = self.string("text")?;
        let mentions = (0..self.len("mentions")?)
            .map(|_| self.string("mentions").map(Into::into))
            .collect::<Result<_, _>>()?;
        let leading_mentions = self.len("leading mentions")?;
        let reply_to = self.opt_string("reply-to message")?.map(Into::into);
        let reply_to_author = self.opt_string("reply-to author")?.map(Into::into);
        let timestamp_ms = i64::from_le_bytes(self.array("timestamp")?);
        let kind = match self.byte("kind")? {
            0 => InboundKind::Message,
            1 => InboundKind::Command {
                reply: CommandReply {
                    token: self.string("command reply token")?,
                },
            },
            tag => return Err(InboxRowError::BadTag { field: "kind", tag }),
        };
        let files = (0..self.len("files")?)
            .map(|_| self.file())
            .collect::<Result<_, _>>()?;
        let raw = match self.byte("platform payload")? {
            0 => serde_json::Value::Null,
            1 => serde_json::from_str(&self.string("platform payload")?)
                .map_err(InboxRowError::Raw)?,
            tag => {
                let field = "platform payload";
                return Err(InboxRowError::BadTag { field, tag });
            }
        };
        if self.at != self.row.len() {
            return Err(InboxRowError::Trailing(self.row.len() - self.at));
        }
        Ok(InboundEvent {
            platform,
            account,
            event_id,
            message_id,
            chat,
            chat_kind: if flags & GROUP_CHAT != 0 {
                ChatKind::Group
            } else {
                ChatKind::Dm
            },
            thread,
            sender: Sender {
                id: sender_id,
                name: sender_name,
                is_bot: flags & SENDER_IS_BOT != 0,
                is_self: flags & SENDER_IS_SELF != 0,
            },
            text,
            mentions,
            leading_mentions,
            mentions_everyone: flags & MENTIONS_EVERYONE != 0,
            reply_to,
            reply_to_author,
            timestamp_ms,
            kind,
            files,
            raw,
        })
    }

    fn file(&mut self) -> Result<InboundFile, InboxRowError> {
        let name = self.string("file name")?;
        let media_type = self.opt_string("file media type")?;
        let size = match self.byte("file size")? {
            0 => None,
            1 => Some(u64::from_le_bytes(self.array("file size")?)),
            tag => {
                return Err(InboxRowError::BadTag {
                    field: "file size",
                    tag,
                });
            }
        };
        let source = FileRef(self.string("file source")?);
        Ok(InboundFile {
            name,
            media_type,
            size,
            source,
        })
    }

    fn take(&mut self, n: usize, field: &'static str) -> Result<&[u8], InboxRowError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.row.len())
            .ok_or(InboxRowError::Truncated(field))?;
        let bytes = &self.row[self.at..end];
        self.at = end;
        Ok(bytes)
    }

    fn byte(&mut self, field: &'static str) -> Result<u8, InboxRowError> {
        Ok(self.take(1, field)?[0])
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], InboxRowError> {
        let mut array = [0; N];
        array.copy_from_slice(self.take(N, field)?);
        Ok(array)
    }

    fn len(&mut self, field: &'static str) -> Result<usize, InboxRowError> {
        let mut n: usize = 0;
        for shift in (0..usize::BITS).step_by(7) {
            let b = self.byte(field)?;
            let bits = usize::from(b & 0x7f);
            if bits << shift >> shift != bits {
                return Err(InboxRowError::BadLength(field));
            }
            n |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(InboxRowError::BadLength(field))
    }

    fn string(&mut self, field: &'static str) -> Result<String, InboxRowError> {
        let n = self.len(field)?;
        let bytes = self.take(n, field)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| InboxRowError::NotUtf8(field))
    }

    fn opt_string(&mut self, field: &'static str) -> Result<Option<String>, InboxRowError> {
        match self.byte(field)? {
            0 => Ok(None),
            1 => self.string(field).map(Some),
            tag => Err(InboxRowError::BadTag { field, tag }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_contract::{AccountId, ChatId, UserId};
    use serde_json::json;

    fn plain() -> InboundEvent {
        InboundEvent::text_message(
            Platform::Slack,
            AccountId::from("snark"),
            ChatId::from("C0001"),
            ChatKind::Group,
            Sender {
                id: UserId::from("U1"),
                name: "Ada".into(),
                is_bot: false,
                is_self: false,
            },
            MessageId::from("1700000000.000100"),
            "@snark summarise the thread, please",
        )
    }

    /// Every field set to something other than its default, so a field the form forgets or
    /// swaps with another shows.
    fn full() -> InboundEvent {
        let mut event = plain();
        event.platform = Platform::Feishu;
        event.event_id = Some("Ev0A1B".into());
        event.chat_kind = ChatKind::Dm;
        event.thread = Some("1700000000.000001".into());
        event.sender.is_bot = true;
        event.sender.is_self = true;
        event.text = "héllo \u{0}\u{1f600} ".repeat(40);
        event.mentions = vec![UserId::from("U2"), UserId::from("U3")];
        event.leading_mentions = 1;
        event.mentions_everyone = true;
        event.reply_to = Some(MessageId::from("om_9"));
        event.reply_to_author = Some(UserId::from("U9"));
        event.timestamp_ms = -1_700_000_000_123;
        event.kind = InboundKind::Command {
            reply: CommandReply {
                token: "https://hooks.example/r/1".into(),
            },
        };
        event.files = vec![
            InboundFile {
                name: "report.pdf".into(),
                media_type: Some("application/pdf".into()),
                size: Some(u64::MAX),
                source: FileRef("F1".into()),
            },
            InboundFile {
                name: "image".into(),
                media_type: None,
                size: None,
                source: FileRef("img_v2_1".into()),
            },
        ];
        event.raw = json!({"event": {"type": "message", "n": [1, 2.5, null]}});
        event
    }

    /// The event's every field, compared through its JSON (the type has no `PartialEq`).
    fn same(a: &InboundEvent, b: &InboundEvent) {
        assert_eq!(
            serde_json::to_value(a).unwrap(),
            serde_json::to_value(b).unwrap()
        );
    }

    #[test]
    fn every_field_comes_back_as_it_was_written() {
        let on = |platform| {
            let mut event = plain();
            event.platform = platform;
            event
        };
        for event in [plain(), full()].into_iter().chain(Platform::ALL.map(on)) {
            let row = encode(&event);
            assert_eq!(row[0], VERSION);
            same(&decode(&row).unwrap(), &event);
        }
    }

    #[test]
    fn a_row_is_smaller_than_the_event_as_json() {
        let event = plain();
        let json = serde_json::to_vec(&event).unwrap();
        let row = encode(&event);
        assert!(
            row.len() * 2 < json.len(),
            "{} vs {}",
            row.len(),
            json.len()
        );
    }

    #[test]
    fn a_row_filed_as_json_before_this_form_is_still_read() {
        let event = full();
        let json = serde_json::to_vec(&event).unwrap();
        same(&decode(&json).unwrap(), &event);
    }

    #[test]
    fn a_damaged_row_is_refused_with_what_is_wrong() {
        let row = encode(&full());
        for cut in 1..row.len() {
            assert!(
                matches!(decode(&row[..cut]), Err(InboxRowError::Truncated(_))),
                "cut at {cut}"
            );
        }
        let mut longer = row.clone();
        longer.push(0);
        assert!(matches!(decode(&longer), Err(InboxRowError::Trailing(1))));
        assert!(matches!(decode(&[2]), Err(InboxRowError::UnknownForm(2))));
        let overlong = [[VERSION].as_slice(), &[0xff; 10], &[0x01]].concat();
        assert!(matches!(
            decode(&overlong),
            Err(InboxRowError::BadLength("platform"))
        ));
        assert!(matches!(decode(&[]), Err(InboxRowError::Truncated(_))));
        assert!(matches!(
            decode(b"{\"not\": \"an event\"}"),
            Err(InboxRowError::Json(_))
        ));
        let mut unknown = vec![VERSION];
        unknown.extend_from_slice(&[7]);
        unknown.extend_from_slice(b"myspace");
        let err = decode(&unknown).unwrap_err();
        assert!(err.to_string().contains("`myspace`"), "{err}");
    }

    #[test]
    fn lengths_past_one_byte_are_read_back() {
        let mut event = plain();
        event.text = "x".repeat(100_000);
        same(&decode(&encode(&event)).unwrap(), &event);
    }
}
