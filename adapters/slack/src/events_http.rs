//! The Events API endpoint, `/hooks/slack/<account>`, and slash commands over HTTP.
//!
//! The signature is checked over the raw body before a byte of it is parsed; an unsigned, badly
//! signed or stale (over 5 minutes) request gets 401 and reaches nothing. Slack retries (with
//! `X-Slack-Retry-Num`) carry the same `event_id` and message, so they go to the gateway's
//! durable dedupe like any event: one already handled is dropped there, and one whose first
//! delivery never arrived is still handled once. Either way Slack gets its 200 at once.

use baton_contract::{EventSink, WebhookRequest, WebhookResponse};
use serde_json::{Map, Value, json};

use crate::SlackAdapter;
use crate::signature;

/// Verify, parse, hand over, answer.
pub(crate) async fn handle(
    adapter: &SlackAdapter,
    request: WebhookRequest,
    sink: &dyn EventSink,
) -> WebhookResponse {
    let Some(secret) = &adapter.settings.signing_secret else {
        return WebhookResponse::error(
            404,
            "this Slack account has no signing secret; set signing_secret_env and mode = \"events\"",
        );
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    if let Err(err) = signature::verify(
        secret.expose(),
        request.header("x-slack-request-timestamp"),
        request.header("x-slack-signature"),
        &request.body,
        now,
    ) {
        tracing::warn!(account = %adapter.settings.account, %err, "Slack request refused");
        return WebhookResponse::error(401, err.to_string());
    }
    let is_form = request
        .header("content-type")
        .is_some_and(|c| c.starts_with("application/x-www-form-urlencoded"));
    if is_form {
        return command(adapter, &request.body, sink).await;
    }
    // Every Events API payload is an object; anything else (an array, a bare string) is as
    // malformed as bad JSON, and never acknowledged as if it were an unknown event.
    let body = match serde_json::from_slice::<Value>(&request.body) {
        Ok(body @ Value::Object(_)) => body,
        Ok(_) => {
            return WebhookResponse::error(
                400,
                "the body is JSON but not an object; Slack sends objects",
            );
        }
        Err(_) => return WebhookResponse::error(400, "the body is not JSON"),
    };
    match body.get("type").and_then(Value::as_str) {
        Some("url_verification") => {
            let challenge = body.get("challenge").cloned().unwrap_or(Value::Null);
            WebhookResponse::json(&json!({ "challenge": challenge }))
        }
        Some("event_callback") => {
            if adapter.identity().is_none() {
                // auth.test has not answered yet: let Slack retry rather than guess who we are.
                return WebhookResponse::error(503, "starting up; Slack will retry");
            }
            if let Some(retry) = request.header("x-slack-retry-num") {
                tracing::debug!(account = %adapter.settings.account, retry, "Slack redelivery");
            }
            if let Some(event) = adapter.normalize_event(&body)
                && let Err(not_taken) = sink.accept(event).await
            {
                return WebhookResponse::error(503, format!("{not_taken}; Slack will retry"));
            }
            WebhookResponse::status(200)
        }
        _ => WebhookResponse::status(200),
    }
}

/// A slash command: form fields, answered later and privately through `response_url`.
async fn command(adapter: &SlackAdapter, body: &[u8], sink: &dyn EventSink) -> WebhookResponse {
    let fields: Map<String, Value> = url::form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
        .collect();
    let Some(event) = adapter.normalize_command(&Value::Object(fields)) else {
        return WebhookResponse::error(400, "not a slash command this account takes");
    };
    if let Err(not_taken) = sink.accept(event).await {
        return WebhookResponse::error(503, format!("{not_taken}; try again shortly"));
    }
    WebhookResponse::status(200)
}
