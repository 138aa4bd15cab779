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

#[cfg(test)]
mod tests {
    use baton_contract::AccountId;

    use super::super::testing::{error_of, in_room};
    use super::*;
    use crate::gateway::testing::{Parts, echo_config, parts};
    use crate::lanes::Lane;
    use crate::store::{EntryKind, NewEntry, Origin};

    async fn gateway() -> Parts {
        parts(&echo_config(&["lead", "alpha", "beta"], "")).await
    }

    fn key(text: &str) -> SessionKey {
        text.parse().unwrap()
    }

    /// `text` said by ann in `session` at `ts_ms`, which was active then.
    async fn said(gw: &Parts, session: &SessionKey, ts_ms: i64, text: &str) {
        let store = gw.engine.store();
        let entry = NewEntry {
            session: session.clone(),
            ts_ms,
            kind: EntryKind::Inbound,
            speaker: "ann".into(),
            origin: Origin::Human,
            text: text.into(),
            platform_message_id: None,
            run_id: None,
            idempotency_key: None,
            meta: json!({}),
        };
        store.append(entry).await.unwrap();
        store.touch_session(session, ts_ms).await.unwrap();
    }

    fn keys(result: &Value) -> Vec<&str> {
        assert_eq!(result["status"], "ok", "{result}");
        let sessions = result["sessions"].as_array().unwrap();
        sessions
            .iter()
            .map(|s| s["session"].as_str().unwrap())
            .collect()
    }

    /// A bot's name stands for its backchannel session with the caller, where the caller's
    /// sends to it went; anything else must be a session key.
    #[tokio::test]
    async fn a_session_is_a_key_or_a_bots_backchannel_with_the_caller() {
        let gw = gateway().await;
        let lead = in_room(&gw.relay, "lead", None);
        let alpha = "alpha".parse().unwrap();
        let backchannel =
            SessionKey::backchannel(&alpha, AccountId::from("alpha"), &lead.caller.bot);
        assert_eq!(resolve(&lead, " alpha "), Some(backchannel));
        let room = key("bot:beta:local:beta:room");
        assert_eq!(resolve(&lead, "bot:beta:local:beta:room"), Some(room));
        assert_eq!(resolve(&lead, "gamma"), None, "no such bot");
        assert_eq!(resolve(&lead, "not a session"), None);
        let unknown = history(&lead, json!({"session": "not a session"})).await;
        assert!(error_of(&unknown).contains("neither a session key"));
    }

    #[tokio::test]
    async fn the_list_is_most_recent_first_by_bot_and_bounded() {
        let gw = gateway().await;
        let (a1, a2, b1) = (
            key("bot:alpha:local:alpha:room"),
            key("bot:alpha:local:alpha:other"),
            key("bot:beta:local:beta:room"),
        );
        said(&gw, &a1, 1_000, "one").await;
        said(&gw, &b1, 3_000, "three").await;
        said(&gw, &a2, 2_000, "two").await;
        let lead = in_room(&gw.relay, "lead", None);
        let (a1, a2, b1) = (a1.render(), a2.render(), b1.render());

        assert_eq!(keys(&list(&lead, json!({})).await), [&b1, &a2, &a1]);
        assert_eq!(
            keys(&list(&lead, json!({"bot": "alpha"})).await),
            [&a2, &a1]
        );
        assert_eq!(keys(&list(&lead, json!({"limit": 1})).await), [&b1]);
        assert_eq!(
            keys(&list(&lead, json!({"limit": 0})).await),
            [&b1],
            "at least one"
        );
        let listed = list(&lead, json!({"bot": "beta"})).await;
        assert_eq!(listed["sessions"][0]["chat"], "room", "{listed}");
    }

    #[tokio::test]
    async fn history_gives_the_last_entries_oldest_first() {
        let gw = gateway().await;
        let lead = in_room(&gw.relay, "lead", None);
        let backchannel = resolve(&lead, "alpha").unwrap();
        for (n, text) in ["first", "second", "third"].into_iter().enumerate() {
            said(&gw, &backchannel, 1_000 + i64::try_from(n).unwrap(), text).await;
        }
        let read = history(&lead, json!({"session": "alpha", "limit": 2})).await;
        assert_eq!(read["status"], "ok", "{read}");
        let texts: Vec<&str> = read["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["second", "third"]);
    }

    /// While the target's session is busy, a send to it waits in flight, and the sender sees
    /// that from the session's status.
    #[tokio::test]
    async fn status_shows_a_busy_session_and_the_sends_in_flight_to_it() {
        let gw = gateway().await;
        let lead = in_room(&gw.relay, "lead", Some("run-1"));
        let fresh = status(&lead, json!({"session": "alpha"})).await;
        assert_eq!(
            (&fresh["exists"], &fresh["busy"], &fresh["entries"]),
            (&json!(false), &json!(false), &json!(0)),
            "{fresh}"
        );
        let backchannel = resolve(&lead, "alpha").unwrap();
        let _busy = gw.engine.lanes().enter(Lane::Main, &backchannel).await;
        let fire = json!({"target": "alpha", "message": "hi", "timeout_seconds": 0});
        let accepted = super::super::send::call(&lead, fire).await;
        assert_eq!(accepted["status"], "accepted", "{accepted}");

        let now = status(&lead, json!({"session": "alpha"})).await;
        assert_eq!(now["busy"], true, "{now}");
        let in_flight = now["deliveries_in_flight"].as_array().unwrap();
        assert_eq!(in_flight.len(), 1, "{now}");
        assert_eq!(
            (&in_flight[0]["run_id"], &in_flight[0]["from"]),
            (&accepted["run_id"], &json!("lead"))
        );
    }
}
