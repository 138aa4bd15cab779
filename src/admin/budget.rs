//! `/baton budget` (the budgets that count this chat's calls and its bots': used, limit, window,
//! resets in) and `/baton budget set NAME tokens|cost_usd VALUE` (a limit over the config's,
//! kept in the store for every instance; audited like every admin command).

use super::Invocation;
use super::error::AdminError;
use crate::bot_id::BotId;
use crate::budget::{LimitKind, grouped, limit_text};
use crate::engine::Engine;

/// The budgets of this chat and its bots.
pub(super) async fn show(engine: &Engine, inbound: &Invocation<'_>) -> Result<String, AdminError> {
    let platform = inbound.event.platform;
    let bots: Vec<BotId> = engine
        .roster()
        .accounts()
        .iter()
        .filter(|a| a.platform == platform)
        .map(|a| a.bot.id().clone())
        .collect();
    let standing = engine
        .budgets()
        .standing(platform, inbound.event.chat.as_str(), &bots)
        .await?;
    if standing.is_empty() {
        return Ok("No budget counts this chat or its bots.".to_owned());
    }
    let mut out = String::from("Budgets here:");
    for s in standing {
        let used = match s.limits.cost_usd {
            Some(_) => format!("{} tokens, ${:.2}", grouped(s.tokens), s.cost_usd),
            None => format!("{} tokens", grouped(s.tokens)),
        };
        let window = s.window.map_or_else(
            || "per trigger".to_owned(),
            |w| format!("rolling {}", span(w.as_secs())),
        );
        out.push_str(&format!(
            "\n• {} ({}): {used} of {} ({:.0}%), {window}",
            s.budget,
            s.scope.as_str(),
            limit_text(s.limits),
            s.share * 100.0,
        ));
        if let Some(resets) = s.resets_in {
            out.push_str(&format!(", frees up in {}", span(resets.as_secs().max(1))));
        }
    }
    Ok(out)
}

/// Sets a budget's limit.
pub(super) async fn set(
    engine: &Engine,
    name: &str,
    kind: LimitKind,
    value: &str,
) -> Result<String, AdminError> {
    engine
        .budgets()
        .set_limit(name, kind, value)
        .await
        .map_err(|e| AdminError::Budget(e.to_string()))?;
    let what = match kind {
        LimitKind::Tokens => "tokens",
        LimitKind::CostUsd => "cost_usd",
    };
    Ok(format!("Budget `{name}`: {what} limit is now {value}."))
}

/// `3725` seconds as `1h 2m`.
fn span(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    let parts: Vec<String> = [(d, "d"), (h, "h"), (m, "m"), (s, "s")]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .take(2)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::span;

    #[test]
    fn spans_read_short() {
        assert_eq!(span(86_400), "1d");
        assert_eq!(span(3725), "1h 2m");
        assert_eq!(span(59), "59s");
    }
}
