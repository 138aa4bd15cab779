//! The local channel's rooms (`crate::local`): their messages, kept in the store so every
//! instance sharing the database serves every room, and a room outlasts a restart.
//!
//! Each write is one job: the room is opened (or refused past the cap), the message numbered
//! after the room's last, and the log trimmed to its newest messages, all in one transaction.
//! On PostgreSQL the job first takes the rooms' exclusive lock ([`Db::exclusive`]), so two
//! instances never give one position twice nor both open the room past the cap; on SQLite its
//! one writer already runs them one at a time.

use serde::{Deserialize, Serialize};

use super::sql::{Db, DbError, OptionalRow, args};
use super::{Store, StoreError};
use crate::timing::now_ms;

/// The lock every room write takes on PostgreSQL.
const ROOMS_LOCK: &str = "local_rooms";

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

/// A message to keep in a room.
#[derive(Debug, Clone)]
pub struct NewRoomMessage {
    /// The id it was given; a message already in the log with it is that message again.
    /// `None`: a new id is made.
    pub id: Option<String>,
    /// Who wrote it.
    pub author: String,
    /// Written by a bot.
    pub is_bot: bool,
    /// The text as the log keeps it.
    pub text: String,
    /// Its thread.
    pub thread: Option<String>,
    /// The message it answers.
    pub reply_to: Option<String>,
    /// A bot post's idempotency key: a key already posted gives the message id it produced.
    pub key: Option<String>,
}

/// How many rooms and messages the store keeps (`[local]`, and the posted keys' count).
#[derive(Debug, Clone, Copy)]
pub struct RoomBounds {
    /// Group rooms at most; as many direct conversations.
    pub max_rooms: usize,
    /// Messages kept per room.
    pub log_messages: usize,
    /// Bot posts' idempotency keys kept.
    pub posted_keys: usize,
}

/// What became of a message kept in a room.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoomWrite {
    /// It is in the log: new, or the message already there with its id.
    Kept(RoomMessage),
    /// Its key was posted already, as this message id; nothing was written.
    AlreadyPosted(String),
    /// Opening the group room would pass `max_rooms`.
    Full,
}

fn is_dm(room: &str) -> bool {
    room.starts_with("dm:")
}

impl Store {
    /// Keeps `message` in `room` within `bounds`, opening the room if new: a group room only
    /// below `max_rooms`; a direct conversation always, dropping the least recently active one
    /// at `max_rooms`.
    pub async fn keep_room_message(
        &self,
        room: &str,
        message: NewRoomMessage,
        bounds: RoomBounds,
    ) -> Result<RoomWrite, StoreError> {
        let room = room.to_owned();
        self.write(move |db| keep(db, &room, &message, bounds))
            .await
    }

    /// The room's messages after `after_seq` (all when `None`), oldest first.
    pub async fn room_messages(
        &self,
        room: &str,
        after_seq: Option<u64>,
    ) -> Result<Vec<RoomMessage>, StoreError> {
        let room = room.to_owned();
        let after = after_seq.map_or(0, |s| i64::try_from(s).unwrap_or(i64::MAX));
        self.read(move |db| {
            db.query_map(
                &format!("{SELECT} WHERE room = ?1 AND seq > ?2 ORDER BY seq"),
                args![&room, after],
                message_row,
            )
        })
        .await
    }

    /// The message `id` of `room`, while the log keeps it.
    pub async fn room_message(
        &self,
        room: &str,
        id: &str,
    ) -> Result<Option<RoomMessage>, StoreError> {
        let (room, id) = (room.to_owned(), id.to_owned());
        self.read(move |db| {
            db.query_row(
                &format!("{SELECT} WHERE room = ?1 AND id = ?2 ORDER BY seq LIMIT 1"),
                args![&room, &id],
                message_row,
            )
            .optional()
        })
        .await
    }

    /// How many group rooms and direct conversations the store holds, and how many bot posts'
    /// idempotency keys.
    pub async fn room_counts(&self) -> Result<(usize, usize, usize), StoreError> {
        self.read(|db| {
            let count = |sql: &str| db.query_row(sql, &[], |r| r.get::<i64>(0));
            let groups = count("SELECT count(*) FROM local_rooms WHERE is_dm = 0")?;
            let dms = count("SELECT count(*) FROM local_rooms WHERE is_dm = 1")?;
            let keys = count("SELECT count(*) FROM local_room_posted")?;
            let size = |n: i64| usize::try_from(n).unwrap_or(0);
            Ok((size(groups), size(dms), size(keys)))
        })
        .await
    }
}

const SELECT: &str = "SELECT seq, id, author, is_bot, text, thread, reply_to, ts_ms
     FROM local_room_messages";

fn message_row(r: &super::sql::Row<'_>) -> Result<RoomMessage, DbError> {
    Ok(RoomMessage {
        seq: u64::try_from(r.get::<i64>(0)?).unwrap_or(0),
        id: r.get(1)?,
        author: r.get(2)?,
        is_bot: r.get(3)?,
        text: r.get(4)?,
        thread: r.get(5)?,
        reply_to: r.get(6)?,
        ts_ms: r.get(7)?,
    })
}

fn keep(
    db: Db<'_>,
    room: &str,
    message: &NewRoomMessage,
    bounds: RoomBounds,
) -> Result<RoomWrite, DbError> {
    db.exclusive(ROOMS_LOCK)?;
    if let Some(key) = &message.key {
        let posted = db
            .query_row(
                "SELECT message_id FROM local_room_posted WHERE key = ?1",
                args![key],
                |r| r.get::<String>(0),
            )
            .optional()?;
        if let Some(id) = posted {
            return Ok(RoomWrite::AlreadyPosted(id));
        }
    }
    let Some(last_seq) = open(db, room, bounds.max_rooms)? else {
        return Ok(RoomWrite::Full);
    };
    if let Some(id) = &message.id {
        let seen = db
            .query_row(
                &format!("{SELECT} WHERE room = ?1 AND id = ?2 ORDER BY seq LIMIT 1"),
                args![room, id],
                message_row,
            )
            .optional()?;
        if let Some(seen) = seen {
            return Ok(RoomWrite::Kept(seen));
        }
    }
    let seq = last_seq + 1;
    let kept = RoomMessage {
        seq: u64::try_from(seq).unwrap_or(0),
        id: message
            .id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()),
        author: message.author.clone(),
        is_bot: message.is_bot,
        text: message.text.clone(),
        thread: message.thread.clone(),
        reply_to: message.reply_to.clone(),
        ts_ms: now_ms(),
    };
    db.execute(
        "INSERT INTO local_room_messages
             (room, seq, id, author, is_bot, text, thread, reply_to, ts_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        args![
            room,
            seq,
            &kept.id,
            &kept.author,
            kept.is_bot,
            &kept.text,
            kept.thread.as_deref(),
            kept.reply_to.as_deref(),
            kept.ts_ms
        ],
    )?;
    db.execute(
        "UPDATE local_rooms SET next_seq = ?2 WHERE room = ?1",
        args![room, seq],
    )?;
    let log = i64::try_from(bounds.log_messages).unwrap_or(i64::MAX);
    db.execute(
        "DELETE FROM local_room_messages WHERE room = ?1 AND seq <= ?2",
        args![room, seq - log],
    )?;
    if let Some(key) = &message.key {
        remember_key(db, key, &kept.id, bounds.posted_keys)?;
    }
    Ok(RoomWrite::Kept(kept))
}

/// Opens `room` (marking it the most recently active) and gives its last position; `None` when
/// it is a new group room past `max`.
fn open(db: Db<'_>, room: &str, max: usize) -> Result<Option<i64>, DbError> {
    let dm = is_dm(room);
    let active = db.query_row(
        "SELECT coalesce(max(active), 0) + 1 FROM local_rooms",
        &[],
        |r| r.get::<i64>(0),
    )?;
    let last = db
        .query_row(
            "SELECT next_seq FROM local_rooms WHERE room = ?1",
            args![room],
            |r| r.get::<i64>(0),
        )
        .optional()?;
    if last.is_some() {
        db.execute(
            "UPDATE local_rooms SET active = ?2 WHERE room = ?1",
            args![room, active],
        )?;
        return Ok(last);
    }
    let max = i64::try_from(max).unwrap_or(i64::MAX);
    let held = db.query_row(
        "SELECT count(*) FROM local_rooms WHERE is_dm = ?1",
        args![dm],
        |r| r.get::<i64>(0),
    )?;
    if held >= max {
        if !dm {
            return Ok(None);
        }
        let dropped = db.query_map(
            "SELECT room FROM local_rooms WHERE is_dm = 1 ORDER BY active LIMIT ?1",
            args![held - max + 1],
            |r| r.get::<String>(0),
        )?;
        for gone in dropped {
            db.execute(
                "DELETE FROM local_room_messages WHERE room = ?1",
                args![&gone],
            )?;
            db.execute("DELETE FROM local_rooms WHERE room = ?1", args![&gone])?;
        }
    }
    db.execute(
        "INSERT INTO local_rooms (room, is_dm, next_seq, active) VALUES (?1, ?2, 0, ?3)",
        args![room, dm, active],
    )?;
    Ok(Some(0))
}

/// Remembers that `key` posted `id`, keeping only the newest `max` keys.
fn remember_key(db: Db<'_>, key: &str, id: &str, max: usize) -> Result<(), DbError> {
    let n = db.query_row(
        "SELECT coalesce(max(n), 0) + 1 FROM local_room_posted",
        &[],
        |r| r.get::<i64>(0),
    )?;
    db.execute(
        "INSERT INTO local_room_posted (key, message_id, n) VALUES (?1, ?2, ?3)",
        args![key, id, n],
    )?;
    let max = i64::try_from(max).unwrap_or(i64::MAX);
    db.execute(
        "DELETE FROM local_room_posted WHERE n <= ?1",
        args![n - max],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    fn said(author: &str, text: &str) -> NewRoomMessage {
        NewRoomMessage {
            id: None,
            author: author.into(),
            is_bot: false,
            text: text.into(),
            thread: None,
            reply_to: None,
            key: None,
        }
    }

    const SMALL: RoomBounds = RoomBounds {
        max_rooms: 2,
        log_messages: 3,
        posted_keys: 2,
    };

    fn kept(write: RoomWrite) -> RoomMessage {
        match write {
            RoomWrite::Kept(message) => message,
            other => panic!("not kept: {other:?}"),
        }
    }

    /// Rooms, their numbering, the cap, the log's trim, the ids and keys all hold after a
    /// reopen (a restart, or another instance on the same database).
    #[tokio::test]
    async fn rooms_are_numbered_bounded_and_outlast_a_reopen() {
        for db in testing::engines().await {
            let store = db.open().await;
            let engine = db.engine();
            for text in ["1", "2", "3", "4"] {
                kept(
                    store
                        .keep_room_message("one", said("alice", text), SMALL)
                        .await
                        .unwrap(),
                );
            }
            kept(
                store
                    .keep_room_message("two", said("alice", "b"), SMALL)
                    .await
                    .unwrap(),
            );
            let three = store.keep_room_message("three", said("alice", "c"), SMALL);
            assert_eq!(three.await.unwrap(), RoomWrite::Full, "{engine}");
            let again = NewRoomMessage {
                id: Some("m1".into()),
                ..said("alice", "5")
            };
            let first = kept(
                store
                    .keep_room_message("one", again.clone(), SMALL)
                    .await
                    .unwrap(),
            );
            let reopened = db.open().await;
            let second = kept(
                reopened
                    .keep_room_message("one", again, SMALL)
                    .await
                    .unwrap(),
            );
            assert_eq!(
                (first.seq, &second),
                (5, &first),
                "{engine}: one id, one message"
            );
            let shown: Vec<_> = reopened
                .room_messages("one", None)
                .await
                .unwrap()
                .into_iter()
                .map(|m| (m.seq, m.text))
                .collect();
            assert_eq!(
                shown,
                [(3, "3".into()), (4, "4".into()), (5, "5".into())],
                "{engine}: the newest three"
            );
            assert_eq!(
                reopened.room_messages("one", Some(4)).await.unwrap().len(),
                1
            );
            let found = reopened.room_message("one", "m1").await.unwrap();
            assert_eq!(found.map(|m| m.author), Some("alice".into()), "{engine}");

            for n in 1..=3 {
                let post = NewRoomMessage {
                    key: Some(format!("k{n}")),
                    is_bot: true,
                    ..said("snark", "x")
                };
                kept(
                    reopened
                        .keep_room_message("dm:u1", post, SMALL)
                        .await
                        .unwrap(),
                );
            }
            let k3 = NewRoomMessage {
                key: Some("k3".into()),
                ..said("snark", "x")
            };
            let posted = reopened
                .keep_room_message("dm:u1", k3, SMALL)
                .await
                .unwrap();
            assert!(
                matches!(posted, RoomWrite::AlreadyPosted(_)),
                "{engine}: {posted:?}"
            );
            let k1 = NewRoomMessage {
                key: Some("k1".into()),
                ..said("snark", "x")
            };
            let forgotten = reopened
                .keep_room_message("dm:u1", k1, SMALL)
                .await
                .unwrap();
            assert!(
                matches!(forgotten, RoomWrite::Kept(_)),
                "{engine}: the oldest key rolled off"
            );
            assert_eq!(reopened.room_counts().await.unwrap(), (2, 1, 2), "{engine}");
        }
    }

    #[tokio::test]
    async fn direct_conversations_past_the_cap_drop_the_least_recently_active() {
        for db in testing::engines().await {
            let store = db.open().await;
            for user in ["u1", "u2", "u1", "u3"] {
                let room = format!("dm:{user}");
                kept(
                    store
                        .keep_room_message(&room, said(user, "hi"), SMALL)
                        .await
                        .unwrap(),
                );
            }
            let engine = db.engine();
            assert_eq!(store.room_counts().await.unwrap().1, 2, "{engine}");
            assert!(
                store.room_messages("dm:u2", None).await.unwrap().is_empty(),
                "{engine}"
            );
            assert_eq!(
                store.room_messages("dm:u1", None).await.unwrap().len(),
                2,
                "{engine}"
            );
        }
    }
}
