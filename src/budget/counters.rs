//! The budget series on `/metrics`: `baton_tokens_total{bot,kind}`, `baton_cost_usd_total{bot}`
//! and `baton_budget_refusals_total{budget}`. Labelled by bot ids and budget names, which the
//! config fixes, so the maps stay as small as the roster and the budget list.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use crate::backend::Usage;
use crate::bot_id::BotId;
use crate::metrics::header;

/// Tokens, cost and refusals since start.
#[derive(Default)]
pub struct Counters {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// Per bot: prompt tokens, completion tokens, USD.
    bots: BTreeMap<String, (u64, u64, f64)>,
    refusals: BTreeMap<String, u64>,
}

impl Counters {
    pub(crate) fn charged(&self, bot: &BotId, usage: Usage, cost: f64) {
        let mut kept = self.kept.lock().expect("budget counters poisoned");
        let entry = kept.bots.entry(bot.to_string()).or_default();
        entry.0 += usage.prompt_tokens;
        entry.1 += usage.completion_tokens;
        entry.2 += cost;
    }

    pub(crate) fn refused(&self, budget: &str) {
        let mut kept = self.kept.lock().expect("budget counters poisoned");
        *kept.refusals.entry(budget.to_owned()).or_default() += 1;
    }

    /// The three series, in Prometheus text.
    pub fn render(&self, out: &mut String) {
        let kept = self.kept.lock().expect("budget counters poisoned");
        header(
            out,
            "baton_tokens_total",
            "Model tokens used, by bot and kind (prompt, completion).",
            "counter",
        );
        for (bot, (prompt, completion, _)) in &kept.bots {
            let _ = writeln!(
                out,
                "baton_tokens_total{{bot=\"{bot}\",kind=\"prompt\"}} {prompt}"
            );
            let _ = writeln!(
                out,
                "baton_tokens_total{{bot=\"{bot}\",kind=\"completion\"}} {completion}"
            );
        }
        header(
            out,
            "baton_cost_usd_total",
            "What the model calls cost in USD, by bot (models with a price).",
            "counter",
        );
        for (bot, (_, _, cost)) in &kept.bots {
            let _ = writeln!(out, "baton_cost_usd_total{{bot=\"{bot}\"}} {cost}");
        }
        header(
            out,
            "baton_budget_refusals_total",
            "Model calls not made because a budget was used up, by budget.",
            "counter",
        );
        for (budget, n) in &kept.refusals {
            let _ = writeln!(
                out,
                "baton_budget_refusals_total{{budget=\"{budget}\"}} {n}"
            );
        }
    }
}
