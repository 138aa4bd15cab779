//! `[prices]` and `[[budgets]]`: a budget names a bot that exists and a platform baton knows,
//! has a window that parses (none for a trigger budget, which lasts as long as its trigger),
//! and at least one limit above zero; a price is not negative. A price for a model no bot uses
//! is only a warning ([`unused_prices`]): it costs nothing, but is often a misspelt model.

use std::collections::{HashMap, HashSet};

use baton_contract::Platform;

use super::super::{BudgetScope, Config};
use super::{Checker, earlier};

/// The models `[prices."<model>"]` names that no bot uses, neither as its own `model` nor as a
/// chat's (`[[chats]] model`, `[[chats]] bots.<id>.model`): `baton check` warns about each.
pub fn unused_prices(config: &Config) -> Vec<String> {
    let used: HashSet<&str> = config
        .bots
        .iter()
        .filter_map(|b| b.model.as_deref())
        .chain(config.chats.iter().flat_map(|c| {
            c.model
                .as_deref()
                .into_iter()
                .chain(c.bots.values().filter_map(|b| b.model.as_deref()))
        }))
        .collect();
    config
        .prices
        .keys()
        .filter(|model| !used.contains(model.as_str()))
        .cloned()
        .collect()
}

impl Checker<'_> {
    pub(super) fn prices(&mut self, config: &Config) {
        for (model, price) in &config.prices {
            for (part, value) in [("prompt", price.prompt), ("completion", price.completion)] {
                if !(value.is_finite() && value >= 0.0) {
                    self.report(
                        format!("prices.\"{model}\".{part}"),
                        "must be a price in USD per million tokens, 0 or more",
                    );
                }
            }
        }
    }

    pub(super) fn budgets(&mut self, config: &Config) {
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, budget) in config.budgets.iter().enumerate() {
            let key = |part: &str| format!("budgets[{i}].{part}");
            if budget.name.trim().is_empty() {
                self.report(key("name"), "is empty; give the budget a name");
            } else if let Some(first) = earlier(&mut seen, budget.name.as_str(), i) {
                self.report(
                    key("name"),
                    format!(
                        "`{}` is already the name of budgets[{first}]; give each budget its own",
                        budget.name
                    ),
                );
            }
            if let Some(bot) = &budget.matches.bot {
                self.bot_ref(config, key("match.bot"), bot, |known| {
                    format!("name one of: {known}")
                });
            }
            if let Some(Err(unknown)) = budget
                .matches
                .platform
                .as_deref()
                .map(str::parse::<Platform>)
            {
                self.report(key("match.platform"), unknown.to_string());
            }
            match (budget.scope, budget.window()) {
                (_, Err(why)) => self.report(key("window"), why),
                (BudgetScope::Trigger, Ok(Some(_))) => self.report(
                    key("window"),
                    "a trigger budget has no window (it lasts as long as its trigger); remove it",
                ),
                (BudgetScope::Trigger, Ok(None)) | (_, Ok(Some(_))) => {}
                (_, Ok(None)) => self.report(
                    key("window"),
                    "is missing; write a rolling window such as \"1h\", \"1d\" or \"30d\"",
                ),
            }
            if budget.tokens.is_none() && budget.cost_usd.is_none() {
                self.report(
                    key("tokens"),
                    "the budget has no limit; set `tokens`, `cost_usd` or both",
                );
            }
            if budget.tokens.is_some_and(|t| t <= 0) {
                self.report(key("tokens"), "must be more than 0");
            }
            if budget.cost_usd.is_some_and(|c| !(c.is_finite() && c > 0.0)) {
                self.report(key("cost_usd"), "must be more than 0");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::problems;

    #[test]
    fn a_good_budget_passes() {
        let good = "[[bots]]\nid = \"caid\"\nbackend = \"echo\"\n\n\
                    [prices.\"m\"]\nprompt = 0.15\ncompletion = 0.6\n\n\
                    [[budgets]]\nname = \"d\"\nscope = \"bot\"\nmatch = { bot = \"caid\" }\n\
                    tokens = 100\ncost_usd = 1.5\nwindow = \"1d\"\non_exceed = \"warn\"\n\n\
                    [[budgets]]\nname = \"t\"\nscope = \"trigger\"\ntokens = 10\n";
        assert_eq!(problems(good), Vec::<String>::new());
    }

    #[test]
    fn a_price_no_bot_uses_is_named() {
        let text = "[[bots]]\nid = \"caid\"\nbackend = \"echo\"\nmodel = \"m\"\n\n\
                    [[bots]]\nid = \"snark\"\nbackend = \"echo\"\n\n\
                    [[chats]]\nplatform = \"slack\"\nid = \"C1\"\n\
                    bots = { snark = { model = \"here\" } }\n\n\
                    [prices.\"m\"]\nprompt = 1\n\n[prices.\"here\"]\nprompt = 1\n\n\
                    [prices.\"gpt-4o-mnii\"]\nprompt = 1\n";
        let config: crate::config::Config = toml::from_str(text).unwrap();
        assert_eq!(super::unused_prices(&config), ["gpt-4o-mnii"]);
    }

    #[test]
    fn each_bad_budget_is_reported_by_key() {
        let text = "[[bots]]\nid = \"caid\"\nbackend = \"echo\"\n\n\
                    [prices.\"m\"]\nprompt = -1\n\n\
                    [[budgets]]\nname = \"a\"\nmatch = { bot = \"nobody\", platform = \"irc\" }\n\
                    tokens = 0\nwindow = \"1 day\"\n\n\
                    [[budgets]]\nname = \"a\"\nscope = \"trigger\"\nwindow = \"1h\"\n\n\
                    [[budgets]]\nname = \"c\"\ncost_usd = -2.0\n";
        let found = problems(text);
        let expect = [
            ("prices.\"m\".prompt", "0 or more"),
            ("budgets[0].match.bot", "no bot has the id `nobody`"),
            ("budgets[0].match.platform", "unknown platform"),
            ("budgets[0].window", "\"1d\""),
            ("budgets[0].tokens", "more than 0"),
            ("budgets[1].name", "already the name"),
            ("budgets[1].window", "has no window"),
            ("budgets[1].tokens", "no limit"),
            ("budgets[2].window", "is missing"),
            ("budgets[2].cost_usd", "more than 0"),
        ];
        for (at, says) in expect {
            assert!(
                found.iter().any(|p| p.contains(at) && p.contains(says)),
                "no `{at}` saying `{says}` in {found:#?}"
            );
        }
        assert_eq!(found.len(), expect.len(), "{found:#?}");
    }
}
