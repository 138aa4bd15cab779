//! `sessions_list`, `sessions_history`, `session_status`: what a bot can read about the
//! conversations baton holds, its own and other bots'.
//!
//! A `session` argument is a session key, or a bot id meaning that bot's backchannel session
//! with the caller (where the caller's `sessions_send` messages to it went).

use baton_contract::Platform;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{AgentTools, ToolName, args, error};
use crate::session::SessionKey;
use crate::store::{DeliveryQuery, TranscriptQuery};

#[derive(Debug, Deserialize)]
struct ListArgs {
    #[serde(default)]
    bot: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Debug, Deserialize)]
struct SessionArgs {
    session: String,
    #[serde(default)]
    limit: Option<usize>,
}

/// The sessions the store holds, most recently active first.
pub(super) async fn list(tools: &AgentTools, raw: Value) -> Value {
    let a: ListArgs = match args(ToolName::SessionsList, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    let mut sessions = match tools.engine.store().sessions().await {
        Ok(sessions) => sessions,
        Err(err) => return error(format!("could not read the sessions: {err}")),
    };
    sessions.retain(|s| a.bot.as_deref().is_none_or(|bot| s.bot == bot));
    sessions.sort_by_key(|s| std::cmp::Reverse(s.updated_ms));
    sessions.truncate(a.limit.unwrap_or(50).clamp(1, 200));
    let sessions: Vec<Value> = sessions
        .into_iter()
        .map(|s| {
            json!({
                "session": s.key,
                "bot": s.bot,
                "platform": s.platform,
                "chat": s.chat,
                "thread": s.thread,
                "updated_ms": s.updated_ms,
                "entries": s.entries,
            })
        })
        .collect();
    json!({"status": "ok", "sessions": sessions})
}

/// One session's transcript, oldest first.
pub(super) async fn history(tools: &AgentTools, raw: Value) -> Value {
    let a: SessionArgs = match args(ToolName::SessionsHistory, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    let Some(session) = resolve(tools, &a.session) else {
        return unknown(&a.session);
    };
    let query = TranscriptQuery {
        last: Some(a.limit.unwrap_or(20).clamp(1, 200)),
        ..TranscriptQuery::session(session.clone())
    };
    let entries = match tools.engine.store().transcript(query).await {
        Ok(entries) => entries,
        Err(err) => return error(format!("could not read the transcript: {err}")),
    };
    let entries: Vec<Value> = entries
        .into_iter()
        .map(|e| {
            json!({
                "id": e.id,
                "ts_ms": e.ts_ms,
                "kind": e.kind,
                "speaker": e.speaker,
                "origin": e.origin,
                "text": e.text,
                "run_id": e.run_id,
            })
        })
        .collect();
    json!({"status": "ok", "session": session, "entries": entries})
}

/// One session's state: activity, whether a turn is running, deliveries in flight.
pub(super) async fn status(tools: &AgentTools, raw: Value) -> Value {
    let a: SessionArgs = match args(ToolName::SessionStatus, raw) {
        Ok(a) => a,
        Err(result) => return result,
    };
    let Some(session) = resolve(tools, &a.session) else {
        return unknown(&a.session);
    };
    let store = tools.engine.store();
    let record = match store.session(&session).await {
        Ok(record) => record,
        Err(err) => return error(format!("could not read the session: {err}")),
    };
    let query = DeliveryQuery {
        session: Some(session.clone()),
        open_only: true,
        limit: 20,
    };
    let open: Vec<Value> = store
        .deliveries(query)
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|d| {
            json!({"run_id": d.run_id, "from": d.sender, "to": d.target, "state": d.state,
                   "created_ms": d.created_ms, "progress": d.progress.last()})
        })
        .collect();
    json!({
        "status": "ok",
        "session": session,
        "exists": record.is_some(),
        "updated_ms": record.as_ref().map(|r| r.updated_ms),
        "entries": record.as_ref().map_or(0, |r| r.entries),
        "busy": tools.engine.lanes().session_busy(&session),
        "deliveries_in_flight": open,
    })
}

/// A session key as given, or a bot's backchannel session with the caller: the model's text
/// is read here, once.
pub(super) fn resolve(tools: &AgentTools, session: &str) -> Option<SessionKey> {
    let session = session.trim();
    if let Ok(key) = session.parse() {
        return Some(key);
    }
    let bot = session.parse().ok()?;
    let account = tools
        .engine
        .roster()
        .account_of_bot(Platform::Local, &bot)?;
    Some(SessionKey::backchannel(
        &bot,
        account.id.clone(),
        &tools.caller.bot,
    ))
}

pub(super) fn unknown(session: &str) -> Value {
    error(format!(
        "`{session}` is neither a session key (bot:<bot>:<platform>:<account>:<chat>) nor a bot \
         id; sessions_list shows the sessions"
    ))
}
