//! `[prices."<model>"]` and `[[budgets]]`: what a model's tokens cost, and how much a bot, a chat,
//! a trigger or the whole gateway may spend (SPEC section 12).

use std::collections::BTreeMap;

use serde::Deserialize;

/// `[prices."<model>"]`: USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
pub struct PriceConfig {
    /// USD per million prompt tokens.
    #[serde(default)]
    pub prompt: f64,
    /// USD per million completion tokens.
    #[serde(default)]
    pub completion: f64,
}

/// The prices, by model name.
pub type PricesConfig = BTreeMap<String, PriceConfig>;

/// What a budget's spend is counted per.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetScope {
    /// Per bot.
    #[default]
    Bot,
    /// Per chat the trigger happened in (a thread counts toward its channel).
    Chat,
    /// Per trigger: everything one message (or schedule, or API request) set off.
    Trigger,
    /// The whole gateway.
    Gateway,
}

impl BudgetScope {
    /// The name in the config and in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetScope::Bot => "bot",
            BudgetScope::Chat => "chat",
            BudgetScope::Trigger => "trigger",
            BudgetScope::Gateway => "gateway",
        }
    }
}

/// What happens when a budget is used up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnExceed {
    /// The model call is not made; the chat is told once per window.
    #[default]
    Stop,
    /// The call is made; admins are told once at 80 % and once at 100 %.
    Warn,
}

/// `match = { ... }`: which calls a budget counts. Unset keys match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct BudgetMatch {
    /// A bot id.
    pub bot: Option<String>,
    /// A platform name (`slack`, `discord`, ...).
    pub platform: Option<String>,
    /// A chat id as the platform gives it.
    pub chat: Option<String>,
}

/// One `[[budgets]]` entry.
#[derive(Debug, Clone, Deserialize)]
pub struct BudgetConfig {
    /// Its name, in notices, refusals and `/baton budget`.
    pub name: String,
    /// What its spend is counted per.
    #[serde(default)]
    pub scope: BudgetScope,
    /// Which calls it counts.
    #[serde(default, rename = "match")]
    pub matches: BudgetMatch,
    /// A limit in tokens (prompt + completion).
    pub tokens: Option<i64>,
    /// A limit in USD (models without a price count tokens only).
    pub cost_usd: Option<f64>,
    /// The rolling window (`1h`, `1d`, `30d`); a trigger budget has none.
    pub window: Option<String>,
    /// Stop or warn.
    #[serde(default)]
    pub on_exceed: OnExceed,
}

impl BudgetConfig {
    /// The rolling window: `Ok(None)` when it has none (a trigger budget), `Err` with what to
    /// write when it does not parse.
    pub fn window(&self) -> Result<Option<std::time::Duration>, String> {
        let Some(text) = &self.window else {
            return Ok(None);
        };
        let hint = "write a window such as \"1h\", \"1d\" or \"30d\" (units s, m, h, d, w)";
        let units = [
            ('s', 1),
            ('m', 60),
            ('h', 3600),
            ('d', 86_400),
            ('w', 7 * 86_400),
        ];
        crate::timing::parse_span(text, &units, hint).map(Some)
    }
}
