//! The `http` backend: POST the normalized turn as JSON to a URL and read `{"reply": "..."}` or
//! `{"silent": true}` back, so any agent runtime can sit behind baton.
//!
//! Unlike the `openai` backend it never retries: the agent behind the URL may already have acted
//! (sent mail, opened a ticket) before failing, and a second POST would act twice.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::{
    Backend, BackendError, BackendReply, REQUEST_TIMEOUT, ToolExecutor, TurnRequest,
    describe_transport_error, error_message, http_client, quote, redacted_url,
};

/// Posts each turn to an agent's URL. Tools are the agent's own business: the executor is unused.
pub struct HttpBackend {
    url: String,
    timeout: Duration,
    client: reqwest::Client,
}

impl HttpBackend {
    /// A backend posting to `url`, with the default [`REQUEST_TIMEOUT`]. Fails only if the TLS
    /// stack cannot be set up.
    pub fn new(url: impl Into<String>) -> Result<Self, BackendError> {
        Ok(Self {
            url: url.into(),
            timeout: REQUEST_TIMEOUT,
            client: http_client()?,
        })
    }

    /// How long the agent may take for one turn, builder style.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

#[async_trait]
impl Backend for HttpBackend {
    async fn run(
        &self,
        request: &TurnRequest,
        _tools: &dyn ToolExecutor,
    ) -> Result<BackendReply, BackendError> {
        let transport = |e: reqwest::Error| {
            BackendError::Unreachable(describe_transport_error(&e, &self.url, self.timeout))
        };
        let response = self
            .client
            .post(&self.url)
            .timeout(self.timeout)
            .json(request)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status();
        let text = response.text().await.map_err(transport)?;
        if !status.is_success() {
            return Err(BackendError::Status {
                status: status.as_u16(),
                attempts: 1,
                message: error_message(status, &text),
            });
        }
        let value: Value = serde_json::from_str(&text).map_err(|e| {
            BackendError::BadResponse(format!(
                "{} answered non-JSON ({e}): {}",
                redacted_url(&self.url),
                quote(&text)
            ))
        })?;
        let default_model = if request.model.is_empty() {
            "http"
        } else {
            &request.model
        };
        agent_reply(&value, default_model).unwrap_or_else(|| {
            Err(BackendError::BadResponse(format!(
                "{} answered neither {{\"reply\": \"...\"}} nor {{\"silent\": true}}: {}",
                redacted_url(&self.url),
                quote(&text)
            )))
        })
    }
}

/// Reads the agent reply protocol shared by the `http` and `command` backends:
/// `{"silent": true}` is an explicit silence, `{"reply": "..."}` a reply, and an optional
/// `"model"` names who answered (else `default_model`). `None` when `value` speaks neither form.
pub(super) fn agent_reply(
    value: &Value,
    default_model: &str,
) -> Option<Result<BackendReply, BackendError>> {
    let object = value.as_object()?;
    let model = object
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(default_model)
        .to_owned();
    if object.get("silent").and_then(Value::as_bool) == Some(true) {
        return Some(Ok(BackendReply {
            text: None,
            model,
            usage: None,
        }));
    }
    match object.get("reply")? {
        Value::String(text) => Some(Ok(BackendReply {
            text: Some(text.clone()),
            model,
            usage: None,
        })),
        other => Some(Err(BackendError::BadResponse(format!(
            "\"reply\" must be a string, got {}",
            quote(&other.to_string())
        )))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_reply_silent_and_model() {
        let reply = agent_reply(&json!({"reply": "hi"}), "m").unwrap().unwrap();
        assert_eq!(reply.text.as_deref(), Some("hi"));
        assert_eq!(reply.model, "m");
        let reply = agent_reply(&json!({"reply": "hi", "model": "claude"}), "m")
            .unwrap()
            .unwrap();
        assert_eq!(reply.model, "claude");
        let silent = agent_reply(&json!({"silent": true}), "m").unwrap().unwrap();
        assert_eq!(silent.text, None);
    }

    #[test]
    fn rejects_other_shapes() {
        assert!(agent_reply(&json!({"answer": "hi"}), "m").is_none());
        assert!(agent_reply(&json!("hi"), "m").is_none());
        assert!(agent_reply(&json!({"silent": false}), "m").is_none());
        assert!(matches!(
            agent_reply(&json!({"reply": 3}), "m"),
            Some(Err(BackendError::BadResponse(_)))
        ));
    }
}
