//! Webhook mode: Telegram posts each update to `/hooks/telegram/<account>`, with the secret
//! baton gave `setWebhook` in `X-Telegram-Bot-Api-Secret-Token`.
//!
//! A missing or wrong secret gets 401 and nothing is read or recorded. An update is answered
//! 200 once the gateway has durably taken it (Telegram redelivers anything else, and a
//! redelivery is the same chat and message id, which the gateway's dedupe drops).

use baton_contract::{EventSink, WebhookRequest, WebhookResponse};
use serde_json::Value;
use subtle::ConstantTimeEq;

use crate::{Mode, TelegramAdapter};

/// The header Telegram carries the secret in.
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// Check, hand over, answer.
pub(crate) async fn handle(
    adapter: &TelegramAdapter,
    request: WebhookRequest,
    sink: &dyn EventSink,
) -> WebhookResponse {
    let settings = &adapter.settings;
    let account = &settings.account;
    if settings.mode != Mode::Webhook {
        return WebhookResponse::error(
            404,
            "this account polls getUpdates; set mode = \"webhook\" to take webhooks",
        );
    }
    let Some(secret) = &settings.secret_token else {
        return WebhookResponse::error(404, "this account has no secret; set secret_token_env");
    };
    let given = request.header(SECRET_HEADER).unwrap_or_default();
    if !bool::from(given.as_bytes().ct_eq(secret.expose().as_bytes())) {
        tracing::warn!(%account, "Telegram webhook refused: missing or wrong secret token");
        return WebhookResponse::error(401, "missing or wrong X-Telegram-Bot-Api-Secret-Token");
    }
    let update: Value = match serde_json::from_slice(&request.body) {
        Ok(update) => update,
        Err(err) => {
            tracing::warn!(%account, %err, "Telegram webhook body unreadable");
            return WebhookResponse::error(400, format!("the body is not an Update: {err}"));
        }
    };
    if adapter.identity().is_none() {
        // getMe has not answered yet: let Telegram retry rather than guess who we are.
        return WebhookResponse::error(503, "starting up; Telegram will retry");
    }
    match adapter.take(&update, sink).await {
        Ok(()) => WebhookResponse::status(200),
        Err(not_taken) => WebhookResponse::error(503, not_taken.to_string()),
    }
}
