//! The reporting commands: `status` (the gateway at a glance), `bots`, `limits` (the guards as
//! they stand in this chat) and `transcript` (what was said here lately).

use std::fmt::Write as _;

use super::{AdminError, Invocation, resolve_bot};
use crate::engine::Engine;
use crate::metrics::RefusalCount;
use crate::roster::Bot;
use crate::session::SessionKey;
use crate::store::{ChainQuery, Entry, EntryKind, TranscriptQuery};
use crate::timing::Board;

/// Accounts and their connections, lanes and their queues, guard refusals in the last hour,
/// open chains, and the `schedule`'s next due times.
pub(super) async fn status(engine: &Engine, schedule: &Board) -> String {
    let mut out = String::from("baton status\nAccounts:");
    for account in engine.roster().accounts() {
        let state = account.adapter.connection_state();
        let _ = write!(
            out,
            "\n- {}/{} (bot {}): {}",
            account.platform,
            account.id,
            account.bot.id(),
            state.as_str()
        );
        if let Some(attempt) = state.attempt() {
            let _ = write!(out, " (attempt {attempt})");
        }
        if let Some(trouble) = account.adapter.connection().trouble() {
            let _ = write!(out, ": {trouble}");
        }
    }
    out.push_str("\nLanes:");
    for load in engine.lanes().load() {
        let _ = write!(
            out,
            "\n- {}: {} running, {} queued, capacity {}",
            load.lane, load.running, load.queued, load.capacity
        );
    }
    let _ = write!(
        out,
        "\nGuard refusals in the last hour: {}",
        refusals(&engine.metrics().recent.last_hour(None))
    );
    let open = engine
        .store()
        .chains(ChainQuery::default())
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.state == crate::store::ChainState::Open)
        .count();
    let _ = write!(out, "\nOpen chains: {open}");
    let due = schedule.next_due();
    if !due.is_empty() {
        out.push_str("\nScheduled:");
        for next in due {
            let _ = write!(
                out,
                "\n- {} {}: next at {}",
                next.bot,
                next.job,
                next.local.format("%Y-%m-%d %H:%M %:z")
            );
        }
    }
    out
}

/// The roster, one bot a line.
pub(super) fn bots(engine: &Engine) -> String {
    let mut out = String::from("Bots:");
    for bot in engine.roster().bots() {
        let _ = write!(out, "\n- {}", bot_line(bot));
    }
    out
}

fn bot_line(bot: &Bot) -> String {
    let c = &bot.config;
    let model = c
        .model
        .as_deref()
        .map(|m| format!(", {m}"))
        .unwrap_or_default();
    format!(
        "{} ({}) — {:?}{model}. {}",
        c.id,
        c.display_name(),
        c.backend,
        c.description
    )
    .trim_end()
    .to_owned()
}

/// The guards as they stand in this chat: its settings, the budgets, the bot reply chain so far,
/// its chains, and what was refused here in the last hour.
pub(super) async fn limits(engine: &Engine, inbound: &Invocation<'_>) -> String {
    let config = engine.config();
    let l = &config.limits;
    let settings = engine
        .store()
        .chat_settings(inbound.settings_key)
        .await
        .unwrap_or_default();
    let activation = settings.activation.unwrap_or(inbound.activation);
    let paused = if settings.paused.is_empty() {
        "none".to_owned()
    } else {
        settings.paused.join(", ")
    };
    let chain_now = inbound.bot_chain;
    let chains = &config.chains;
    let coordinator = match &chains.coordinator {
        Some(bot) => format!("{bot} coordinates"),
        None => format!("baton coordinates round-robin, {} round(s)", chains.rounds),
    };
    let open_here = engine
        .store()
        .chains(ChainQuery {
            open_in: Some((
                inbound.event.platform.to_string(),
                inbound.event.chat.to_string(),
            )),
            limit: None,
        })
        .await
        .unwrap_or_default();
    let open_here = if open_here.is_empty() {
        "none".to_owned()
    } else {
        let ids: Vec<&str> = open_here.iter().map(|c| c.id.as_str()).collect();
        ids.join(", ")
    };
    let here = engine
        .metrics()
        .recent
        .last_hour(Some(inbound.settings_key));
    format!(
        "Limits in {chat}\n\
         - this chat: activation {activation}; paused: {paused}\n\
         - inbound: {inbound_rate} messages per sender per bot per minute\n\
         - bot messages: {pair} per bot pair per minute, then {cooldown} s cooldown; bot reply \
         chain {chain_now} of {max_chain} since a human last spoke\n\
         - sessions_send: {send_pair} per pair and {send_sender} per sender per minute, at \
         most {fan} targets per {fan_window} s, depth {depth}, ping-pong {ping}\n\
         - chains: {coordinator}; turn timeout {timeout} s; at most {max_rounds} rounds; open \
         here: {open_here}\n\
         Refused here in the last hour: {refused}",
        chat = inbound.settings_key,
        inbound_rate = l.inbound_per_sender_per_minute,
        pair = l.bot_pair_events_per_minute,
        cooldown = l.bot_pair_cooldown_seconds,
        max_chain = l.max_bot_reply_chain,
        send_pair = l.send_per_pair_per_minute,
        send_sender = l.send_per_sender_per_minute,
        fan = l.fan_out_targets,
        fan_window = l.fan_out_window_seconds,
        depth = l.max_depth,
        ping = l.max_ping_pong_turns,
        timeout = chains.turn_timeout_seconds,
        max_rounds = chains.max_rounds,
        refused = refusals(&here),
    )
}

/// `guard/reason ×n, ...`, or `none`.
fn refusals(counts: &[RefusalCount]) -> String {
    if counts.is_empty() {
        return "none".to_owned();
    }
    let parts: Vec<String> = counts
        .iter()
        .map(|c| format!("{}/{} ×{}", c.guard, c.reason, c.count))
        .collect();
    parts.join(", ")
}

/// The last `lines` lines of this chat's (and thread's) transcript: one bot's session with
/// everything it recorded, or — without a bot — what was said here, merged from every bot's
/// session, each message once.
pub(super) async fn transcript(
    engine: &Engine,
    inbound: &Invocation<'_>,
    bot: Option<&str>,
    lines: usize,
) -> Result<String, AdminError> {
    let event = &inbound.event;
    let store = engine.store();
    let entries = match bot {
        Some(name) => {
            let bot = resolve_bot(engine, inbound, name)?;
            let Some(account) = engine.roster().account_of_bot(event.platform, &bot) else {
                return Err(AdminError::NoAccountHere {
                    bot,
                    platform: event.platform.to_string(),
                });
            };
            let key = SessionKey {
                bot: bot.clone(),
                platform: event.platform,
                account: account.id.clone(),
                chat: event.chat.clone(),
                thread: event.thread.clone(),
            };
            let query = TranscriptQuery {
                last: Some(lines),
                ..TranscriptQuery::session(key)
            };
            store.transcript(query).await?
        }
        None => {
            let sessions = store.sessions().await?;
            let thread = event.thread.as_ref().map(ToString::to_string);
            let mut merged: Vec<Entry> = Vec::new();
            let here = sessions.iter().filter(|s| {
                s.platform == event.platform.as_str()
                    && s.chat == event.chat.as_str()
                    && s.thread == thread
            });
            for session in here {
                let query = TranscriptQuery {
                    last: Some(lines * 4),
                    ..TranscriptQuery::session(session.key.clone())
                };
                merged.extend(store.transcript(query).await?);
            }
            said_here(merged, lines)
        }
    };
    if entries.is_empty() {
        return Ok("Nothing is recorded in this chat yet.".to_owned());
    }
    let mut out = format!("Last {} line(s) here:", entries.len());
    for entry in &entries {
        out.push('\n');
        out.push_str(&entry.line());
    }
    Ok(out)
}

/// What was said in a chat, from several bots' sessions: messages and posted replies only, in
/// the order they were recorded, each inbound message once (every bot that heard it kept it),
/// the last `lines` of them.
fn said_here(mut entries: Vec<Entry>, lines: usize) -> Vec<Entry> {
    entries.retain(|e| matches!(e.kind, EntryKind::Inbound | EntryKind::Reply));
    entries.sort_by_key(|e| e.id);
    let mut seen = std::collections::HashSet::new();
    entries.retain(|e| match (&e.kind, &e.platform_message_id) {
        (EntryKind::Inbound, Some(id)) => seen.insert(id.clone()),
        _ => true,
    });
    let skip = entries.len().saturating_sub(lines);
    entries.split_off(skip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Origin;

    fn entry(id: i64, kind: EntryKind, message: Option<&str>, text: &str) -> Entry {
        Entry {
            id,
            session: crate::session::test_key(&format!("s{id}")),
            ts_ms: 0,
            kind,
            speaker: "x".into(),
            origin: Origin::Human,
            text: text.into(),
            platform_message_id: message.map(str::to_owned),
            run_id: None,
            idempotency_key: None,
            meta: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_chat_transcript_keeps_each_message_once_in_order() {
        let entries = vec![
            entry(4, EntryKind::Reply, Some("r1"), "answer"),
            entry(1, EntryKind::Inbound, Some("m1"), "question"),
            entry(2, EntryKind::Inbound, Some("m1"), "question"),
            entry(3, EntryKind::ToolCall, None, "bots_list {}"),
            entry(5, EntryKind::Inbound, Some("m2"), "thanks"),
        ];
        let texts =
            |entries: Vec<Entry>| -> Vec<String> { entries.into_iter().map(|e| e.text).collect() };
        let said = texts(said_here(entries.clone(), 10));
        assert_eq!(said, ["question", "answer", "thanks"]);
        let last = texts(said_here(entries, 2));
        assert_eq!(last, ["answer", "thanks"]);
    }
}
