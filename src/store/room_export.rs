//! A whole room, in time order, a page at a time: its messages (`room_messages`, every one
//! with its author, kept with the pipeline's decisions), each bot's turns (the transcript of
//! the bots' sessions in the chat, and of the turns that answered the room's deliveries
//! elsewhere: what the bots said and did; the messages they heard are the room's messages and
//! the deliveries' requests), the bot-to-bot deliveries its bots began or answered, with their
//! replies, its chains' turns, and the artifacts its bots made (name and sha256). Only what was
//! said: never an entry's meta or raw payload.
//!
//! A page is read after the last line of the one before ([`RoomCursor`]) without sorting the
//! rest of the room: each part of the record (the room's messages; each of its sessions'
//! turns, artifacts and deliveries; each chain's turns) is read on an index in the page's own
//! order, from the cursor on, at most a page of it (migration 033); the parts are merged here
//! and the first page of the merge kept. A page costs the same early or late in a large room:
//! a bounded read per session and chain of the room, never a sort of what is left. The one
//! part not bounded so is the turns that answered the room's deliveries in another chat: they
//! are found through the room's deliveries, all of them, and sorted (a delivery's turn may end
//! long after the delivery timed out); those are few beside the room's own lines (SPEC
//! section 13).

use super::sql::{Db, DbError, Row, Value, args};
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

/// Where a page ends: the next page starts after this line. Lines are in this order: time,
/// kind, then a number and a key that tell lines of the same time and kind apart.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
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

/// One part of the record, read for one key (a room, a session, a chain). Its query selects
/// `ts_ms, kind, n, k, author, origin, target, text, reply, detail, place` and takes the key
/// as `?1`, the window as `?2` (from, or the cursor's time if later) and `?3` (to), the
/// cursor as `?4` to `?7` and the page's size as `?8`; [`Part::Elsewhere`] also takes the
/// platform and chat as `?9` and `?10`.
#[derive(Debug, Clone, Copy)]
enum Part {
    /// The room's messages, by room (`<platform>:<chat>`).
    Messages,
    /// A session's turns.
    Turns,
    /// A session's artifacts.
    Artifacts,
    /// The deliveries a session sent.
    Sent,
    /// The deliveries a session was sent.
    Received,
    /// The turns that answered a session's deliveries to a session outside the room.
    Elsewhere,
    /// A chain's turns.
    Chain,
}

impl Part {
    /// The parts read for each session of the room.
    const OF_A_SESSION: [Part; 5] = [
        Part::Turns,
        Part::Artifacts,
        Part::Sent,
        Part::Received,
        Part::Elsewhere,
    ];

    fn sql(self) -> String {
        // The columns, the rows, their kind, and their time, number (if any) and key.
        let (select, from, kind, ts, n, k) = match self {
            Part::Messages => (
                "m.ts_ms, 'message', m.id, m.message_id, m.author, m.origin, CAST(NULL AS TEXT),
                 m.text, CAST(NULL AS TEXT), m.author_name, m.chat",
                "room_messages m WHERE m.room = ?1",
                RoomLineKind::Message,
                "m.ts_ms",
                Some("m.id"),
                "m.message_id",
            ),
            Part::Turns => (
                "t.ts_ms, 'turn', t.id, '', 'bot:' || s.bot, 'bot', CAST(NULL AS TEXT), t.text,
                 CAST(NULL AS TEXT), t.kind, t.session",
                "transcript t JOIN sessions s ON s.key = t.session
                 WHERE t.session = ?1 AND t.kind <> 'inbound'",
                RoomLineKind::Turn,
                "t.ts_ms",
                Some("t.id"),
                "''",
            ),
            Part::Artifacts => (
                "a.created_ms, 'artifact', CAST(0 AS BIGINT), a.id, 'bot:' || a.bot, 'bot',
                 CAST(NULL AS TEXT), a.name, CAST(NULL AS TEXT), a.sha256, a.id",
                "artifacts a WHERE a.session = ?1",
                RoomLineKind::Artifact,
                "a.created_ms",
                None,
                "a.id",
            ),
            Part::Sent | Part::Received => (
                "d.created_ms, 'delivery', CAST(0 AS BIGINT), d.run_id, 'bot:' || d.sender,
                 'bot', 'bot:' || d.target, d.message, d.reply, d.state, d.run_id",
                if matches!(self, Part::Sent) {
                    "deliveries d WHERE d.sender_session = ?1"
                } else {
                    "deliveries d WHERE d.target_session = ?1"
                },
                RoomLineKind::Delivery,
                "d.created_ms",
                None,
                "d.run_id",
            ),
            Part::Elsewhere => (
                "t.ts_ms, 'turn', t.id, '', 'bot:' || d.target, 'bot', CAST(NULL AS TEXT),
                 t.text, CAST(NULL AS TEXT), t.kind, t.session",
                "deliveries d JOIN transcript t
                   ON t.session = d.target_session AND t.run_id = d.run_id
                 WHERE d.sender_session = ?1 AND t.kind <> 'inbound'
                   AND d.target_session NOT IN
                       (SELECT key FROM sessions WHERE platform = ?9 AND chat = ?10)",
                RoomLineKind::Turn,
                "t.ts_ms",
                Some("t.id"),
                "''",
            ),
            Part::Chain => (
                "c.ts_ms, 'chain', c.id, '',
                 CASE WHEN c.sender = 'baton' THEN 'baton' ELSE 'bot:' || c.sender END,
                 CASE WHEN c.sender = 'baton' THEN 'gateway' ELSE 'bot' END,
                 CASE WHEN c.recipient IS NULL THEN NULL ELSE 'bot:' || c.recipient END,
                 c.content, CAST(NULL AS TEXT), c.kind, c.chain",
                "chain_messages c WHERE c.chain = ?1",
                RoomLineKind::Chain,
                "c.ts_ms",
                Some("c.id"),
                "''",
            ),
        };
        let kind = kind.as_str();
        // A number tells a part's lines apart where it has one (and orders its index), else
        // the key does.
        let (order, n) = match n {
            Some(n) => (n, n),
            None => (k, "CAST(0 AS BIGINT)"),
        };
        format!(
            "SELECT {select} FROM {from}
                AND {ts} >= ?2 AND {ts} <= ?3
                AND ({ts} > ?4 OR ({ts} = ?4 AND ('{kind}' > CAST(?5 AS TEXT)
                     OR ('{kind}' = CAST(?5 AS TEXT) AND ({n} > ?6 OR ({n} = ?6 AND {k} > CAST(?7 AS TEXT)))))))
              ORDER BY {ts}, {order}
              LIMIT ?8"
        )
    }
}

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
    let (platform, chat) = (room.platform.as_str(), room.chat.as_str());
    let sessions: Vec<String> = db.query_map(
        "SELECT key FROM sessions WHERE platform = ?1 AND chat = ?2 ORDER BY key",
        args![platform, chat],
        |row| row.get(0),
    )?;
    let chains: Vec<String> = db.query_map(
        "SELECT id FROM chains WHERE origin_platform = ?1 AND origin_chat = ?2 ORDER BY id",
        args![platform, chat],
        |row| row.get(0),
    )?;
    let from = room.since_ms.unwrap_or(i64::MIN).max(after.ts_ms);
    let to = room.until_ms.unwrap_or(i64::MAX);
    let size = i64::try_from(limit).unwrap_or(i64::MAX);
    let read = |part: Part, key: &str| {
        let mut args: Vec<Value<'_>> = vec![
            key.into(),
            from.into(),
            to.into(),
            after.ts_ms.into(),
            after.kind.as_str().into(),
            after.n.into(),
            after.key.as_str().into(),
            size.into(),
        ];
        if let Part::Elsewhere = part {
            args.extend([Value::from(platform), Value::from(chat)]);
        }
        db.query_take(&part.sql(), &args, limit, from_row)
    };
    let whole = format!("{platform}:{chat}");
    let mut lines = read(Part::Messages, &whole)?;
    for session in &sessions {
        for part in Part::OF_A_SESSION {
            lines.extend(read(part, session)?);
        }
    }
    for chain in &chains {
        lines.extend(read(Part::Chain, chain)?);
    }
    lines.sort_by(|a, b| a.cursor.cmp(&b.cursor));
    // A delivery between two of the room's sessions is read as sent and as received.
    lines.dedup_by(|later, earlier| later.cursor == earlier.cursor);
    lines.truncate(limit);
    Ok(lines)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionKey;
    use crate::store::deliveries::tests::send;
    use crate::store::{
        DecisionOutcome, DecisionStep, EntryKind, NewDecision, NewEntry, Origin, Said, testing,
    };

    /// snark's session in the local chat `room`, and caid's, where snark's sends go.
    const ROOM: &str = "bot:snark:local:snark:room";
    const ELSEWHERE: &str = "bot:caid:local:caid:a2a:snark";

    /// A person's message in `chat` (`local:<chat>[:thread:<id>]`), kept with its decision.
    fn message(chat: &str, id: &str, ts_ms: i64) -> NewDecision {
        let room = chat.split(":thread:").next().unwrap().to_owned();
        NewDecision {
            ts_ms,
            platform: "local".into(),
            account: "snark".into(),
            bot: "snark".into(),
            chat: chat.into(),
            message_id: id.into(),
            event_id: None,
            sender: "ann".into(),
            step: DecisionStep::Activation,
            outcome: DecisionOutcome::Buffered,
            reason: "not mentioned".into(),
            session: None,
            run_id: None,
            waited_ms: None,
            said: Said {
                ts_ms,
                room,
                author_name: "Ann".into(),
                origin: Origin::Human,
                text: format!("{id} text"),
            },
        }
    }

    fn entry(session: &str, kind: EntryKind, text: &str, run: &str, ts_ms: i64) -> NewEntry {
        NewEntry {
            session: session.parse().unwrap(),
            ts_ms,
            kind,
            speaker: "snark".into(),
            origin: Origin::Bot,
            text: text.into(),
            platform_message_id: None,
            run_id: Some(run.into()),
            idempotency_key: None,
            meta: serde_json::json!({}),
        }
    }

    fn room(since_ms: Option<i64>, until_ms: Option<i64>) -> RoomQuery {
        RoomQuery {
            platform: "local".into(),
            chat: "room".into(),
            since_ms,
            until_ms,
        }
    }

    /// `(kind, the line's words)`, to compare pages by.
    fn said(lines: &[RoomLine]) -> Vec<(RoomLineKind, String)> {
        lines.iter().map(|l| (l.kind, l.text.clone())).collect()
    }

    /// Every line of `room`, read `size` lines at a time as `baton export` reads it.
    async fn paged(store: &Store, room: RoomQuery, size: usize) -> Vec<RoomLine> {
        let (mut all, mut after) = (Vec::new(), RoomCursor::start());
        loop {
            let page = store.room_page(room.clone(), after, size).await.unwrap();
            assert!(page.len() <= size);
            let Some(last) = page.last() else {
                return all;
            };
            after = last.cursor();
            let full = page.len() == size;
            all.extend(page);
            if !full {
                return all;
            }
        }
    }

    /// The room's messages (its thread's too), its bot's turns, its delivery with the turn that
    /// answered it elsewhere: in time order, lines of one millisecond by kind, whatever the
    /// page size; nothing of another room, no inbound entry; `since` and `until` bound it.
    #[tokio::test]
    async fn a_room_reads_the_same_in_pages_of_any_size_on_both_engines() {
        for db in testing::engines().await {
            let engine = db.engine();
            let store = db.open().await;
            let key: SessionKey = ROOM.parse().unwrap();
            store.touch_session(&key, 1_000).await.unwrap();
            for (chat, id, at) in [
                ("local:room", "m1", 1_000),
                ("local:other", "x1", 1_500),
                ("local:room:thread:t1", "m2", 2_000),
                ("local:room", "m3", 3_000),
                ("local:room", "m4", 3_000),
                ("local:room", "m5", 5_000),
            ] {
                store.decision_put(message(chat, id, at)).await.unwrap();
            }
            for new in [
                entry(ROOM, EntryKind::Inbound, "m1 text", "r0", 1_000),
                entry(ROOM, EntryKind::ToolCall, "sessions_send caid", "r0", 1_100),
                entry(ROOM, EntryKind::Reply, "caid says pong", "r0", 3_000),
                entry(ROOM, EntryKind::Reply, "later", "r9", 5_000),
                entry(ELSEWHERE, EntryKind::Inbound, "ping", "r1", 1_300),
                entry(ELSEWHERE, EntryKind::Reply, "pong", "r1", 2_000),
            ] {
                store.append(new).await.unwrap();
            }
            store
                .delivery_begin(send("r1", None, "ping", 1_200), 0, None)
                .await
                .unwrap();

            let turn = |text: &str| (RoomLineKind::Turn, text.to_owned());
            let all = [
                (RoomLineKind::Message, "m1 text".to_owned()),
                turn("sessions_send caid"),
                (RoomLineKind::Delivery, "ping".to_owned()),
                (RoomLineKind::Message, "m2 text".to_owned()),
                turn("pong"),
                (RoomLineKind::Message, "m3 text".to_owned()),
                (RoomLineKind::Message, "m4 text".to_owned()),
                turn("caid says pong"),
                (RoomLineKind::Message, "m5 text".to_owned()),
                turn("later"),
            ];
            let whole = store
                .room_page(room(None, None), RoomCursor::start(), 100)
                .await
                .unwrap();
            assert_eq!(said(&whole), all, "{engine}");
            let pong = whole.iter().find(|l| l.text == "pong").unwrap();
            assert_eq!(pong.author, "bot:caid", "{engine}");
            assert_eq!(pong.place, ELSEWHERE, "{engine}");
            let thread = whole.iter().find(|l| l.id == "m2").unwrap();
            assert_eq!(thread.place, "local:room:thread:t1", "{engine}");
            for size in [1, 2, 3] {
                let read = paged(&store, room(None, None), size).await;
                assert_eq!(said(&read), all, "{engine}: pages of {size}");
            }
            let window = paged(&store, room(Some(2_000), Some(3_000)), 2).await;
            assert_eq!(said(&window), all[3..8], "{engine}");
        }
    }

    /// On SQLite, each part of the record but the turns answered elsewhere is read on an index
    /// in the page's order: no part is sorted, so a page costs the same anywhere in the room.
    #[tokio::test]
    async fn every_part_but_the_turns_elsewhere_is_read_in_index_order() {
        let db = testing::TestDb::sqlite();
        let store = db.open().await;
        for part in [
            Part::Messages,
            Part::Turns,
            Part::Artifacts,
            Part::Sent,
            Part::Received,
            Part::Chain,
        ] {
            let sql = format!("EXPLAIN QUERY PLAN {}", part.sql());
            let plan = store
                .sqlite_read(move |c| {
                    let mut stmt = c.prepare(&sql)?;
                    let args = rusqlite::params!["k", 0, 9, 0, "", 0, "", 10];
                    let rows = stmt.query_map(args, |r| r.get::<_, String>(3))?;
                    rows.collect::<rusqlite::Result<Vec<_>>>()
                })
                .await
                .unwrap()
                .join("; ");
            assert!(
                !plan.contains("TEMP B-TREE") && !plan.contains("SCAN"),
                "{part:?}: {plan}"
            );
        }
    }
}
