//! `baton export --chat PLATFORM:CHAT` and `GET /api/chats/{platform}/{chat}/export`: a whole
//! multi-bot room in time order (SPEC section 13), as JSON lines or Markdown, read from the
//! store a page at a time (`store/room_export.rs`) and handed on line by line, so a large
//! room never sits in memory. Both front doors print the same lines. Only what was said is
//! given, never a transcript entry's meta, a raw payload or anything from the configuration:
//! no secret can appear.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use futures::{Stream, StreamExt, TryStreamExt, stream};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::store::{RoomCursor, RoomLine, RoomLineKind, RoomQuery, Store, StoreError};

/// Lines read from the store at a time.
const PAGE: usize = 256;

/// The export's parameters, as `GET /api/chats/{platform}/{chat}/export` takes them.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ExportParams {
    /// From when: ms since the epoch, an RFC 3339 time, or an age (`24h`, `7d`).
    pub since: Option<String>,
    /// Up to when, written the same way.
    pub until: Option<String>,
    /// `jsonl` (the default) or `markdown`.
    pub format: Option<String>,
}

/// How the room is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExportFormat {
    /// One JSON object per line.
    #[default]
    Jsonl,
    /// A Markdown list, a line per item.
    Markdown,
}

impl ExportFormat {
    /// The body's content type.
    pub fn content_type(self) -> &'static str {
        match self {
            ExportFormat::Jsonl => "application/x-ndjson",
            ExportFormat::Markdown => "text/markdown; charset=utf-8",
        }
    }
}

/// An export's parameters that do not parse, with what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadExport(String);

/// What to export, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// The room and the times.
    pub room: RoomQuery,
    /// How to write it.
    pub format: ExportFormat,
}

impl ExportParams {
    /// The export of `platform`'s chat `chat`, with ages read at `now_ms`.
    pub fn resolve(&self, platform: &str, chat: &str, now_ms: i64) -> Result<Export, BadExport> {
        if platform.is_empty() || chat.is_empty() {
            return Err(BadExport(format!(
                "name the chat as PLATFORM:CHAT (e.g. slack:C0123), not `{platform}:{chat}`"
            )));
        }
        let format = match self.format.as_deref().map(str::trim) {
            None | Some("" | "jsonl") => ExportFormat::Jsonl,
            Some("markdown" | "md") => ExportFormat::Markdown,
            Some(other) => {
                return Err(BadExport(format!(
                    "format `{other}` is unknown; write `jsonl` or `markdown`"
                )));
            }
        };
        let when = |name: &str, text: &Option<String>| match text.as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some(text) => moment(text, now_ms)
                .map(Some)
                .map_err(|why| BadExport(format!("{name}: {why}"))),
        };
        Ok(Export {
            room: RoomQuery {
                platform: platform.to_owned(),
                chat: chat.to_owned(),
                since_ms: when("since", &self.since)?,
                until_ms: when("until", &self.until)?,
            },
            format,
        })
    }
}

/// `text` as ms since the epoch: itself, an RFC 3339 time, or an age before `now_ms`.
fn moment(text: &str, now_ms: i64) -> Result<i64, String> {
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    if let Ok(time) = DateTime::parse_from_rfc3339(text) {
        return Ok(time.timestamp_millis());
    }
    let hint = "write ms since the epoch, a time such as 2026-01-31T12:00:00Z, \
                or an age such as \"30m\", \"24h\" or \"7d\"";
    let units = [
        ('s', 1),
        ('m', 60),
        ('h', 3600),
        ('d', 86_400),
        ('w', 604_800),
    ];
    let age: Duration = crate::timing::parse_span(text, &units, hint)?;
    Ok(now_ms.saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX)))
}

/// The room as written lines (each ending in a newline), read a page at a time as the reader
/// takes them.
pub fn lines(store: Store, export: Export) -> impl Stream<Item = Result<String, StoreError>> {
    let Export { room, format } = export;
    let heading = match format {
        ExportFormat::Jsonl => None,
        ExportFormat::Markdown => Some(Ok(format!(
            "# {}:{}\n\n",
            markdown_text(&room.platform),
            markdown_text(&room.chat)
        ))),
    };
    let pages = stream::try_unfold(Some(RoomCursor::start()), move |after| {
        let (store, room) = (store.clone(), room.clone());
        async move {
            let Some(after) = after else {
                return Ok::<_, StoreError>(None);
            };
            let page = store.room_page(room, after, PAGE).await?;
            let next = match page.last() {
                Some(last) if page.len() == PAGE => Some(last.cursor()),
                _ => None,
            };
            Ok(if page.is_empty() {
                None
            } else {
                Some((stream::iter(page.into_iter().map(Ok)), next))
            })
        }
    });
    let body = pages.try_flatten().map_ok(move |line| match format {
        ExportFormat::Jsonl => format!("{}\n", to_json(&line)),
        ExportFormat::Markdown => to_markdown(&line),
    });
    stream::iter(heading).chain(body)
}

fn time(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.to_rfc3339_opts(SecondsFormat::Millis, true),
    )
}

fn author_kind(line: &RoomLine) -> &'static str {
    match line.origin.as_str() {
        "human" => "person",
        "gateway" => "baton",
        _ => "bot",
    }
}

/// One line as a JSON object: its time, kind, author and author kind, and what the kind has.
pub fn to_json(line: &RoomLine) -> Value {
    let mut out = json!({
        "ts_ms": line.ts_ms,
        "time": time(line.ts_ms),
        "kind": line.kind.as_str(),
        "author": line.author,
        "author_kind": author_kind(line),
    });
    let more = match line.kind {
        RoomLineKind::Message => json!({
            "author_name": line.detail,
            "chat": line.place,
            "message_id": line.id,
            "text": line.text,
        }),
        RoomLineKind::Turn => json!({
            "entry": line.detail,
            "session": line.place,
            "text": line.text,
        }),
        RoomLineKind::Delivery => json!({
            "to": line.to,
            "run_id": line.id,
            "state": line.detail,
            "text": line.text,
            "reply": line.reply,
        }),
        RoomLineKind::Chain => json!({
            "to": line.to,
            "chain": line.place,
            "entry": line.detail,
            "text": line.text,
        }),
        RoomLineKind::Artifact => json!({
            "artifact": line.id,
            "name": line.text,
            "sha256": line.detail,
        }),
    };
    if let (Value::Object(out), Value::Object(more)) = (&mut out, more) {
        out.extend(more);
    }
    out
}

/// One line as a Markdown list item: time, author, what it is, and the words, each further line
/// of them indented under it.
pub fn to_markdown(line: &RoomLine) -> String {
    let who = markdown_text(&line.author);
    let to = line
        .to
        .as_deref()
        .map(|to| format!(" → {}", markdown_text(to)))
        .unwrap_or_default();
    let head = match line.kind {
        RoomLineKind::Message => format!("{who} ({})", author_kind(line)),
        RoomLineKind::Turn => format!("{who} {}", line.detail),
        RoomLineKind::Delivery => format!("{who}{to} delivery {} {}", line.id, line.detail),
        RoomLineKind::Chain => format!("{who}{to} chain {} {}", line.place, line.detail),
        RoomLineKind::Artifact => format!("{who} artifact sha256 {}", line.detail),
    };
    let mut out = format!(
        "- `{}` **{head}**: {}\n",
        time(line.ts_ms),
        indented(&line.text)
    );
    if let Some(reply) = &line.reply {
        out.push_str(&format!("  - reply: {}\n", indented(reply)));
    }
    out
}

/// `text` with its further lines indented under a list item.
fn indented(text: &str) -> String {
    text.trim_end().replace('\n', "\n    ")
}

/// An id or a name, its Markdown emphasis and code marks taken out.
fn markdown_text(text: &str) -> String {
    text.replace(['*', '`'], "")
}
