//! Webhook mode: Feishu posts events to `/hooks/<feishu|lark>/<account>`.
//!
//! In order: the `X-Lark-Signature` over the raw bytes (when the app has an Encrypt Key, Feishu
//! signs every event), then the `{"encrypt": ...}` body decrypted, then the verification token
//! inside the event. Any failure answers 401 (not from Feishu) or 400 (unreadable) and reaches
//! nothing. `url_verification` (the console's "check the URL" request) is answered with its
//! challenge once its token matches; the SDKs do not expect it signed. Events are handed to the
//! gateway, which claims them durably and quickly, and Feishu gets its 200 well inside its 3 s;
//! a retry carries the same `event_id` and message id, so the gateway's dedupe drops it.

use baton_contract::{EventSink, WebhookRequest, WebhookResponse};
use serde_json::{Value, json};

use crate::{FeishuAdapter, Mode, crypto, signature};

/// Verify, decrypt, check, hand over, answer.
pub(crate) async fn handle(
    adapter: &FeishuAdapter,
    request: WebhookRequest,
    sink: &dyn EventSink,
) -> WebhookResponse {
    let settings = &adapter.settings;
    let account = &settings.account;
    if settings.mode != Mode::Webhook {
        return WebhookResponse::error(
            404,
            "this account uses the long connection; set mode = \"webhook\" to take webhooks",
        );
    }
    let Some(token) = &settings.verification_token else {
        return WebhookResponse::error(
            404,
            "this account has no verification token; set verification_token_env",
        );
    };
    let signed = request.header("x-lark-signature").is_some();
    if let Some(key) = &settings.encrypt_key
        && signed
        && let Err(err) = signature::verify(
            key.expose(),
            request.header("x-lark-request-timestamp"),
            request.header("x-lark-request-nonce"),
            request.header("x-lark-signature"),
            &request.body,
            unix_now(),
        )
    {
        tracing::warn!(%account, %err, "Feishu webhook refused");
        return WebhookResponse::error(401, err.to_string());
    }
    let event = match open(
        settings.encrypt_key.as_ref().map(|k| k.expose()),
        &request.body,
    ) {
        Ok(event) => event,
        Err(why) => {
            tracing::warn!(%account, why, "Feishu webhook body unreadable");
            return WebhookResponse::error(400, why);
        }
    };
    if let Err(err) = signature::check_token(token.expose(), &event) {
        tracing::warn!(%account, %err, "Feishu webhook refused");
        return WebhookResponse::error(401, err.to_string());
    }
    if event.get("type").and_then(Value::as_str) == Some("url_verification") {
        let challenge = event.get("challenge").cloned().unwrap_or(Value::Null);
        return WebhookResponse::json(&json!({ "challenge": challenge }));
    }
    if settings.encrypt_key.is_some() && !signed {
        let err = signature::SignatureError::Missing;
        tracing::warn!(%account, %err, "Feishu webhook refused");
        return WebhookResponse::error(401, err.to_string());
    }
    if adapter.identity().is_none() {
        // bot/v3/info has not answered yet: let Feishu retry rather than guess who we are.
        return WebhookResponse::error(503, "starting up; Feishu will retry");
    }
    if let Some(event) = adapter.normalize(&event).await
        && let Err(not_taken) = sink.accept(event).await
    {
        return WebhookResponse::error(503, format!("{not_taken}; Feishu will retry"));
    }
    WebhookResponse::json(&json!({ "msg": "success" }))
}

/// The event inside `body`: the body itself, or what its `encrypt` field decrypts to.
///
/// Public for the fuzz targets (`fuzz/`): this is the whole parse of a webhook body, which comes
/// from the outside before anything but its signature has been checked.
pub fn open(encrypt_key: Option<&str>, body: &[u8]) -> Result<Value, &'static str> {
    let outer: Value = serde_json::from_slice(body).map_err(|_| "the body is not JSON")?;
    let Some(encrypted) = outer.get("encrypt").and_then(Value::as_str) else {
        return Ok(outer);
    };
    let Some(key) = encrypt_key else {
        return Err(
            "the event is encrypted but this account has no encrypt key; set encrypt_key_env",
        );
    };
    let plain = crypto::decrypt(key, encrypted)
        .map_err(|_| "the event does not decrypt; check the account's encrypt_key_env")?;
    serde_json::from_str(&plain).map_err(|_| "the decrypted event is not JSON")
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_encrypted_bodies_open() {
        let plain = br#"{"challenge":"c","token":"t","type":"url_verification"}"#;
        assert_eq!(open(None, plain).unwrap()["challenge"], "c");
        let path = format!(
            "{}/fixtures/url_verification_encrypted.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let body = fixture["request_body"].to_string();
        let key = fixture["encrypt_key"].as_str().unwrap();
        let event = open(Some(key), body.as_bytes()).unwrap();
        assert_eq!(
            event["challenge"],
            fixture["expected_response"]["body"]["challenge"]
        );
        assert!(
            open(None, body.as_bytes()).is_err(),
            "no key to decrypt with"
        );
        assert!(open(Some("wrong"), body.as_bytes()).is_err());
        assert!(open(None, b"not json").is_err());
    }
}
