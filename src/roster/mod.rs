//! The roster: every bot with its backend and tool set, every account with its adapter, and
//! the per-chat rules they work under.
//!
//! Built once at start-up from the config (the "resolved" stage of the two-stage config), then
//! shared read-only. It answers the identity questions the pipeline asks: which account received
//! an event, which baton bot a platform user id belongs to, which rules hold in a chat.

mod backends;
mod chat_rules;
mod tool_set;

use std::sync::Arc;

use baton_contract::{AccountId, Adapter, Platform, UserId};

pub use backends::Backends;
pub(crate) use chat_rules::glob_set;
pub use chat_rules::{ChatPolicy, ChatRules, ChatRulesError, Persona, Personas};
pub use tool_set::{ToolName, ToolSet};

use crate::bot_id::BotId;
use crate::config::BotConfig;

/// One bot, ready to take turns.
pub struct Bot {
    /// Its name, parsed from the config entry's `id`.
    pub id: BotId,
    /// Its config entry.
    pub config: BotConfig,
    /// The system prompt text (inline or read from its file at start-up).
    pub system_prompt: String,
    /// What runs its turns: its own backend, and those its chats give it.
    pub backends: Backends,
    /// The agent tools its `tools` list allows.
    pub tools: ToolSet,
}

impl Bot {
    /// The bot's id.
    pub fn id(&self) -> &BotId {
        &self.id
    }
}

/// One bot's login on one platform.
pub struct Account {
    /// The platform.
    pub platform: Platform,
    /// The account's id (unique per platform).
    pub id: AccountId,
    /// The bot it speaks for.
    pub bot: Arc<Bot>,
    /// Its connection.
    pub adapter: Arc<dyn Adapter>,
}

/// Every bot and account.
pub struct Roster {
    bots: Vec<Arc<Bot>>,
    accounts: Vec<Account>,
}

impl Roster {
    /// A roster of these bots and accounts.
    pub fn new(bots: Vec<Arc<Bot>>, accounts: Vec<Account>) -> Self {
        Self { bots, accounts }
    }

    /// Every bot, in config order.
    pub fn bots(&self) -> &[Arc<Bot>] {
        &self.bots
    }

    /// A bot by id.
    pub fn bot(&self, id: &BotId) -> Option<&Arc<Bot>> {
        self.bots.iter().find(|b| b.id() == id)
    }

    /// Every account, in config order.
    pub fn accounts(&self) -> &[Account] {
        &self.accounts
    }

    /// The account that received an event.
    pub fn account(&self, platform: Platform, id: &AccountId) -> Option<&Account> {
        self.accounts
            .iter()
            .find(|a| a.platform == platform && &a.id == id)
    }

    /// The account a bot uses on a platform (its first, when it has several).
    pub fn account_of_bot(&self, platform: Platform, bot: &BotId) -> Option<&Account> {
        self.accounts
            .iter()
            .find(|a| a.platform == platform && a.bot.id() == bot)
    }

    /// Which baton bot a platform user id belongs to, if any: the identity each adapter
    /// learned from its platform (`auth.test`, READY, `bot/v3/info`).
    pub fn bot_of_user(&self, platform: Platform, user: &UserId) -> Option<&Arc<Bot>> {
        self.accounts
            .iter()
            .filter(|a| a.platform == platform)
            .find(|a| a.adapter.self_id().as_ref() == Some(user))
            .map(|a| &a.bot)
    }
}
