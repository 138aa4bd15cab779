//! The Bot API calls baton makes, by hand over reqwest: `POST <api_url>/bot<token>/<method>`
//! with a JSON body, answered `{"ok": true, "result": ...}` or `{"ok": false, "error_code": N,
//! "description": "...", "parameters": {"retry_after": S}}`.
//!
//! Every answer that is not `ok` becomes an [`ApiError`] that keeps what the gateway needs: a
//! 429's `retry_after` (so the delivery step waits it out and retries, nothing having been
//! posted), a 401 (the token is wrong: the account stops), and the description of any other
//! refusal. Nothing here retries on its own, so nothing is posted twice. The token is part of
//! every URL, so no error ever carries a URL (reqwest's errors are stripped of theirs).

use std::time::Duration;

use baton_contract::{DownloadError, Downloaded, Secret, SendError, fetch};
use reqwest::multipart::Form;
use serde::Deserialize;
use serde_json::Value;

/// How long an ordinary call may take before it counts as a transport failure.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The wait a 429 is given when Telegram names none.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Telegram's real host.
pub const TELEGRAM_API_URL: &str = "https://api.telegram.org";

/// A Bot API call that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 401 Unauthorized: the bot token is wrong or revoked.
    #[error("Telegram refused the bot token (401 Unauthorized); get a new one from @BotFather")]
    Unauthorized,
    /// 429 Too Many Requests, with the wait Telegram asked for.
    #[error("rate limited by Telegram; retry after {0:?}")]
    RateLimited(Duration),
    /// Any other refusal (400 "message is too long", 403 "bot was kicked", 409 conflict...).
    #[error("Telegram refused `{method}`: {code} {description}")]
    Refused {
        /// The method called.
        method: &'static str,
        /// `error_code`.
        code: u16,
        /// `description`.
        description: String,
    },
    /// Telegram could not be reached, timed out, failed (5xx) or answered something unreadable.
    #[error("could not reach Telegram for `{method}`: {why}")]
    Transport {
        /// The method called.
        method: &'static str,
        /// What went wrong (never the URL: it holds the token).
        why: String,
    },
}

impl ApiError {
    /// Whether this is Telegram's "message is not modified" (an edit to the text it has).
    pub fn is_not_modified(&self) -> bool {
        matches!(self, ApiError::Refused { code: 400, description, .. }
            if description.contains("message is not modified"))
    }
}

impl From<ApiError> for SendError {
    fn from(err: ApiError) -> Self {
        match err {
            ApiError::RateLimited(retry_after) => SendError::RateLimited { retry_after },
            ApiError::Unauthorized => SendError::Rejected {
                code: "401".into(),
                message: err.to_string(),
            },
            ApiError::Refused {
                code, description, ..
            } => SendError::Rejected {
                code: code.to_string(),
                message: description,
            },
            ApiError::Transport { .. } => SendError::Transport(err.to_string()),
        }
    }
}

/// The envelope of every answer.
#[derive(Debug, Deserialize)]
struct Answer {
    ok: bool,
    #[serde(default)]
    result: Value,
    #[serde(default)]
    error_code: Option<u16>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Parameters>,
}

#[derive(Debug, Deserialize)]
struct Parameters {
    #[serde(default)]
    retry_after: Option<u64>,
}

/// Who the bot is (`getMe`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Me {
    /// The bot's user id.
    pub id: i64,
    /// Its `@username`, without the `@`.
    pub username: String,
    /// Its display name.
    pub first_name: String,
    /// Group Privacy is off: the bot receives every group message, not only commands,
    /// mentions and replies to it.
    #[serde(default)]
    pub can_read_all_group_messages: bool,
}

/// One account's Bot API client.
pub struct Api {
    client: reqwest::Client,
    /// `<api_url>`, without a trailing slash.
    base: String,
    token: Secret,
}

impl Api {
    /// A client for `api_url` (`https://api.telegram.org`, or a proxy or fake).
    pub fn new(api_url: &str, token: Secret) -> Self {
        let client = reqwest::Client::builder()
            .build()
            .expect("a default reqwest client always builds");
        Api {
            client,
            base: api_url.trim_end_matches('/').to_owned(),
            token,
        }
    }

    fn url(&self, method: &str) -> String {
        format!("{}/bot{}/{method}", self.base, self.token.expose())
    }

    /// Call `method` with a JSON body; its `result`.
    pub async fn call(&self, method: &'static str, body: &Value) -> Result<Value, ApiError> {
        self.call_with(method, body, REQUEST_TIMEOUT).await
    }

    /// Call `method`, giving it `timeout` (a long poll waits longer than a post).
    pub async fn call_with(
        &self,
        method: &'static str,
        body: &Value,
        timeout: Duration,
    ) -> Result<Value, ApiError> {
        let request = self
            .client
            .post(self.url(method))
            .timeout(timeout)
            .json(body);
        answer(method, request.send().await).await
    }

    /// Call `method` with a multipart body (a file).
    pub async fn call_multipart(
        &self,
        method: &'static str,
        form: Form,
    ) -> Result<Value, ApiError> {
        let request = self
            .client
            .post(self.url(method))
            .timeout(REQUEST_TIMEOUT)
            .multipart(form);
        answer(method, request.send().await).await
    }

    /// `getMe`.
    pub async fn get_me(&self) -> Result<Me, ApiError> {
        let result = self
            .call("getMe", &Value::Object(Default::default()))
            .await?;
        serde_json::from_value(result).map_err(|e| ApiError::Transport {
            method: "getMe",
            why: format!("unreadable answer: {e}"),
        })
    }

    /// A file's bytes (`getFile`, then `<api_url>/file/bot<token>/<file_path>`), at most
    /// `limit`.
    pub async fn download(&self, file_id: &str, limit: u64) -> Result<Downloaded, DownloadError> {
        let file = self
            .call("getFile", &serde_json::json!({ "file_id": file_id }))
            .await
            .map_err(|e| match e {
                ApiError::Refused { code, .. } => DownloadError::Status(code),
                ApiError::Unauthorized => DownloadError::Status(401),
                other => DownloadError::Transport(other.to_string()),
            })?;
        if let Some(size) = file.get("file_size").and_then(Value::as_u64)
            && size > limit
        {
            return Err(DownloadError::TooLarge {
                size: Some(size),
                limit,
            });
        }
        let path = file
            .get("file_path")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                DownloadError::NotAllowed(
                    "Telegram gave no file_path (files over 20 MB cannot be fetched by bots)"
                        .into(),
                )
            })?;
        let url = format!("{}/file/bot{}/{path}", self.base, self.token.expose());
        fetch(self.client.get(url), limit).await
    }
}

/// Read an answer into its `result` or an [`ApiError`].
async fn answer(
    method: &'static str,
    sent: Result<reqwest::Response, reqwest::Error>,
) -> Result<Value, ApiError> {
    let transport = |why: String| ApiError::Transport { method, why };
    let response = sent.map_err(|e| transport(e.without_url().to_string()))?;
    let status = response.status().as_u16();
    let body = response
        .bytes()
        .await
        .map_err(|e| transport(e.without_url().to_string()))?;
    let parsed: Option<Answer> = serde_json::from_slice(&body).ok();
    match parsed {
        Some(answer) if answer.ok => Ok(answer.result),
        Some(answer) => Err(refusal(method, status, answer)),
        None if status == 401 => Err(ApiError::Unauthorized),
        None => Err(transport(format!("HTTP {status} with an unreadable body"))),
    }
}

fn refusal(method: &'static str, status: u16, answer: Answer) -> ApiError {
    let code = answer.error_code.unwrap_or(status);
    match code {
        401 => ApiError::Unauthorized,
        429 => ApiError::RateLimited(
            answer
                .parameters
                .and_then(|p| p.retry_after)
                .map_or(DEFAULT_RETRY_AFTER, Duration::from_secs),
        ),
        500.. => ApiError::Transport {
            method,
            why: format!("{code} {}", answer.description.unwrap_or_default()),
        },
        _ => ApiError::Refused {
            method,
            code,
            description: answer.description.unwrap_or_default(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: Value, status: u16) -> ApiError {
        refusal("sendMessage", status, serde_json::from_value(body).unwrap())
    }

    #[test]
    fn the_real_error_shapes_are_read() {
        let limited = refused(
            serde_json::json!({"ok": false, "error_code": 429,
                "description": "Too Many Requests: retry after 7",
                "parameters": {"retry_after": 7}}),
            429,
        );
        assert_eq!(limited, ApiError::RateLimited(Duration::from_secs(7)));
        let unauthorized = refused(
            serde_json::json!({"ok": false, "error_code": 401, "description": "Unauthorized"}),
            401,
        );
        assert_eq!(unauthorized, ApiError::Unauthorized);
        let same = refused(
            serde_json::json!({"ok": false, "error_code": 400,
                "description": "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"}),
            400,
        );
        assert!(same.is_not_modified());
        let long = refused(
            serde_json::json!({"ok": false, "error_code": 400,
                "description": "Bad Request: message is too long"}),
            400,
        );
        assert!(!long.is_not_modified());
        let SendError::Rejected { code, message } = SendError::from(long) else {
            panic!("a 400 is a refusal");
        };
        assert_eq!(
            (code.as_str(), message.as_str()),
            ("400", "Bad Request: message is too long")
        );
    }
}
