//! `baton why --message ID | --event ID` and `GET /api/why?message=ID` (or `event=ID`): for one
//! inbound message, what each bot's pipeline decided and why (SPEC section 13), read from the
//! decision records (`store/decisions.rs`) with what each turn left: its posts with their
//! platform message ids, its failures, the deliveries it began. Both front doors print the
//! same report; neither shows an entry's raw payload or meta, only what was said.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::store::{DecisionQuery, EntryKind, Explained, Store, StoreError};

/// The query's parameters, as `GET /api/why` takes them.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WhyParams {
    /// The platform's message id.
    pub message: Option<String>,
    /// The platform's event id.
    pub event: Option<String>,
}

/// A query that names no message, or two.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("name one message: `message=<platform message id>` or `event=<platform event id>`")]
pub struct NoMessage;

impl WhyParams {
    /// Which decisions to read.
    pub fn query(self) -> Result<DecisionQuery, NoMessage> {
        match (self.message, self.event) {
            (Some(id), None) if !id.is_empty() => Ok(DecisionQuery::Message(id)),
            (None, Some(id)) if !id.is_empty() => Ok(DecisionQuery::Event(id)),
            _ => Err(NoMessage),
        }
    }
}

/// Every decision on the message, oldest first, with what its turn left.
pub async fn why(store: &Store, query: DecisionQuery) -> Result<Vec<Explained>, StoreError> {
    store.decisions(query).await
}

/// The report as `GET /api/why` answers it: `{"decisions": [...]}`.
pub fn to_json(found: &[Explained]) -> Value {
    let decisions: Vec<Value> = found.iter().map(decision_json).collect();
    json!({ "decisions": decisions })
}

fn decision_json(e: &Explained) -> Value {
    let d = &e.decision.decided;
    let posts: Vec<Value> = e
        .entries
        .iter()
        .filter(|x| x.kind == EntryKind::Reply && x.platform_message_id.is_some())
        .map(|x| json!({"message_id": x.platform_message_id, "text": x.text}))
        .collect();
    let turn: Vec<Value> = e
        .entries
        .iter()
        .map(|x| {
            json!({
                "kind": x.kind.as_str(),
                "speaker": x.speaker,
                "text": x.text,
                "message_id": x.platform_message_id,
                "ts_ms": x.ts_ms,
            })
        })
        .collect();
    let deliveries: Vec<Value> = e
        .deliveries
        .iter()
        .map(|x| {
            json!({
                "run_id": x.run_id,
                "sender": x.sender.as_str(),
                "target": x.target.as_str(),
                "state": x.state.as_str(),
                "reply": x.reply,
                "reason": x.reason,
            })
        })
        .collect();
    json!({
        "id": e.decision.id,
        "ts_ms": d.ts_ms,
        "platform": d.platform,
        "account": d.account,
        "bot": d.bot,
        "chat": d.chat,
        "message_id": d.message_id,
        "event_id": d.event_id,
        "sender": d.sender,
        "step": d.step.as_str(),
        "outcome": d.outcome.as_str(),
        "reason": d.reason,
        "session": d.session.as_ref().map(|s| s.render()),
        "run_id": d.run_id,
        "waited_ms": d.waited_ms,
        "posts": posts,
        "turn": turn,
        "deliveries": deliveries,
    })
}

/// The report for people: one decision line per received event per bot, then what its turn
/// did, indented.
pub fn to_text(found: &[Explained]) -> String {
    if found.is_empty() {
        return "no decision recorded for that message (received by no bot of this gateway, \
                or pruned with the transcripts)\n"
            .into();
    }
    let mut out = String::new();
    for e in found {
        let d = &e.decision.decided;
        let reason = if d.reason.is_empty() {
            String::new()
        } else {
            format!(": {}", d.reason)
        };
        out.push_str(&format!(
            "{} {} in {} from {}: {} {}{reason}\n",
            d.bot, d.message_id, d.chat, d.sender, d.step, d.outcome
        ));
        if let Some(run) = &d.run_id {
            let waited = d.waited_ms.unwrap_or(0);
            out.push_str(&format!("  turn {run} (waited {waited} ms for its lane)\n"));
        }
        for x in &e.entries {
            match (x.kind, &x.platform_message_id) {
                (EntryKind::Reply, Some(id)) => {
                    out.push_str(&format!("  posted {id}: {}\n", one_line(&x.text)));
                }
                (EntryKind::Silent | EntryKind::Failure | EntryKind::Notice, _) => {
                    out.push_str(&format!("  {}: {}\n", x.kind, one_line(&x.text)));
                }
                _ => {}
            }
        }
        for x in &e.deliveries {
            let reply = x.reply.as_deref().map(one_line).unwrap_or_default();
            out.push_str(&format!(
                "  delivery {} {} -> {}: {} {reply}\n",
                x.run_id, x.sender, x.target, x.state
            ));
        }
    }
    out
}

/// `text` on one line, at most 120 characters.
fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(120) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}
