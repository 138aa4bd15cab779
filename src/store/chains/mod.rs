//! Chains: ordered, turn-enforced conversations among bots, and everything said
//! or done in them.
//!
//! The turn is the thing to protect. Two bots must never both believe they hold it, and a late
//! arrival (a post after a timeout, a timeout after a post) must never move it. So every move of
//! the turn — a handoff, a post, a hand-back, a close — is one job on the writer thread that
//! checks the chain's state, its holder and its turn number before it changes anything, and
//! writes the chain's log entry in the same transaction (`turns.rs`).
//!
//! - this file: what a chain and its log entries are;
//! - `rows.rs`: the columns, ids and the log entry every move writes;
//! - `start.rs`: a new chain (`Store::create_chain`) and its anchor;
//! - `turns.rs`: the moves of the turn (`chain_hand`, `chain_post`, `chain_return`,
//!   `chain_close`) and why one is refused ([`ChainError`]);
//! - `read.rs`: one chain, the open ones of a chat, a chain's log;
//! - `steps.rs`: the artifacts each turn took in and made (its lineage).
//!
//! Ids are short (`ch-` and six characters without look-alikes) because people type them.

mod read;
mod rows;
mod runner;
mod start;
mod steps;
mod turns;

use baton_contract::Platform;
use serde::{Serialize, Serializer};

use crate::bot_id::BotId;

pub use read::ChainQuery;
pub use runner::LeftChain;
pub use steps::{ChainStep, turn_run_id, turn_runs};
pub use turns::{ChainClose, ChainError, Handed, Handoff, Posted};

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
    /// The platform (stored by name).
    pub platform: Platform,
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
    pub coordinator: Option<BotId>,
    /// Participants, in order.
    pub participants: Vec<BotId>,
    /// Where it posts.
    pub origin: ChainOrigin,
    /// Who started it: a bot id, or a human's id.
    pub started_by: String,
    /// The trigger the turn that started it is charged to (SPEC 12); `None` when no turn did
    /// (an admin's command), and the chain becomes a trigger of its own, named by its id.
    pub trigger: Option<String>,
}

/// A stored chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Chain {
    /// `ch-xxxxxx`.
    pub id: String,
    /// What it is about.
    pub name: String,
    /// The coordinating bot; `None` when baton coordinates.
    pub coordinator: Option<BotId>,
    /// Who may post now.
    pub holder: Holder,
    /// Participants, in order.
    pub participants: Vec<BotId>,
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
    /// The trigger its turns are charged to (SPEC 12); `None` for a chain from before triggers
    /// were recorded, whose turns are each their own.
    pub trigger: Option<String>,
}

impl Chain {
    /// The coordinator's name: its bot id, or `baton`.
    pub fn coordinator_name(&self) -> &str {
        self.coordinator.as_ref().map_or(BATON, BotId::as_str)
    }

    /// Whether the coordinator holds the turn: the coordinating bot, or baton when it
    /// coordinates (also once closed, when nobody holds it).
    pub fn coordinator_holds(&self) -> bool {
        match (&self.holder, &self.coordinator) {
            (Holder::Bot(bot), Some(coordinator)) => bot == coordinator,
            (Holder::Bot(_), None) => false,
            (Holder::Baton | Holder::Nobody, coordinator) => coordinator.is_none(),
        }
    }

    /// Whether `bot` holds the turn.
    pub fn held_by(&self, bot: &BotId) -> bool {
        matches!(&self.holder, Holder::Bot(holder) if holder == bot)
    }

    /// The holder's name, for people: a bot id, `baton`, or `nobody` once closed.
    pub fn holder_name(&self) -> &str {
        match &self.holder {
            Holder::Bot(bot) => bot.as_str(),
            Holder::Baton => BATON,
            Holder::Nobody => "nobody",
        }
    }
}

/// Who may post in a chain now. Stored as the holder column (a bot id, or NULL) read with the
/// chain's state: NULL is baton while the chain is open, nobody once it closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holder {
    /// A bot: a participant given the turn, or the coordinating bot.
    Bot(BotId),
    /// baton itself, coordinating round-robin.
    Baton,
    /// Nobody: the chain is closed.
    Nobody,
}

impl Holder {
    /// The bot holding the turn, if a bot does.
    pub fn bot(&self) -> Option<&BotId> {
        match self {
            Holder::Bot(bot) => Some(bot),
            Holder::Baton | Holder::Nobody => None,
        }
    }
}

/// In JSON as the API has always shown it: the bot's name, or null when no bot holds it.
impl Serialize for Holder {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.bot().serialize(serializer)
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
