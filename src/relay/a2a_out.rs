//! `sessions_send(target = "a2a:<peer>")`: a delivery to an A2A agent outside baton
//! (`[[a2a.peers]]`, SPEC 14).
//!
//! Not a second delivery system: the delivery is the same durable row as one to a bot, found
//! again by idempotency key, guarded, waited for and, when the sender gave up, pushed to the
//! sender's session as a late reply. Only its run differs: one JSON-RPC `SendMessage` to the
//! peer instead of a bot's turn, bounded by the peer's `timeout_seconds`, so a peer that is
//! down, slow or answers garbage ends the delivery `failed` (or `timed_out`) with the reason.
//! Every request to a peer is built by [`crate::backend::a2a_request`].

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};

use super::RunResult;
use crate::backend::{a2a_request, a2a_texts as texts};
use crate::config::{A2aPeer, Config, Secret, resolve_secret};
use crate::store::{Delivery, DeliveryState};

/// How long reaching a peer may take before it counts as down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a peer's unusable answer quoted in the reason.
const QUOTED: usize = 200;

/// The HTTP client every call to a peer goes through (pooled connections), and the peers'
/// tokens, read once at start like every other secret.
pub(super) struct Peers {
    client: reqwest::Client,
    /// By peer id, those with a `token_env` that is set.
    tokens: HashMap<String, Secret>,
}

impl Peers {
    /// The client and `config`'s peers' tokens from `env`, or why the client could not be
    /// built (the TLS roots).
    pub(super) fn new(
        config: &Config,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Peers, reqwest::Error> {
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()?;
        let tokens = config
            .a2a
            .peers
            .iter()
            .filter_map(|p| Some((p.id.clone(), resolve_secret(p.token_env.as_deref(), env)?)))
            .collect();
        Ok(Peers { client, tokens })
    }
}

/// The configured peer named `id`.
pub(super) fn peer<'c>(config: &'c Config, id: &str) -> Option<&'c A2aPeer> {
    config.a2a.peers.iter().find(|p| p.id == id)
}

/// A request to `peer` carrying JSON-RPC `body`, with its token and timeout.
fn request(peers: &Peers, peer: &A2aPeer, body: &Value) -> reqwest::RequestBuilder {
    let token = peers.tokens.get(&peer.id).map(Secret::expose);
    let timeout = Duration::from_secs(peer.timeout_seconds);
    a2a_request(&peers.client, &peer.url, token, Some(timeout), body)
}

/// Run delivery `d` to its peer: its message sent, the peer's answer as the run's result.
pub(super) async fn call(peers: &Peers, config: &Config, d: &Delivery) -> RunResult {
    let id = d.target.as_str();
    let Some(peer) = peer(config, id) else {
        return failed(format!(
            "A2A peer `{id}` is no longer configured under [[a2a.peers]]"
        ));
    };
    let body = json!({
        "jsonrpc": "2.0",
        "id": d.run_id,
        "method": "SendMessage",
        "params": {
            "message": {
                // The sender's idempotency key when it gave one: a retry is the same message.
                "messageId": d.idempotency_key.as_deref().unwrap_or(&d.run_id),
                "role": "ROLE_USER",
                "parts": [{"text": d.message}],
                "metadata": {"caller": d.sender},
            },
            "metadata": {"caller": d.sender},
        },
    });
    let response = match request(peers, peer, &body).send().await {
        Ok(response) => response,
        Err(err) => return unreachable(peer, &err),
    };
    let status = response.status();
    let text = match response.text().await {
        Ok(text) => text,
        Err(err) => return unreachable(peer, &err),
    };
    if !status.is_success() {
        return failed(format!(
            "A2A peer `{id}` answered HTTP {status}: {}",
            quoted(&text)
        ));
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(answer) => result_of(id, &answer),
        Err(_) => failed(format!(
            "A2A peer `{id}` answered something that is not JSON-RPC: {}",
            quoted(&text)
        )),
    }
}

/// A call that got no answer: too slow, or not reached at all.
fn unreachable(peer: &A2aPeer, err: &reqwest::Error) -> RunResult {
    if err.is_timeout() {
        return RunResult::Failed {
            state: DeliveryState::TimedOut,
            reason: format!(
                "A2A peer `{}` did not answer within {}s (its timeout_seconds)",
                peer.id, peer.timeout_seconds
            ),
        };
    }
    let what = if err.is_connect() {
        "could not be reached"
    } else {
        "broke off the answer"
    };
    failed(format!(
        "A2A peer `{}` {what} at {}: {}",
        peer.id,
        peer.url,
        std::error::Error::source(err).map_or_else(|| err.to_string(), ToString::to_string)
    ))
}

/// What a JSON-RPC answer to `SendMessage` says: a task (completed, or ended otherwise), a
/// message, or an error.
fn result_of(id: &str, answer: &Value) -> RunResult {
    if let Some(error) = answer.get("error") {
        let code = error
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or_default();
        let message = error.get("message").and_then(Value::as_str).unwrap_or("");
        return failed(format!(
            "A2A peer `{id}` refused the message: {message} (error {code})"
        ));
    }
    let result = answer.get("result");
    if let Some(message) = result.and_then(|r| r.get("message")) {
        return answered(id, texts(message.get("parts")));
    }
    let Some(task) = result.and_then(|r| r.get("task")) else {
        return failed(format!(
            "A2A peer `{id}` answered neither a task nor a message: {}",
            quoted(&answer.to_string())
        ));
    };
    let state = task
        .pointer("/status/state")
        .and_then(Value::as_str)
        .unwrap_or("none");
    let said = texts(task.pointer("/status/message/parts"));
    match state {
        "TASK_STATE_COMPLETED" => {
            let artifacts = task.get("artifacts").and_then(Value::as_array);
            let reply: Vec<String> = artifacts
                .into_iter()
                .flatten()
                .map(|a| texts(a.get("parts")))
                .filter(|t| !t.is_empty())
                .collect();
            let reply = if reply.is_empty() {
                said
            } else {
                reply.join("\n")
            };
            answered(id, reply)
        }
        "TASK_STATE_REJECTED" => RunResult::Failed {
            state: DeliveryState::Refused,
            reason: format!("A2A peer `{id}` rejected the task: {said}"),
        },
        "TASK_STATE_CANCELED" => RunResult::Failed {
            state: DeliveryState::Canceled,
            reason: format!("A2A peer `{id}` canceled the task: {said}"),
        },
        other => failed(format!(
            "A2A peer `{id}` ended the task {}: {said}",
            other
                .strip_prefix("TASK_STATE_")
                .unwrap_or(other)
                .to_lowercase()
        )),
    }
}

fn answered(id: &str, reply: String) -> RunResult {
    RunResult::Answered {
        reply,
        model: format!("a2a:{id}"),
    }
}

fn failed(reason: String) -> RunResult {
    RunResult::Failed {
        state: DeliveryState::Failed,
        reason,
    }
}

/// The start of a peer's unusable answer, for the reason.
fn quoted(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(QUOTED) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peers_answers_read_as_results() {
        let completed = json!({"result": {"task": {"status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"parts": [{"text": "42"}]}]}}});
        let message = json!({"result": {"message": {"parts": [{"text": "hi"}, {"data": 1}]}}});
        let rejected = json!({"result": {"task": {"status": {"state": "TASK_STATE_REJECTED",
            "message": {"parts": [{"text": "over budget"}]}}}}});
        let error = json!({"error": {"code": -32601, "message": "no such method"}});
        let garbage = json!({"result": 7});
        let cases = [
            (completed, "answered 42"),
            (message, "answered hi"),
            (
                rejected,
                "refused A2A peer `p` rejected the task: over budget",
            ),
            (
                error,
                "failed A2A peer `p` refused the message: no such method (error -32601)",
            ),
            (
                garbage,
                "failed A2A peer `p` answered neither a task nor a message: {\"result\":7}",
            ),
        ];
        for (answer, want) in cases {
            let got = match result_of("p", &answer) {
                RunResult::Answered { reply, model } => {
                    assert_eq!(model, "a2a:p");
                    format!("answered {reply}")
                }
                RunResult::Failed { state, reason } => format!("{state} {reason}"),
            };
            assert_eq!(got, want);
        }
    }
}
