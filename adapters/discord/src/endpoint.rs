//! The HTTP interactions endpoint, `/hooks/discord/<account>`, for accounts with `public_key`.
//!
//! Discord signs each request with Ed25519 over timestamp + body; the signature is checked with
//! serenity's verifier *before* a byte of the body is parsed, and a missing or bad signature, or
//! a timestamp over 5 minutes old, gets 401 and reaches nothing (Discord itself probes the URL
//! with bad signatures and expects exactly that). A PING gets a PONG. A `/baton` invocation is
//! handed to the gateway, and the HTTP response is its first answer chunk (ephemeral) if that
//! comes within [`DEFER_AFTER`], or else an ephemeral deferral that the answer then edits: either
//! way well inside Discord's 3 s.

use baton_contract::{EventSink, WebhookRequest, WebhookResponse};
use serde_json::{Value, json};
use serenity::model::application::Interaction;

use crate::Shared;
use crate::interactions::{DEFER_AFTER, Phase};
use crate::normalize;

/// How old a signed request may be.
const MAX_AGE_SECONDS: i64 = 300;

/// Verify, parse, hand over, answer.
pub(crate) async fn handle(
    shared: &Shared,
    request: WebhookRequest,
    sink: &dyn EventSink,
) -> WebhookResponse {
    let Some(verifier) = &shared.verifier else {
        return WebhookResponse::error(
            404,
            "this Discord account takes no HTTP interactions; set its public_key to enable them",
        );
    };
    let (Some(signature), Some(timestamp)) = (
        request.header("x-signature-ed25519"),
        request.header("x-signature-timestamp"),
    ) else {
        return WebhookResponse::error(401, "missing X-Signature-Ed25519 / X-Signature-Timestamp");
    };
    if verifier
        .verify(signature, timestamp, &request.body)
        .is_err()
    {
        tracing::warn!(account = %shared.settings.account, "Discord interaction with a bad signature refused");
        return WebhookResponse::error(401, "bad request signature");
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    if !fresh(timestamp, now) {
        return WebhookResponse::error(401, "stale or unreadable request timestamp");
    }
    let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
        return WebhookResponse::error(400, "the body is not JSON");
    };
    match body.get("type").and_then(Value::as_u64) {
        Some(1) => WebhookResponse::json(&json!({ "type": 1 })),
        Some(2) => command(shared, body, sink).await,
        _ => WebhookResponse::error(400, "baton only takes the /baton application command"),
    }
}

/// Whether `timestamp` (Unix seconds) is within [`MAX_AGE_SECONDS`] of `now`. `abs_diff`: a
/// timestamp near i64::MIN or MAX is stale, not an overflow.
fn fresh(timestamp: &str, now: i64) -> bool {
    timestamp
        .parse::<i64>()
        .is_ok_and(|ts| now.abs_diff(ts) <= MAX_AGE_SECONDS.unsigned_abs())
}

async fn command(shared: &Shared, body: Value, sink: &dyn EventSink) -> WebhookResponse {
    if !normalize::image_hashes_are_ascii(&body) {
        return WebhookResponse::error(400, "an image hash in the interaction is not hex");
    }
    let Ok(Interaction::Command(command)) = serde_json::from_value::<Interaction>(body) else {
        return WebhookResponse::error(400, "not an application command interaction");
    };
    let normalized = {
        let dir = shared.directory.read().expect("directory lock poisoned");
        normalize::interaction(&shared.settings.account, &dir, &command)
    };
    let event = match normalized {
        Ok(event) => event,
        Err(skip) => {
            tracing::debug!(account = %shared.settings.account, ?skip, "interaction skipped");
            return WebhookResponse::error(400, "baton only takes the /baton application command");
        }
    };
    // The first chunk of the answer comes back here and becomes this very response; if it is
    // slow, the response is the deferral and the answer edits it.
    let id = command.id.to_string();
    let (tx, mut rx) = tokio::sync::oneshot::channel();
    shared.interactions.register(&id, Phase::Http(tx));
    if let Err(not_taken) = sink.accept(event).await {
        return WebhookResponse::error(503, format!("{not_taken}; try again shortly"));
    }
    let first = tokio::select! {
        text = &mut rx => text.ok(),
        _ = tokio::time::sleep(DEFER_AFTER) => None,
    };
    let first = match first {
        Some(text) => Some(text),
        None => shared.interactions.settle_http(&id, &mut rx).await,
    };
    match first {
        Some(text) => WebhookResponse::json(&json!({
            "type": 4,
            "data": { "content": text, "flags": 64, "allowed_mentions": { "parse": [] } },
        })),
        None => WebhookResponse::json(&json!({ "type": 5, "data": { "flags": 64 } })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same overflow `fuzz/` found in the Slack and Feishu signature checks: a signed
    /// timestamp at the edge of i64 must be refused, not overflow the age check.
    #[test]
    fn fuzz_regression_an_extreme_timestamp_is_stale() {
        let now = 1_700_000_000;
        assert!(fresh("1700000100", now));
        assert!(!fresh("1700000301", now));
        assert!(!fresh("-9223372036854775808", now));
        assert!(!fresh("9223372036854775807", now));
        assert!(!fresh("soon", now));
    }
}
