//! Chains: ordered, turn-enforced conversations among bots, and everything said
//! or done in them.
//!
//! The turn is the thing to protect. Two bots must never both believe they hold it, and a late
//! arrival (a post after a timeout, a timeout after a post) must never move it. So every move of
//! the turn — a handoff, a post, a hand-back, a close — is one job on the writer thread that
//! checks the chain's state, its holder and its turn number before it changes anything, and
//! writes the chain's log entry in the same transaction ([`Store::chain_hand`],
//! [`Store::chain_post`], [`Store::chain_return`], [`Store::chain_close`]).
//!
//! Ids are short (`ch-` and six characters without look-alikes) because people type them.

use rand::Rng;
use rusqlite::{Connection, OptionalExtension, Row};
use serde::Serialize;

use super::stored_name::parse_column;
use super::{Store, StoreError};

/// Characters of an id after `ch-`: lowercase letters and digits, minus look-alikes.
const ID_ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
/// Characters after the prefix.
const ID_LEN: usize = 6;

/// The name baton goes by in a chain it coordinates itself, and in its own log entries.
pub const BATON: &str = "baton";

stored_name! {
    /// Where a chain stands.
    ChainState, "chain state" {
        /// Running: someone holds the turn.
        Open = "open",
        /// The coordinator closed it (`chain_close`), or baton's round-robin finished.
        Completed = "completed",
        /// A human closed it (`/baton chain stop` or `close`).
        Stopped = "stopped",
        /// It reached `[chains] max_rounds`.
        Capped = "capped",
        /// The coordinator's turn ended without handing the turn on or closing the chain.
        Stalled = "stalled",
    }
}

stored_name! {
    /// What a chain log entry records.
    ChainEntryKind, "chain entry kind" {
        /// A post by the turn holder, shown in the chat.
        Message = "message",
        /// The turn given to `recipient`; the content is the prompt that came with it.
        Handoff = "handoff",
        /// baton's own note: opened, a turn timed out or was passed, closed.
        System = "system",
    }
}

/// Where a chain posts: the chat it was started from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainOrigin {
    /// Platform name.
    pub platform: String,
    /// Chat id.
    pub chat: String,
    /// The thread it was started in, if any: every post goes there.
    pub thread: Option<String>,
    /// The message every post answers when there is no thread (on Slack that puts the posts in
    /// the thread under it).
    pub anchor: Option<String>,
    /// The account baton's own lines about the chain are posted through.
    pub account: String,
}

/// A chain to record (the store assigns the id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewChain {
    /// What it is about.
    pub name: String,
    /// The coordinating bot; `None` when baton coordinates round-robin.
    pub coordinator: Option<String>,
    /// Participants, in order.
    pub participants: Vec<String>,
    /// Where it posts.
    pub origin: ChainOrigin,
    /// Who started it: a bot id, or a human's id.
    pub started_by: String,
}

/// A stored chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Chain {
    /// `ch-xxxxxx`.
    pub id: String,
    /// What it is about.
    pub name: String,
    /// The coordinating bot; `None` when baton coordinates.
    pub coordinator: Option<String>,
    /// Who may post now; `None` when that is baton (as coordinator) or nobody (closed).
    pub holder: Option<String>,
    /// Participants, in order.
    pub participants: Vec<String>,
    /// Where it stands.
    pub state: ChainState,
    /// How many times the turn has moved.
    pub turn: i64,
    /// The current round (0 before anyone was given the turn).
    pub round: u32,
    /// Where it posts.
    pub origin: ChainOrigin,
    /// Who started it.
    pub started_by: String,
    /// Why it closed.
    pub closed_reason: Option<String>,
    /// When it started, milliseconds since the Unix epoch.
    pub created_ms: i64,
    /// When it closed.
    pub closed_ms: Option<i64>,
}

impl Chain {
    /// The coordinator's name: its bot id, or `baton`.
    pub fn coordinator_name(&self) -> &str {
        self.coordinator.as_deref().unwrap_or(BATON)
    }

    /// Whether the coordinator holds the turn (also when baton coordinates and nobody holds it).
    pub fn coordinator_holds(&self) -> bool {
        self.holder == self.coordinator
    }

    /// The holder's name, for people: a bot id, `baton`, or `nobody` once closed.
    pub fn holder_name(&self) -> &str {
        match (&self.holder, self.state) {
            (Some(bot), _) => bot,
            (None, ChainState::Open) => BATON,
            (None, _) => "nobody",
        }
    }
}

/// One entry of a chain's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainEntry {
    /// Increasing id.
    pub id: i64,
    /// The chain.
    pub chain: String,
    /// The chain's turn number when it was written.
    pub turn: i64,
    /// Who: a bot id, or `baton`.
    pub sender: String,
    /// Message, handoff or system note.
    pub kind: ChainEntryKind,
    /// The words (for a handoff: the prompt).
    pub content: String,
    /// For a handoff: who was given the turn.
    pub recipient: Option<String>,
    /// When, milliseconds since the Unix epoch.
    pub ts_ms: i64,
}

/// Why the store would not move a chain's turn. Each says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// No chain has this id.
    #[error("no chain `{0}`; chain_status (or /baton chain status) lists the open ones")]
    Unknown(String),
    /// The chain is over.
    #[error("chain {id} is {state}; nothing more can be said or done in it")]
    Closed {
        /// The chain.
        id: String,
        /// How it ended.
        state: ChainState,
    },
    /// Someone else holds the turn.
    #[error(
        "it is not your turn in chain {id}: {holder} holds turn {turn}; wait until the \
         coordinator gives you the turn"
    )]
    NotHolder {
        /// The chain.
        id: String,
        /// Who holds it.
        holder: String,
        /// The turn number.
        turn: i64,
    },
    /// The coordinator tried to hand the turn on while a participant still holds it.
    #[error(
        "{holder} holds turn {turn} of chain {id}; the turn comes back to you when it posts or \
         its turn times out, then hand it on"
    )]
    TurnTaken {
        /// The chain.
        id: String,
        /// Who holds it.
        holder: String,
        /// The turn number.
        turn: i64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A handoff to make ([`Store::chain_hand`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// The chain.
    pub chain: String,
    /// Who gives the turn (the coordinator's name).
    pub by: String,
    /// Who gets it.
    pub to: String,
    /// What they are asked.
    pub prompt: String,
    /// Add `to` to the participants first if it is not one (`chain_add`).
    pub add: bool,
    /// `[chains] max_rounds`: the handoff that would start a round past it closes the chain.
    pub max_rounds: u32,
}

/// What a handoff did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handed {
    /// `to` holds the turn now (the chain as it is after the move).
    Given(Chain),
    /// The handoff would have started a round past `max_rounds`: the chain is closed `capped`.
    Capped(Chain),
}

/// What a post did ([`Store::chain_post`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    /// The chain as it is after the post.
    pub chain: Chain,
    /// The log entry's id.
    pub entry: i64,
    /// Whether the turn went back to the coordinator (it stays put when the coordinator posts).
    pub returned: bool,
}

const SELECT: &str = "SELECT id, name, coordinator, holder, participants, state, turn, round,
        origin_platform, origin_chat, origin_thread, origin_anchor, origin_account, started_by,
        closed_reason, created_ms, closed_ms
     FROM chains";

fn chain_from_row(row: &Row<'_>) -> rusqlite::Result<Chain> {
    let participants: String = row.get(4)?;
    let participants = serde_json::from_str(&participants).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(4, rusqlite::types::Type::Text, e.into())
    })?;
    Ok(Chain {
        id: row.get(0)?,
        name: row.get(1)?,
        coordinator: row.get(2)?,
        holder: row.get(3)?,
        participants,
        state: parse_column(row, 5)?,
        turn: row.get(6)?,
        round: row.get(7)?,
        origin: ChainOrigin {
            platform: row.get(8)?,
            chat: row.get(9)?,
            thread: row.get(10)?,
            anchor: row.get(11)?,
            account: row.get(12)?,
        },
        started_by: row.get(13)?,
        closed_reason: row.get(14)?,
        created_ms: row.get(15)?,
        closed_ms: row.get(16)?,
    })
}

fn entry_from_row(row: &Row<'_>) -> rusqlite::Result<ChainEntry> {
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
fn normalize(id: &str) -> String {
    id.trim().to_ascii_lowercase()
}

fn new_id(conn: &Connection) -> rusqlite::Result<String> {
    let mut rng = rand::rng();
    loop {
        let tail: String = (0..ID_LEN)
            .map(|_| char::from(ID_ALPHABET[rng.random_range(0..ID_ALPHABET.len())]))
            .collect();
        let id = format!("ch-{tail}");
        let taken: bool = conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM chains WHERE id = ?1)")?
            .query_row([&id], |r| r.get(0))?;
        if !taken {
            return Ok(id);
        }
    }
}

fn by_id(conn: &Connection, id: &str) -> rusqlite::Result<Option<Chain>> {
    conn.prepare_cached(&format!("{SELECT} WHERE id = ?1"))?
        .query_row([id], chain_from_row)
        .optional()
}

/// A log entry to write inside a move.
struct Note<'a> {
    turn: i64,
    sender: &'a str,
    kind: ChainEntryKind,
    content: &'a str,
    recipient: Option<&'a str>,
}

fn note(conn: &Connection, chain: &str, note: Note<'_>, now_ms: i64) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO chain_messages (chain, turn, sender, kind, content, recipient, ts_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(rusqlite::params![
        chain,
        note.turn,
        note.sender,
        note.kind.as_str(),
        note.content,
        note.recipient,
        now_ms
    ])?;
    Ok(conn.last_insert_rowid())
}

/// The open chain `id`, or why there is none to act on.
fn open_chain(conn: &Connection, id: &str) -> rusqlite::Result<Result<Chain, ChainError>> {
    Ok(match by_id(conn, id)? {
        None => Err(ChainError::Unknown(id.to_owned())),
        Some(chain) if chain.state != ChainState::Open => Err(ChainError::Closed {
            id: chain.id,
            state: chain.state,
        }),
        Some(chain) => Ok(chain),
    })
}

/// Whether `bot` was given a turn since `round_turn` (it spoke in the current round).
fn had_turn_since(conn: &Connection, chain: &str, bot: &str, since: i64) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "SELECT EXISTS (SELECT 1 FROM chain_messages
         WHERE chain = ?1 AND kind = 'handoff' AND recipient = ?2 AND turn >= ?3)",
    )?
    .query_row(rusqlite::params![chain, bot, since], |r| r.get(0))
}

/// Close `chain` (open, as read in this job) with `state`, noting `reason` as said by `by`.
fn close_in(
    conn: &Connection,
    chain: &Chain,
    state: ChainState,
    by: &str,
    reason: &str,
    now_ms: i64,
) -> rusqlite::Result<Chain> {
    conn.prepare_cached(
        "UPDATE chains SET state = ?2, holder = NULL, closed_reason = ?3, closed_ms = ?4
         WHERE id = ?1",
    )?
    .execute(rusqlite::params![chain.id, state.as_str(), reason, now_ms])?;
    let content = format!("chain {state} by {by}: {reason}");
    let entry = Note {
        turn: chain.turn,
        sender: BATON,
        kind: ChainEntryKind::System,
        content: &content,
        recipient: None,
    };
    note(conn, &chain.id, entry, now_ms)?;
    by_id(conn, &chain.id)?.ok_or(rusqlite::Error::QueryReturnedNoRows)
}

/// Flatten the result of a writer job that decides on a chain.
fn decided<T>(result: Result<Result<T, ChainError>, StoreError>) -> Result<T, ChainError> {
    result?
}

impl Store {
    /// Records a new open chain with a fresh id, its coordinator holding the turn, and an
    /// opening note. Returns it once committed.
    pub async fn create_chain(&self, new: NewChain, now_ms: i64) -> Result<Chain, StoreError> {
        self.write(move |conn| {
            let id = new_id(conn)?;
            let participants = serde_json::to_string(&new.participants)
                .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
            let o = &new.origin;
            conn.prepare_cached(
                "INSERT INTO chains (id, name, coordinator, holder, participants, state,
                    origin_platform, origin_chat, origin_thread, origin_anchor, origin_account,
                    started_by, created_ms)
                 VALUES (?1, ?2, ?3, ?3, ?4, 'open', ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(rusqlite::params![
                id,
                new.name,
                new.coordinator,
                participants,
                o.platform,
                o.chat,
                o.thread,
                o.anchor,
                o.account,
                new.started_by,
                now_ms,
            ])?;
            let content = format!(
                "chain \"{}\" started by {}; coordinator {}; participants: {}",
                new.name,
                new.started_by,
                new.coordinator.as_deref().unwrap_or(BATON),
                if new.participants.is_empty() {
                    "none yet".to_owned()
                } else {
                    new.participants.join(", ")
                }
            );
            let opening = Note {
                turn: 0,
                sender: BATON,
                kind: ChainEntryKind::System,
                content: &content,
                recipient: None,
            };
            note(conn, &id, opening, now_ms)?;
            by_id(conn, &id)?.ok_or(rusqlite::Error::QueryReturnedNoRows)
        })
        .await
    }

    /// Remember the message a chain's posts answer (its announcement, when it had none).
    pub async fn chain_anchor(&self, id: &str, anchor: &str) -> Result<(), StoreError> {
        let (id, anchor) = (normalize(id), anchor.to_owned());
        self.write(move |conn| {
            conn.prepare_cached("UPDATE chains SET origin_anchor = ?2 WHERE id = ?1")?
                .execute((&id, &anchor))?;
            Ok(())
        })
        .await
    }

    /// Give the turn of an open chain to `handoff.to`, if the coordinator holds it. The handoff
    /// that would start a round past `max_rounds` closes the chain (`capped`) instead.
    pub async fn chain_hand(&self, handoff: Handoff, now_ms: i64) -> Result<Handed, ChainError> {
        let id = normalize(&handoff.chain);
        decided(
            self.write(move |conn| {
                let mut chain = match open_chain(conn, &id)? {
                    Ok(chain) => chain,
                    Err(refused) => return Ok(Err(refused)),
                };
                if !chain.coordinator_holds() {
                    return Ok(Err(ChainError::TurnTaken {
                        holder: chain.holder_name().to_owned(),
                        id: chain.id,
                        turn: chain.turn,
                    }));
                }
                if handoff.add && !chain.participants.contains(&handoff.to) {
                    chain.participants.push(handoff.to.clone());
                    let participants = serde_json::to_string(&chain.participants)
                        .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
                    conn.prepare_cached("UPDATE chains SET participants = ?2 WHERE id = ?1")?
                        .execute((&chain.id, &participants))?;
                }
                let round_turn: i64 = conn
                    .prepare_cached("SELECT round_turn FROM chains WHERE id = ?1")?
                    .query_row([&chain.id], |r| r.get(0))?;
                let turn = chain.turn + 1;
                let new_round =
                    chain.round == 0 || had_turn_since(conn, &chain.id, &handoff.to, round_turn)?;
                let (round, round_turn) = if new_round {
                    (chain.round + 1, turn)
                } else {
                    (chain.round, round_turn)
                };
                if round > handoff.max_rounds {
                    let reason = format!(
                        "the round cap ([chains] max_rounds = {}) was reached",
                        handoff.max_rounds
                    );
                    let closed =
                        close_in(conn, &chain, ChainState::Capped, BATON, &reason, now_ms)?;
                    return Ok(Ok(Handed::Capped(closed)));
                }
                conn.prepare_cached(
                    "UPDATE chains SET holder = ?2, turn = ?3, round = ?4, round_turn = ?5
                     WHERE id = ?1",
                )?
                .execute(rusqlite::params![
                    chain.id, handoff.to, turn, round, round_turn
                ])?;
                let entry = Note {
                    turn,
                    sender: &handoff.by,
                    kind: ChainEntryKind::Handoff,
                    content: &handoff.prompt,
                    recipient: Some(&handoff.to),
                };
                note(conn, &chain.id, entry, now_ms)?;
                let chain = by_id(conn, &chain.id)?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
                Ok(Ok(Handed::Given(chain)))
            })
            .await,
        )
    }

    /// Post `content` as `sender`, who must hold the turn. The turn then goes back to the
    /// coordinator (unless the coordinator itself posted).
    pub async fn chain_post(
        &self,
        chain: &str,
        sender: &str,
        content: &str,
        now_ms: i64,
    ) -> Result<Posted, ChainError> {
        let (id, sender, content) = (normalize(chain), sender.to_owned(), content.to_owned());
        decided(
            self.write(move |conn| {
                let chain = match open_chain(conn, &id)? {
                    Ok(chain) => chain,
                    Err(refused) => return Ok(Err(refused)),
                };
                if chain.holder.as_deref() != Some(sender.as_str()) {
                    return Ok(Err(ChainError::NotHolder {
                        holder: chain.holder_name().to_owned(),
                        id: chain.id,
                        turn: chain.turn,
                    }));
                }
                let said = Note {
                    turn: chain.turn,
                    sender: &sender,
                    kind: ChainEntryKind::Message,
                    content: &content,
                    recipient: None,
                };
                let entry = note(conn, &chain.id, said, now_ms)?;
                let returned = !chain.coordinator_holds();
                if returned {
                    conn.prepare_cached(
                        "UPDATE chains SET holder = coordinator, turn = turn + 1 WHERE id = ?1",
                    )?
                    .execute([&chain.id])?;
                }
                let chain = by_id(conn, &chain.id)?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
                Ok(Ok(Posted {
                    chain,
                    entry,
                    returned,
                }))
            })
            .await,
        )
    }

    /// Hand the turn back to the coordinator with a system note, if the chain is open and still
    /// at `turn` with a participant holding it; `None` when the turn already moved on (a post
    /// or a close won the race), so a late timeout changes nothing.
    pub async fn chain_return(
        &self,
        chain: &str,
        turn: i64,
        reason: &str,
        now_ms: i64,
    ) -> Result<Option<Chain>, StoreError> {
        let (id, reason) = (normalize(chain), reason.to_owned());
        self.write(move |conn| {
            let Ok(chain) = open_chain(conn, &id)? else {
                return Ok(None);
            };
            if chain.turn != turn || chain.coordinator_holds() {
                return Ok(None);
            }
            let entry = Note {
                turn,
                sender: BATON,
                kind: ChainEntryKind::System,
                content: &reason,
                recipient: None,
            };
            note(conn, &chain.id, entry, now_ms)?;
            conn.prepare_cached(
                "UPDATE chains SET holder = coordinator, turn = turn + 1 WHERE id = ?1",
            )?
            .execute([&chain.id])?;
            by_id(conn, &chain.id)
        })
        .await
    }

    /// Close an open chain as `state`, noting who closed it and why. `Ok(None)` when it was
    /// already closed (closing twice is not an error: two people may say stop at once).
    /// With `at_turn`, close only if the chain is still at that turn (baton's own decisions,
    /// which a human's move since must win over).
    pub async fn chain_close(
        &self,
        chain: &str,
        close: ChainClose,
        now_ms: i64,
    ) -> Result<Option<Chain>, ChainError> {
        let id = normalize(chain);
        decided(
            self.write(move |conn| {
                let chain = match open_chain(conn, &id)? {
                    Ok(chain) => chain,
                    Err(ChainError::Closed { .. }) => return Ok(Ok(None)),
                    Err(refused) => return Ok(Err(refused)),
                };
                if close.at_turn.is_some_and(|turn| turn != chain.turn) {
                    return Ok(Ok(None));
                }
                let closed = close_in(conn, &chain, close.state, &close.by, &close.reason, now_ms)?;
                Ok(Ok(Some(closed)))
            })
            .await,
        )
    }

    /// One chain.
    pub async fn chain(&self, id: &str) -> Result<Option<Chain>, StoreError> {
        let id = normalize(id);
        self.read(move |conn| by_id(conn, &id)).await
    }

    /// Chains, newest first: all of them, or only the open ones started in one chat.
    pub async fn chains(&self, query: ChainQuery) -> Result<Vec<Chain>, StoreError> {
        let limit = i64::try_from(query.limit.unwrap_or(usize::MAX)).unwrap_or(i64::MAX);
        let (platform, chat) = query.open_in.unzip();
        self.read(move |conn| {
            conn.prepare_cached(&format!(
                "{SELECT} WHERE ?1 IS NULL
                    OR (state = 'open' AND origin_platform = ?1 AND origin_chat = ?2)
                 ORDER BY created_ms DESC, id LIMIT ?3"
            ))?
            .query_map(rusqlite::params![platform, chat, limit], chain_from_row)?
            .collect()
        })
        .await
    }

    /// A chain's log, oldest first.
    pub async fn chain_entries(&self, id: &str) -> Result<Vec<ChainEntry>, StoreError> {
        let id = normalize(id);
        self.read(move |conn| {
            conn.prepare_cached(
                "SELECT id, chain, turn, sender, kind, content, recipient, ts_ms
                 FROM chain_messages WHERE chain = ?1 ORDER BY id",
            )?
            .query_map([&id], entry_from_row)?
            .collect()
        })
        .await
    }
}

/// How to close a chain ([`Store::chain_close`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainClose {
    /// The state it ends in.
    pub state: ChainState,
    /// Who closes it: a bot id, a human's id, or `baton`.
    pub by: String,
    /// Why, for the log.
    pub reason: String,
    /// Close only if the chain is still at this turn.
    pub at_turn: Option<i64>,
}

/// Which chains to list ([`Store::chains`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChainQuery {
    /// Only the open chains started in this chat: (platform, chat id).
    pub open_in: Option<(String, String)>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("c.db").to_str().unwrap())
            .await
            .unwrap();
        (dir, store)
    }

    fn new_chain(coordinator: Option<&str>, participants: &[&str]) -> NewChain {
        NewChain {
            name: "launch review".into(),
            coordinator: coordinator.map(str::to_owned),
            participants: participants.iter().map(|p| (*p).to_owned()).collect(),
            origin: ChainOrigin {
                platform: "local".into(),
                chat: "room".into(),
                thread: None,
                anchor: Some("m1".into()),
                account: "snark".into(),
            },
            started_by: "admin".into(),
        }
    }

    fn hand(chain: &Chain, to: &str, max_rounds: u32) -> Handoff {
        Handoff {
            chain: chain.id.clone(),
            by: chain.coordinator_name().to_owned(),
            to: to.into(),
            prompt: format!("{to}, your turn"),
            add: false,
            max_rounds,
        }
    }

    fn given(handed: Handed) -> Chain {
        match handed {
            Handed::Given(chain) => chain,
            Handed::Capped(chain) => panic!("capped: {chain:?}"),
        }
    }

    #[tokio::test]
    async fn only_the_holder_posts_and_the_turn_returns_to_the_coordinator() {
        let (_dir, store) = store().await;
        let chain = store
            .create_chain(new_chain(Some("snark"), &["caid", "sec"]), 1)
            .await
            .unwrap();
        assert!(
            chain.id.starts_with("ch-") && chain.id.len() == 9,
            "{}",
            chain.id
        );
        assert_eq!(chain.holder.as_deref(), Some("snark"));
        assert!(chain.coordinator_holds());

        let chain = given(store.chain_hand(hand(&chain, "caid", 10), 2).await.unwrap());
        assert_eq!(
            (chain.holder.as_deref(), chain.turn, chain.round),
            (Some("caid"), 1, 1)
        );

        let err = store.chain_post(&chain.id, "sec", "me first", 3).await;
        assert!(
            matches!(&err, Err(ChainError::NotHolder { holder, turn: 1, .. }) if holder == "caid"),
            "{err:?}"
        );
        let err = store
            .chain_hand(hand(&chain, "sec", 10), 3)
            .await
            .unwrap_err();
        assert!(matches!(err, ChainError::TurnTaken { .. }), "{err}");

        let posted = store
            .chain_post(&chain.id, "caid", "risk: none", 4)
            .await
            .unwrap();
        assert!(posted.returned);
        assert_eq!(posted.chain.holder.as_deref(), Some("snark"));
        assert_eq!(posted.chain.turn, 2);
        // The coordinator may speak while it holds the turn; it keeps it.
        let own = store
            .chain_post(&chain.id, "snark", "thanks", 5)
            .await
            .unwrap();
        assert!(!own.returned);
        assert_eq!(own.chain.turn, 2);

        let log = store.chain_entries(&chain.id).await.unwrap();
        let kinds: Vec<_> = log.iter().map(|e| (e.kind, e.sender.as_str())).collect();
        assert_eq!(
            kinds,
            [
                (ChainEntryKind::System, "baton"),
                (ChainEntryKind::Handoff, "snark"),
                (ChainEntryKind::Message, "caid"),
                (ChainEntryKind::Message, "snark"),
            ]
        );
        assert_eq!(log[1].recipient.as_deref(), Some("caid"));
        assert_eq!(log[2].turn, 1);
    }

    #[tokio::test]
    async fn a_stale_return_changes_nothing_and_a_fresh_one_hands_back() {
        let (_dir, store) = store().await;
        let chain = store
            .create_chain(new_chain(Some("snark"), &["caid"]), 1)
            .await
            .unwrap();
        let chain = given(store.chain_hand(hand(&chain, "caid", 10), 2).await.unwrap());
        assert_eq!(
            store.chain_return(&chain.id, 0, "stale", 3).await.unwrap(),
            None
        );
        let back = store
            .chain_return(&chain.id, 1, "caid timed out", 3)
            .await
            .unwrap()
            .expect("handed back");
        assert_eq!((back.holder.as_deref(), back.turn), (Some("snark"), 2));
        assert_eq!(
            store.chain_return(&chain.id, 1, "again", 4).await.unwrap(),
            None
        );
        let late = store.chain_post(&chain.id, "caid", "late", 5).await;
        assert!(
            matches!(late, Err(ChainError::NotHolder { .. })),
            "{late:?}"
        );
        let log = store.chain_entries(&chain.id).await.unwrap();
        assert_eq!(log.last().unwrap().kind, ChainEntryKind::System);
        assert_eq!(log.last().unwrap().content, "caid timed out");
    }

    #[tokio::test]
    async fn rounds_end_when_a_speaker_comes_round_again_and_the_cap_closes() {
        let (_dir, store) = store().await;
        let chain = store
            .create_chain(new_chain(None, &["a", "b"]), 1)
            .await
            .unwrap();
        assert_eq!(chain.holder, None);
        assert_eq!(chain.coordinator_name(), "baton");
        let mut rounds = Vec::new();
        for to in ["a", "b", "a", "b"] {
            let chain = given(store.chain_hand(hand(&chain, to, 2), 2).await.unwrap());
            rounds.push(chain.round);
            store.chain_post(&chain.id, to, "said", 3).await.unwrap();
        }
        assert_eq!(rounds, [1, 1, 2, 2]);
        let Handed::Capped(capped) = store.chain_hand(hand(&chain, "a", 2), 4).await.unwrap()
        else {
            panic!("a third round is past the cap");
        };
        assert_eq!(capped.state, ChainState::Capped);
        assert_eq!(capped.holder_name(), "nobody");
        assert!(capped.closed_reason.unwrap().contains("max_rounds = 2"));
        let after = store.chain_post(&chain.id, "a", "more", 5).await;
        assert!(
            matches!(
                after,
                Err(ChainError::Closed {
                    state: ChainState::Capped,
                    ..
                })
            ),
            "{after:?}"
        );
    }

    #[tokio::test]
    async fn close_is_once_adds_join_and_open_chains_are_found_by_chat() {
        let (_dir, store) = store().await;
        let chain = store
            .create_chain(new_chain(Some("snark"), &[]), 1)
            .await
            .unwrap();
        let mut add = hand(&chain, "doc", 10);
        add.add = true;
        let chain = given(store.chain_hand(add, 2).await.unwrap());
        assert_eq!(chain.participants, ["doc"]);
        let open = ChainQuery {
            open_in: Some(("local".into(), "room".into())),
            limit: None,
        };
        assert_eq!(store.chains(open.clone()).await.unwrap().len(), 1);
        let stop = ChainClose {
            state: ChainState::Stopped,
            by: "admin".into(),
            reason: "enough".into(),
            at_turn: None,
        };
        let closed = store
            .chain_close(&chain.id.to_uppercase(), stop.clone(), 3)
            .await
            .unwrap()
            .expect("closed");
        assert_eq!(closed.state, ChainState::Stopped);
        assert_eq!(closed.closed_ms, Some(3));
        assert_eq!(store.chain_close(&chain.id, stop, 4).await.unwrap(), None);
        assert!(store.chains(open).await.unwrap().is_empty());
        assert_eq!(store.chains(ChainQuery::default()).await.unwrap().len(), 1);
        let unknown = store.chain_post("ch-nope22", "doc", "x", 5).await;
        assert!(
            matches!(unknown, Err(ChainError::Unknown(_))),
            "{unknown:?}"
        );
    }
}
