//! Platform webhooks as plain data, so adapters need no HTTP server of their own.

use bytes::Bytes;

/// An HTTP request to `/hooks/<platform>/<account>`, as received: headers and the raw body.
/// Adapters verify signatures over `body` *before* parsing it.
#[derive(Debug, Clone)]
pub struct WebhookRequest {
    /// Header names in lowercase, with their values.
    pub headers: Vec<(String, String)>,
    /// The body exactly as sent.
    pub body: Bytes,
}

impl WebhookRequest {
    /// The first value of a header, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The answer to a webhook request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookResponse {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type` of `body`.
    pub content_type: &'static str,
    /// The body.
    pub body: Bytes,
}

impl WebhookResponse {
    /// `200` with a JSON body.
    pub fn json(value: &serde_json::Value) -> Self {
        Self {
            status: 200,
            content_type: "application/json",
            body: Bytes::from(value.to_string()),
        }
    }

    /// An empty answer with this status (`200` to acknowledge, `401` for a bad signature).
    pub fn status(status: u16) -> Self {
        Self {
            status,
            content_type: "text/plain",
            body: Bytes::new(),
        }
    }

    /// A plain-text error with this status; the text says what is wrong, never a secret.
    pub fn error(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            content_type: "text/plain",
            body: Bytes::from(message.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lookup_ignores_case() {
        let req = WebhookRequest {
            headers: vec![("x-slack-signature".into(), "v0=abc".into())],
            body: Bytes::new(),
        };
        assert_eq!(req.header("X-Slack-Signature"), Some("v0=abc"));
        assert_eq!(req.header("x-missing"), None);
    }
}
