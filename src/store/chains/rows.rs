//! A chain's row and log entry as stored: the columns read back, the ids people type, and the
//! log entry every move writes in its own transaction.

use rand::Rng;

use baton_contract::{Platform, UnknownPlatform};

use super::{Chain, ChainEntry, ChainEntryKind, ChainOrigin, ChainState, Holder};
use crate::store::sql::{Db, DbError, OptionalRow, Row, args};
use crate::store::stored_name::parse_column;

/// Characters of an id after `ch-`: lowercase letters and digits, minus look-alikes.
const ID_ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
/// Characters after the prefix.
const ID_LEN: usize = 6;

pub(super) const SELECT: &str =
    "SELECT id, name, coordinator, holder, participants, state, turn, round,
        origin_platform, origin_chat, origin_thread, origin_anchor, origin_account, started_by,
        closed_reason, created_ms, closed_ms, trigger_id
     FROM chains";

pub(super) fn chain_from_row(row: &Row<'_>) -> Result<Chain, DbError> {
    let participants: String = row.get(4)?;
    let participants =
        serde_json::from_str(&participants).map_err(|e| row.column_error(4, e.to_string()))?;
    let state = parse_column(row, 5)?;
    let holder = match row.get(3)? {
        Some(bot) => Holder::Bot(bot),
        None if state == ChainState::Open => Holder::Baton,
        None => Holder::Nobody,
    };
    Ok(Chain {
        id: row.get(0)?,
        name: row.get(1)?,
        coordinator: row.get(2)?,
        holder,
        participants,
        state,
        turn: row.get(6)?,
        round: row.get(7)?,
        origin: ChainOrigin {
            platform: platform_column(row, 8)?,
            chat: row.get(9)?,
            thread: row.get(10)?,
            anchor: row.get(11)?,
            account: row.get(12)?,
        },
        started_by: row.get(13)?,
        closed_reason: row.get(14)?,
        created_ms: row.get(15)?,
        closed_ms: row.get(16)?,
        trigger: row.get(17)?,
    })
}

/// A platform stored by name, read back typed; a name this build does not know is a
/// conversion error naming the column.
fn platform_column(row: &Row<'_>, idx: usize) -> Result<Platform, DbError> {
    let text: String = row.get(idx)?;
    text.parse()
        .map_err(|e: UnknownPlatform| row.column_error(idx, e.to_string()))
}

pub(super) fn entry_from_row(row: &Row<'_>) -> Result<ChainEntry, DbError> {
    Ok(ChainEntry {
        id: row.get(0)?,
        chain: row.get(1)?,
        turn: row.get(2)?,
        sender: row.get(3)?,
        kind: parse_column(row, 4)?,
        content: row.get(5)?,
        recipient: row.get(6)?,
        ts_ms: row.get(7)?,
    })
}

/// An id as people type it.
pub(super) fn normalize(id: &str) -> String {
    id.trim().to_ascii_lowercase()
}

/// A fresh chain id: `ch-` and [`ID_LEN`] characters of [`ID_ALPHABET`]. The insert that
/// uses it decides whether it is free (`start.rs`).
pub(super) fn new_id() -> String {
    let mut rng = rand::rng();
    let tail: String = (0..ID_LEN)
        .map(|_| char::from(ID_ALPHABET[rng.random_range(0..ID_ALPHABET.len())]))
        .collect();
    format!("ch-{tail}")
}

pub(super) fn by_id(db: Db<'_>, id: &str) -> Result<Option<Chain>, DbError> {
    db.query_row(
        &format!("{SELECT} WHERE id = ?1"),
        args![id],
        chain_from_row,
    )
    .optional()
}

/// [`by_id`] for a chain the job just wrote: it is there.
pub(super) fn written(db: Db<'_>, id: &str) -> Result<Chain, DbError> {
    by_id(db, id)?.ok_or(DbError::NoRows)
}

/// Makes the rest of the job exclusive for chain `id` among every instance sharing the
/// database ([`Db::exclusive`]): every move reads the chain, decides, then writes, and two
/// moves of one turn must never both pass the check.
pub(super) fn lock(db: Db<'_>, id: &str) -> Result<(), DbError> {
    db.exclusive(&format!("chain:{id}"))
}

/// A log entry to write inside a move.
pub(super) struct Note<'a> {
    pub(super) turn: i64,
    pub(super) sender: &'a str,
    pub(super) kind: ChainEntryKind,
    pub(super) content: &'a str,
    pub(super) recipient: Option<&'a str>,
}

pub(super) fn note(db: Db<'_>, chain: &str, note: Note<'_>, now_ms: i64) -> Result<i64, DbError> {
    db.query_row(
        "INSERT INTO chain_messages (chain, turn, sender, kind, content, recipient, ts_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         RETURNING id",
        args![
            chain,
            note.turn,
            note.sender,
            note.kind.as_str(),
            note.content,
            note.recipient,
            now_ms
        ],
        |r| r.get(0),
    )
}
