//! A whole room, in time order, a page at a time: its messages (`room_messages`, every one
//! with its author, kept with the pipeline's decisions), each bot's turns (the transcript of
//! the bots' sessions in the chat, and of the turns that answered the room's deliveries
//! elsewhere: what the bots said and did; the messages they heard are the room's messages and
//! the deliveries' requests), the bot-to-bot deliveries its bots began or answered, with their replies,
//! its chains' turns, and the artifacts its bots made (name and sha256). One ordered query per
//! page, resumed after the last line read ([`RoomCursor`]), so `baton export` never holds more
//! than a page (SPEC section 13). Only what was said: never an entry's meta or raw payload.

use super::sql::{Db, DbError, Row, args};
use super::stored_name::parse_column;
use super::{Store, StoreError};

stored_name! {
    /// What a line of the room's record is; the names sort in the order lines of the same
    /// millisecond are given.
    RoomLineKind, "room line kind" {
        /// An artifact a bot made: name and sha256.
        Artifact = "artifact",
        /// A turn of a chain: a post, a handoff, or baton's note.
        Chain = "chain",
        /// A bot-to-bot delivery (`sessions_send`) with its reply.
        Delivery = "delivery",
        /// A message in the chat, by a person or a bot.
        Message = "message",
        /// What a bot said or did in its turn: a reply, a tool call, a failure.
        Turn = "turn",
    }
}

/// Which room, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomQuery {
    /// The platform's name.
    pub platform: String,
    /// The platform's chat id (its threads are included).
    pub chat: String,
    /// From this time on, ms since the epoch.
    pub since_ms: Option<i64>,
    /// Up to this time, ms since the epoch.
    pub until_ms: Option<i64>,
}

/// Where a page ends: the next page starts after this line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomCursor {
    ts_ms: i64,
    kind: String,
    n: i64,
    key: String,
}

impl RoomCursor {
    /// Before every line.
    pub fn start() -> RoomCursor {
        RoomCursor {
            ts_ms: i64::MIN,
            kind: String::new(),
            n: i64::MIN,
            key: String::new(),
        }
    }
}

/// One line of the room's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomLine {
    /// When, ms since the epoch.
    pub ts_ms: i64,
    /// What it is.
    pub kind: RoomLineKind,
    /// A message's platform id, a delivery's run id, an artifact's id (empty for the rest).
    pub id: String,
    /// Who: a person's id, `bot:<id>`, or `baton`.
    pub author: String,
    /// `human`, `bot` or `gateway`.
    pub origin: String,
    /// To whom: a delivery's target, a chain handoff's recipient.
    pub to: Option<String>,
    /// What was said: a message, a turn's words, a delivery's request, an artifact's name.
    pub text: String,
    /// A delivery's reply.
    pub reply: Option<String>,
    /// A message's author name, a turn's entry kind, a delivery's state, a chain entry's
    /// kind, an artifact's sha256.
    pub detail: String,
    /// Where in the room: a message's chat (and thread), a turn's session, a delivery's run,
    /// a chain's id, an artifact's id.
    pub place: String,
    cursor: RoomCursor,
}

impl RoomLine {
    /// The cursor that reads on after this line.
    pub fn cursor(&self) -> RoomCursor {
        self.cursor.clone()
    }
}

/// Every part of the record, in one shape: `ts_ms, kind, n, k` order the lines.
const UNION: &str = "
    SELECT m.ts_ms AS ts_ms, 'message' AS kind, m.id AS n, m.message_id AS k,
           m.author AS author, m.origin AS origin, CAST(NULL AS TEXT) AS target,
           m.text AS text, CAST(NULL AS TEXT) AS reply, m.author_name AS detail,
           m.chat AS place
      FROM room_messages m WHERE m.room = ?10
    UNION ALL
    SELECT t.ts_ms, 'turn', t.id, '', 'bot:' || s.bot, 'bot', NULL, t.text, NULL, t.kind,
           t.session
      FROM transcript t JOIN sessions s ON s.key = t.session
     WHERE s.platform = ?1 AND s.chat = ?2 AND t.kind <> 'inbound'
    UNION ALL
    SELECT t.ts_ms, 'turn', t.id, '', 'bot:' || d.target, 'bot', NULL, t.text, NULL, t.kind,
           t.session
      FROM deliveries d JOIN transcript t
        ON t.session = d.target_session AND t.run_id = d.run_id
     WHERE d.sender_session IN (SELECT key FROM sessions WHERE platform = ?1 AND chat = ?2)
       AND d.target_session NOT IN (SELECT key FROM sessions WHERE platform = ?1 AND chat = ?2)
       AND t.kind <> 'inbound'
    UNION ALL
    SELECT d.created_ms, 'delivery', 0, d.run_id, 'bot:' || d.sender, 'bot',
           'bot:' || d.target, d.message, d.reply, d.state, d.run_id
      FROM deliveries d
     WHERE d.sender_session IN (SELECT key FROM sessions WHERE platform = ?1 AND chat = ?2)
        OR d.target_session IN (SELECT key FROM sessions WHERE platform = ?1 AND chat = ?2)
    UNION ALL
    SELECT c.ts_ms, 'chain', c.id, '',
           CASE WHEN c.sender = 'baton' THEN 'baton' ELSE 'bot:' || c.sender END,
           CASE WHEN c.sender = 'baton' THEN 'gateway' ELSE 'bot' END,
           CASE WHEN c.recipient IS NULL THEN NULL ELSE 'bot:' || c.recipient END,
           c.content, NULL, c.kind, c.chain
      FROM chain_messages c JOIN chains h ON h.id = c.chain
     WHERE h.origin_platform = ?1 AND h.origin_chat = ?2
    UNION ALL
    SELECT a.created_ms, 'artifact', 0, a.id, 'bot:' || a.bot, 'bot', NULL, a.name, NULL,
           a.sha256, a.id
      FROM artifacts a
     WHERE a.session IN (SELECT key FROM sessions WHERE platform = ?1 AND chat = ?2)";

fn from_row(row: &Row<'_>) -> Result<RoomLine, DbError> {
    let cursor = RoomCursor {
        ts_ms: row.get(0)?,
        kind: row.get(1)?,
        n: row.get(2)?,
        key: row.get(3)?,
    };
    Ok(RoomLine {
        ts_ms: cursor.ts_ms,
        kind: parse_column(row, 1)?,
        id: cursor.key.clone(),
        author: row.get(4)?,
        origin: row.get(5)?,
        to: row.get(6)?,
        text: row.get(7)?,
        reply: row.get(8)?,
        detail: row.get(9)?,
        place: row.get(10)?,
        cursor,
    })
}

/// Up to `limit` lines of `room` after `after`, in time order.
fn page(
    db: Db<'_>,
    room: &RoomQuery,
    after: &RoomCursor,
    limit: usize,
) -> Result<Vec<RoomLine>, DbError> {
    let sql = format!(
        "SELECT ts_ms, kind, n, k, author, origin, target, text, reply, detail, place
           FROM ({UNION}) r
          WHERE ts_ms >= ?3 AND ts_ms <= ?4
            AND (ts_ms > ?5 OR (ts_ms = ?5 AND (kind > ?6 OR (kind = ?6
                 AND (n > ?7 OR (n = ?7 AND k > ?8))))))
          ORDER BY ts_ms, kind, n, k
          LIMIT ?9"
    );
    let whole = format!("{}:{}", room.platform, room.chat);
    db.query_map(
        &sql,
        args![
            &room.platform,
            &room.chat,
            room.since_ms.unwrap_or(i64::MIN),
            room.until_ms.unwrap_or(i64::MAX),
            after.ts_ms,
            &after.kind,
            after.n,
            &after.key,
            i64::try_from(limit).unwrap_or(i64::MAX),
            &whole,
        ],
        from_row,
    )
}

impl Store {
    /// Up to `limit` lines of `room` after `after`, in time order; fewer than `limit` when
    /// the record ends.
    pub async fn room_page(
        &self,
        room: RoomQuery,
        after: RoomCursor,
        limit: usize,
    ) -> Result<Vec<RoomLine>, StoreError> {
        self.read(move |db| page(db, &room, &after, limit)).await
    }
}
