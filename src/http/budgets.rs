//! `GET /api/budgets`: the budgets closest to their limit, for the dashboard's Spend tab
//! (SPEC 12). Each chat with calls in the last week is looked at the way `/baton budget` looks
//! at it, so the two agree; a budget seen from several chats is shown once, at its fullest.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::api::bad;
use crate::bot_id::BotId;
use crate::budget::{Standing, limit_text};
use crate::engine::Engine;
use crate::store::{SpendQuery, UsageGroup};
use crate::timing::now_ms;

/// How many budgets the tab shows.
const SHOWN: usize = 5;

/// How far back a chat's calls make it looked at: a week.
const LOOKED_AT_MS: i64 = 7 * 86_400_000;

/// The fullest budgets, fullest first.
pub(super) async fn budgets(State(engine): State<Engine>) -> Response {
    let query = SpendQuery {
        since_ms: now_ms() - LOOKED_AT_MS,
        ..SpendQuery::default()
    };
    let chats = match engine.store().usage_report(query, UsageGroup::Chat).await {
        Ok(rows) => rows,
        Err(err) => return bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
    };
    let mut fullest: Vec<Standing> = Vec::new();
    for row in chats {
        let Some((platform, chat)) = row.key.split_once(':') else {
            continue;
        };
        let Ok(platform) = platform.parse() else {
            continue;
        };
        let bots: Vec<BotId> = engine
            .roster()
            .accounts()
            .iter()
            .filter(|a| a.platform == platform)
            .map(|a| a.bot.id().clone())
            .collect();
        let standing = match engine.budgets().standing(platform, chat, &bots).await {
            Ok(standing) => standing,
            Err(err) => return bad(StatusCode::INTERNAL_SERVER_ERROR, &err.to_string()),
        };
        for s in standing {
            match fullest.iter_mut().find(|f| f.budget == s.budget) {
                Some(seen) if seen.share < s.share => *seen = s,
                Some(_) => {}
                None => fullest.push(s),
            }
        }
    }
    fullest.sort_by(|a, b| b.share.total_cmp(&a.share));
    fullest.truncate(SHOWN);
    let rows: Vec<Value> = fullest.iter().map(row).collect();
    Json(json!({ "budgets": rows })).into_response()
}

/// One budget as the tab shows it.
fn row(s: &Standing) -> Value {
    json!({
        "budget": s.budget,
        "scope": s.scope.as_str(),
        "tokens": s.tokens,
        "cost_usd": s.cost_usd,
        "limit": limit_text(s.limits),
        "share": s.share,
        "resets_in_s": s.resets_in.map(|d| d.as_secs()),
    })
}
