//! What was spent, as `GET /api/usage` and `baton usage` show it: usage since a time, filtered
//! by bot and chat, summed per bot, chat, trigger or model. One parser for the parameters and
//! one shape for the rows, so the two always agree.

use std::time::Duration;

use serde_json::{Value, json};

use crate::store::{SpendQuery, Store, StoreError, UsageGroup, UsageRow};

/// How far back a report looks when not told: a day.
const DEFAULT_SINCE: Duration = Duration::from_secs(86_400);

/// What a report asks for, as given (`?bot=&chat=&since=&group_by=`, or the CLI's flags).
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct UsageParams {
    /// Only this bot's calls.
    pub bot: Option<String>,
    /// Only calls charged to this chat (its id as the platform gives it).
    pub chat: Option<String>,
    /// Since when: ms since the epoch, or an age such as `24h`, `7d`, `30m` (default `24h`).
    pub since: Option<String>,
    /// `bot` (default), `chat`, `trigger` or `model`.
    pub group_by: Option<String>,
}

/// A report's parameters that do not parse, with what to write.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadParams(String);

impl UsageParams {
    /// The query and the grouping, read at `now_ms`.
    pub fn resolve(&self, now_ms: i64) -> Result<(SpendQuery, UsageGroup), BadParams> {
        let group = match &self.group_by {
            Some(g) => g.parse().map_err(BadParams)?,
            None => UsageGroup::Bot,
        };
        let since_ms = match self.since.as_deref().map(str::trim) {
            None | Some("") => now_ms - millis(DEFAULT_SINCE),
            Some(text) => match text.parse::<i64>() {
                Ok(ms) => ms,
                Err(_) => {
                    let hint =
                        "write ms since the epoch or an age such as \"24h\", \"7d\" or \"30m\"";
                    let units = [
                        ('s', 1),
                        ('m', 60),
                        ('h', 3600),
                        ('d', 86_400),
                        ('w', 604_800),
                    ];
                    let age = crate::timing::parse_span(text, &units, hint)
                        .map_err(|why| BadParams(format!("since: {why}")))?;
                    now_ms - millis(age)
                }
            },
        };
        let query = SpendQuery {
            since_ms,
            bot: self.bot.clone().filter(|b| !b.is_empty()),
            chat: self.chat.clone().filter(|c| !c.is_empty()),
            ..SpendQuery::default()
        };
        Ok((query, group))
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The report, read from `store`.
pub async fn usage(
    store: &Store,
    params: &UsageParams,
    now_ms: i64,
) -> Result<Result<(UsageGroup, Vec<UsageRow>), BadParams>, StoreError> {
    let (query, group) = match params.resolve(now_ms) {
        Ok(resolved) => resolved,
        Err(bad) => return Ok(Err(bad)),
    };
    Ok(Ok((group, store.usage_report(query, group).await?)))
}

/// `{"rows":[{"<group>": key, "prompt_tokens", "completion_tokens", "total_tokens",
/// "cost_usd", "estimated"}]}`; `cost_usd` is null for calls of models without a price.
pub fn to_json(group: UsageGroup, rows: &[UsageRow]) -> Value {
    let rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                group.as_str(): r.key,
                "prompt_tokens": r.prompt_tokens,
                "completion_tokens": r.completion_tokens,
                "total_tokens": r.total_tokens,
                "cost_usd": r.cost_usd,
                "estimated": r.estimated,
            })
        })
        .collect();
    json!({ "group_by": group.as_str(), "rows": rows })
}

/// The rows as a table for a terminal.
pub fn to_table(group: UsageGroup, rows: &[UsageRow]) -> String {
    let mut out = format!(
        "{:<32} {:>12} {:>12} {:>12} {:>10}\n",
        group.as_str(),
        "prompt",
        "completion",
        "total",
        "cost_usd"
    );
    for r in rows {
        let cost = r.cost_usd.map_or("-".to_owned(), |c| format!("{c:.4}"));
        let mark = if r.estimated { " (estimated)" } else { "" };
        out.push_str(&format!(
            "{:<32} {:>12} {:>12} {:>12} {:>10}{mark}\n",
            r.key, r.prompt_tokens, r.completion_tokens, r.total_tokens, cost
        ));
    }
    if rows.is_empty() {
        out.push_str("(no model calls in this period)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_read_ages_epochs_and_groupings() {
        let now = 10 * 86_400_000;
        let p = |since: Option<&str>, group: Option<&str>| UsageParams {
            since: since.map(Into::into),
            group_by: group.map(Into::into),
            ..UsageParams::default()
        };
        let (q, g) = p(None, None).resolve(now).unwrap();
        assert_eq!((q.since_ms, g), (now - 86_400_000, UsageGroup::Bot));
        let (q, g) = p(Some("2h"), Some("model")).resolve(now).unwrap();
        assert_eq!((q.since_ms, g), (now - 7_200_000, UsageGroup::Model));
        assert_eq!(
            p(Some("12345"), None).resolve(now).unwrap().0.since_ms,
            12345
        );
        let bad = p(Some("yesterday"), None).resolve(now).unwrap_err();
        assert!(bad.to_string().starts_with("since:"), "{bad}");
        let bad = p(None, Some("room")).resolve(now).unwrap_err();
        assert!(
            bad.to_string().contains("bot, chat, trigger or model"),
            "{bad}"
        );
    }
}
