//! Events as Feishu sends them: messages and files, and webhook bodies encrypted and signed
//! as Feishu does.

use super::*;

/// An `im.message.receive_v1` event for app `app` (`cli_<name>`): `text` may hold `@_user_N`
/// placeholders for `mentions` (open_id, name) in order.
pub fn message_event(
    app: &str,
    event_id: &str,
    message_id: &str,
    chat: (&str, &str),
    sender: &str,
    text: &str,
    mentions: &[(&str, &str)],
) -> Value {
    let (chat_id, chat_type) = chat;
    let mentions: Vec<Value> = mentions
        .iter()
        .enumerate()
        .map(|(n, (open_id, name))| {
            json!({ "key": format!("@_user_{}", n + 1), "id": { "open_id": open_id, "union_id": format!("on_{open_id}") },
                    "name": name, "tenant_key": "tenant" })
        })
        .collect();
    json!({
        "schema": "2.0",
        "header": {
            "event_id": event_id, "event_type": "im.message.receive_v1",
            "create_time": "1700000000000", "token": "verification-token",
            "app_id": format!("cli_{app}"), "tenant_key": "tenant"
        },
        "event": {
            "sender": { "sender_id": { "open_id": sender, "union_id": format!("on_{sender}") },
                        "sender_type": "user", "tenant_key": "tenant" },
            "message": {
                "message_id": message_id, "create_time": "1700000000000",
                "chat_id": chat_id, "chat_type": chat_type, "message_type": "text",
                "content": json!({ "text": text }).to_string(),
                "mentions": mentions
            }
        }
    })
}

/// [`message_event`] for an `image` message (`content` `{"image_key": ...}`), or with
/// `file_name` a `file` message (`{"file_key": ..., "file_name": ...}`).
pub fn file_event(
    app: &str,
    event_id: &str,
    message_id: &str,
    chat: (&str, &str),
    sender: &str,
    key: &str,
    file_name: Option<&str>,
) -> Value {
    let mut event = message_event(app, event_id, message_id, chat, sender, "", &[]);
    let message = &mut event["event"]["message"];
    let (kind, content) = match file_name {
        None => ("image", json!({ "image_key": key })),
        Some(name) => ("file", json!({ "file_key": key, "file_name": name })),
    };
    message["message_type"] = kind.into();
    message["content"] = content.to_string().into();
    event
}

/// A webhook body for `event`: encrypted with `encrypt_key` (fixed IV) when given.
pub fn webhook_body(event: &Value, encrypt_key: Option<&str>) -> String {
    match encrypt_key {
        Some(key) => {
            let iv: [u8; 16] = std::array::from_fn(|i| (i * 7) as u8);
            json!({ "encrypt": baton_feishu::crypto::encrypt(key, iv, &event.to_string()) })
                .to_string()
        }
        None => event.to_string(),
    }
}

/// `X-Lark-*` signature headers for `body`, signed with `encrypt_key` at `timestamp`.
pub fn signed_headers(
    encrypt_key: &str,
    timestamp: i64,
    body: &str,
) -> Vec<(&'static str, String)> {
    let ts = timestamp.to_string();
    let nonce = "n0nce";
    vec![
        ("x-lark-request-timestamp", ts.clone()),
        ("x-lark-request-nonce", nonce.to_owned()),
        (
            "x-lark-signature",
            baton_feishu::signature::sign(&ts, nonce, encrypt_key, body.as_bytes()),
        ),
    ]
}
