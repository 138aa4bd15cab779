//! The Open Platform calls baton makes, by hand over reqwest: the tenant token, `bot/v3/info`,
//! message reply/create/read, chat membership, and the long connection's endpoint.
//!
//! Every call but the token and the endpoint carries a `tenant_access_token`. It is cached and
//! fetched again shortly before its `expire`; if Feishu still calls it invalid (revoked, or the
//! clock drifted), the cache is dropped and the call is made once more with a fresh token —
//! once, so a misconfigured app cannot loop. Feishu answers errors as HTTP 200 with a non-zero
//! `code` (rate limits may also come as HTTP 429); [`ApiError`] sorts them into what the adapter
//! acts on. Nothing here retries a send: the gateway decides, from the contract's error kinds.

use std::time::Duration;

use baton_contract::Secret;
use bytes::Bytes;
use reqwest::multipart::{Form, Part};
use serde_json::{Value, json};
use tokio::sync::Mutex;
use tokio::time::Instant;

/// The API's gateway-wide rate limit (`request trigger frequency limit`).
pub const CODE_RATE_LIMITED: i64 = 99991400;
/// The IM message frequency limit (5 QPS per chat or per user).
pub const CODE_MESSAGE_RATE_LIMITED: i64 = 230020;
/// Token codes after which the official SDKs fetch a new token and retry once.
pub const TOKEN_INVALID_CODES: [i64; 3] = [99991663, 99991664, 99991671];

/// How long before `expire` a cached token is replaced (the Go SDK's `expiryDelta`), at most half
/// the token's lifetime.
const REFRESH_MARGIN: Duration = Duration::from_secs(180);
/// When Feishu rate-limits without saying for how long.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Why a call failed, in the terms the adapter acts on.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// The app id or secret was refused: fix `app_id` / `app_secret_env`.
    #[error(
        "Feishu refused the app credentials ({0}); check the account's app_id and app_secret_env"
    )]
    Auth(String),
    /// Feishu asked us to slow down; nothing was done.
    #[error("rate limited by Feishu; retry after {0:?}")]
    RateLimited(Duration),
    /// Feishu answered with a non-zero `code`.
    #[error("Feishu error {code}: {msg}")]
    Feishu {
        /// Feishu's error code.
        code: i64,
        /// Its explanation.
        msg: String,
    },
    /// An HTTP error without a Feishu body.
    #[error("Feishu answered HTTP {0}")]
    Http(u16),
    /// The request's fate is unknown (connection refused or reset, timeout, unreadable body).
    #[error("could not reach Feishu: {0}")]
    Transport(String),
}

/// Who this account is, from `bot/v3/info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotInfo {
    /// The bot's `open_id` in its own app's namespace: mentions of it carry this id.
    pub open_id: String,
    /// The app's display name.
    pub app_name: String,
}

/// Where the long connection goes, from `/callback/ws/endpoint`.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint {
    /// The websocket URL, with `device_id` and `service_id` in its query.
    pub url: String,
    /// How often to ping, as the server asks.
    pub ping_interval: Option<Duration>,
}

struct CachedToken {
    value: Secret,
    refresh_at: Instant,
}

/// One app's API client.
pub struct Api {
    http: reqwest::Client,
    base: String,
    app_id: String,
    app_secret: Secret,
    token: Mutex<Option<CachedToken>>,
}

impl Api {
    /// A client for the Open Platform at `base` (`https://open.feishu.cn`, or Lark's host).
    pub fn new(base: &str, app_id: &str, app_secret: Secret) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .expect("the TLS backend initialises");
        Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            app_id: app_id.to_owned(),
            app_secret,
            token: Mutex::new(None),
        }
    }

    /// The base URL calls go to.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The HTTP client, for a call whose answer is not JSON (a message resource's bytes).
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A valid tenant token: the cached one, or a new one when it is close to `expire`.
    pub async fn tenant_token(&self) -> Result<Secret, ApiError> {
        let mut cached = self.token.lock().await;
        if let Some(token) = cached.as_ref()
            && Instant::now() < token.refresh_at
        {
            return Ok(token.value.clone());
        }
        let body = json!({ "app_id": self.app_id, "app_secret": self.app_secret.expose() });
        let response = self
            .http
            .post(self.url("/open-apis/auth/v3/tenant_access_token/internal"))
            .json(&body)
            .send()
            .await
            .map_err(transport)?;
        let answer = match read(response).await {
            Ok(answer) => answer,
            Err(ApiError::Feishu { code, msg }) => {
                return Err(ApiError::Auth(format!("code {code}: {msg}")));
            }
            Err(other) => return Err(other),
        };
        let value = answer["tenant_access_token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::Transport("token response without a token".into()))?;
        let lifetime = Duration::from_secs(answer["expire"].as_u64().unwrap_or(0));
        let margin = REFRESH_MARGIN.min(lifetime / 2);
        let token = Secret::new(value);
        *cached = Some(CachedToken {
            value: token.clone(),
            refresh_at: Instant::now() + lifetime - margin,
        });
        Ok(token)
    }

    /// Forget `stale` (Feishu called it invalid), unless another call already replaced it.
    async fn forget(&self, stale: &Secret) {
        let mut cached = self.token.lock().await;
        if cached.as_ref().is_some_and(|t| &t.value == stale) {
            *cached = None;
        }
    }

    /// An authorised call; a token Feishu calls invalid is replaced and the call made once more.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        self.send(method, path, |request| match body {
            Some(body) => request.json(body),
            None => request,
        })
        .await
    }

    /// [`Api::call`] with a body `with_body` puts on each attempt (a multipart form cannot be
    /// cloned for the retry with a fresh token).
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        with_body: impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<Value, ApiError> {
        let mut retried = false;
        loop {
            let token = self.tenant_token().await?;
            let request = self
                .http
                .request(method.clone(), self.url(path))
                .bearer_auth(token.expose());
            let request = with_body(request);
            let response = request.send().await.map_err(transport)?;
            match read(response).await {
                Err(ApiError::Feishu { code, msg })
                    if TOKEN_INVALID_CODES.contains(&code) && !retried =>
                {
                    tracing::info!(code, %msg, "Feishu called the tenant token invalid; fetching a new one");
                    self.forget(&token).await;
                    retried = true;
                }
                other => return other,
            }
        }
    }

    /// `GET /open-apis/bot/v3/info`: the bot's own `open_id`.
    pub async fn bot_info(&self) -> Result<BotInfo, ApiError> {
        let answer = self
            .call(reqwest::Method::GET, "/open-apis/bot/v3/info", None)
            .await?;
        let bot = &answer["bot"];
        let open_id = bot["open_id"]
            .as_str()
            .filter(|id| !id.is_empty())
            .ok_or_else(|| ApiError::Transport("bot/v3/info answered without an open_id".into()))?;
        Ok(BotInfo {
            open_id: open_id.to_owned(),
            app_name: bot["app_name"].as_str().unwrap_or("").to_owned(),
        })
    }

    /// `POST /open-apis/im/v1/messages/<id>/reply` with `content`; returns the new id.
    pub async fn reply_with(
        &self,
        message_id: &str,
        content: &Content,
        in_thread: bool,
        uuid: &str,
    ) -> Result<String, ApiError> {
        let body = json!({
            "msg_type": content.msg_type,
            "content": content.body.to_string(),
            "reply_in_thread": in_thread,
            "uuid": uuid,
        });
        let path = format!(
            "/open-apis/im/v1/messages/{}/reply",
            path_segment(message_id)
        );
        let answer = self.call(reqwest::Method::POST, &path, Some(&body)).await?;
        Ok(sent_id(&answer))
    }

    /// `POST /open-apis/im/v1/messages?receive_id_type=chat_id` with `content`.
    pub async fn create_with(
        &self,
        chat_id: &str,
        content: &Content,
        uuid: &str,
    ) -> Result<String, ApiError> {
        let body = json!({
            "receive_id": chat_id,
            "msg_type": content.msg_type,
            "content": content.body.to_string(),
            "uuid": uuid,
        });
        let path = "/open-apis/im/v1/messages?receive_id_type=chat_id";
        let answer = self.call(reqwest::Method::POST, path, Some(&body)).await?;
        Ok(sent_id(&answer))
    }

    /// `POST /open-apis/cardkit/v1/cards`: a card entity from Card JSON 2.0; returns its id.
    pub async fn create_card(&self, card: &Value) -> Result<String, ApiError> {
        let body = json!({ "type": "card_json", "data": card.to_string() });
        let answer = self
            .call(
                reqwest::Method::POST,
                "/open-apis/cardkit/v1/cards",
                Some(&body),
            )
            .await?;
        answer["data"]["card_id"]
            .as_str()
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| ApiError::Transport("cardkit answered without a card_id".into()))
    }

    /// `POST /open-apis/cardkit/v1/cards/id_convert`: the id of the card an `interactive`
    /// message shows.
    pub async fn card_of_message(&self, message_id: &str) -> Result<String, ApiError> {
        let body = json!({ "message_id": message_id });
        let answer = self
            .call(
                reqwest::Method::POST,
                "/open-apis/cardkit/v1/cards/id_convert",
                Some(&body),
            )
            .await?;
        answer["data"]["card_id"]
            .as_str()
            .filter(|id| !id.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| ApiError::Transport("id_convert answered without a card_id".into()))
    }

    /// `PUT /open-apis/cardkit/v1/cards/<card>/elements/<element>/content`: the element's
    /// whole text (a streaming card types out what it adds).
    pub async fn card_text(
        &self,
        card_id: &str,
        element_id: &str,
        text: &str,
        sequence: u64,
        uuid: &str,
    ) -> Result<(), ApiError> {
        let body = json!({ "content": text, "sequence": sequence, "uuid": uuid });
        let path = format!(
            "/open-apis/cardkit/v1/cards/{}/elements/{}/content",
            path_segment(card_id),
            path_segment(element_id)
        );
        self.call(reqwest::Method::PUT, &path, Some(&body)).await?;
        Ok(())
    }

    /// `PATCH /open-apis/cardkit/v1/cards/<card>/settings`: the card's `config` (ending its
    /// streaming mode).
    pub async fn card_settings(
        &self,
        card_id: &str,
        config: &Value,
        sequence: u64,
        uuid: &str,
    ) -> Result<(), ApiError> {
        let settings = json!({ "config": config }).to_string();
        let body = json!({ "settings": settings, "sequence": sequence, "uuid": uuid });
        let path = format!(
            "/open-apis/cardkit/v1/cards/{}/settings",
            path_segment(card_id)
        );
        self.call(reqwest::Method::PATCH, &path, Some(&body))
            .await?;
        Ok(())
    }

    /// Upload `content` for a message: an image (`POST /open-apis/im/v1/images`,
    /// `image_type=message`) or a file (`POST /open-apis/im/v1/files`, `file_type` from its
    /// media type). Returns the message content that shows it (`image_key` / `file_key`).
    pub async fn upload(
        &self,
        name: &str,
        media_type: &str,
        image: bool,
        content: &Bytes,
    ) -> Result<Content, ApiError> {
        let part = || {
            let part =
                Part::stream(reqwest::Body::from(content.clone())).file_name(name.to_owned());
            part.mime_str(media_type).unwrap_or_else(|_| {
                Part::stream(reqwest::Body::from(content.clone())).file_name(name.to_owned())
            })
        };
        if image {
            let answer = self
                .send(reqwest::Method::POST, "/open-apis/im/v1/images", |r| {
                    r.multipart(
                        Form::new()
                            .text("image_type", "message")
                            .part("image", part()),
                    )
                })
                .await?;
            let key = answer["data"]["image_key"].as_str().unwrap_or("");
            return Ok(Content {
                msg_type: "image",
                body: json!({ "image_key": key }),
            });
        }
        let answer = self
            .send(reqwest::Method::POST, "/open-apis/im/v1/files", |r| {
                r.multipart(
                    Form::new()
                        .text("file_type", file_type(name, media_type))
                        .text("file_name", name.to_owned())
                        .part("file", part()),
                )
            })
            .await?;
        let key = answer["data"]["file_key"].as_str().unwrap_or("");
        Ok(Content {
            msg_type: "file",
            body: json!({ "file_key": key }),
        })
    }

    /// `GET /open-apis/im/v1/messages/<id>`: the app id of the app that sent the message, when
    /// an app did (`sender.id_type` `app_id`).
    pub async fn message_sender_app(&self, message_id: &str) -> Result<Option<String>, ApiError> {
        let path = format!("/open-apis/im/v1/messages/{}", path_segment(message_id));
        let answer = self.call(reqwest::Method::GET, &path, None).await?;
        let sender = &answer["data"]["items"][0]["sender"];
        let app = (sender["id_type"] == "app_id")
            .then(|| sender["id"].as_str())
            .flatten()
            .filter(|id| !id.is_empty());
        Ok(app.map(str::to_owned))
    }

    /// `GET /open-apis/im/v1/chats/<chat>/members/is_in_chat`: whether this app's bot is in the
    /// chat.
    pub async fn is_in_chat(&self, chat_id: &str) -> Result<bool, ApiError> {
        let path = format!(
            "/open-apis/im/v1/chats/{}/members/is_in_chat",
            path_segment(chat_id)
        );
        let answer = self.call(reqwest::Method::GET, &path, None).await?;
        Ok(answer["data"]["is_in_chat"].as_bool().unwrap_or(false))
    }

    /// `PUT /open-apis/im/v1/messages/<id>`: replace the text of a text message this app sent.
    pub async fn update_text(&self, message_id: &str, text: &str) -> Result<(), ApiError> {
        let body = json!({
            "msg_type": "text",
            "content": json!({ "text": text }).to_string(),
        });
        let path = format!("/open-apis/im/v1/messages/{}", path_segment(message_id));
        self.call(reqwest::Method::PUT, &path, Some(&body)).await?;
        Ok(())
    }

    /// `DELETE /open-apis/im/v1/messages/<id>`: recall a message the app sent.
    pub async fn delete_message(&self, message_id: &str) -> Result<(), ApiError> {
        let path = format!("/open-apis/im/v1/messages/{}", path_segment(message_id));
        self.call(reqwest::Method::DELETE, &path, None).await?;
        Ok(())
    }

    /// `POST /open-apis/im/v1/messages/<id>/reactions` with `emoji_type`; returns the reaction id.
    pub async fn add_reaction(
        &self,
        message_id: &str,
        emoji_type: &str,
    ) -> Result<String, ApiError> {
        let body = json!({ "reaction_type": { "emoji_type": emoji_type } });
        let path = format!(
            "/open-apis/im/v1/messages/{}/reactions",
            path_segment(message_id)
        );
        let answer = self.call(reqwest::Method::POST, &path, Some(&body)).await?;
        Ok(answer["data"]["reaction_id"]
            .as_str()
            .unwrap_or("")
            .to_owned())
    }

    /// `DELETE /open-apis/im/v1/messages/<id>/reactions/<reaction id>`.
    pub async fn delete_reaction(
        &self,
        message_id: &str,
        reaction_id: &str,
    ) -> Result<(), ApiError> {
        let path = format!(
            "/open-apis/im/v1/messages/{}/reactions/{}",
            path_segment(message_id),
            path_segment(reaction_id)
        );
        self.call(reqwest::Method::DELETE, &path, None).await?;
        Ok(())
    }

    /// `POST /callback/ws/endpoint`: a fresh long-connection URL (app id and secret, no token).
    pub async fn ws_endpoint(&self) -> Result<Endpoint, ApiError> {
        let body = json!({ "AppID": self.app_id, "AppSecret": self.app_secret.expose() });
        let response = self
            .http
            .post(self.url("/callback/ws/endpoint"))
            .header("locale", "zh")
            .json(&body)
            .send()
            .await
            .map_err(transport)?;
        let answer = match read(response).await {
            // 514: auth failed; 403: the app may not use the long connection.
            Err(ApiError::Feishu { code, msg }) if code == 514 || code == 403 => {
                return Err(ApiError::Auth(format!("code {code}: {msg}")));
            }
            other => other?,
        };
        let data = &answer["data"];
        let url = data["URL"]
            .as_str()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| ApiError::Transport("ws endpoint answered without a URL".into()))?;
        Ok(Endpoint {
            url: url.to_owned(),
            ping_interval: seconds(&data["ClientConfig"]["PingInterval"]),
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// A positive number of seconds (Feishu sends integers; the SDK tests use fractions).
pub(crate) fn seconds(value: &Value) -> Option<Duration> {
    value
        .as_f64()
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| Duration::from_secs_f64(s.min(86_400.0)))
}

/// The body of a successful answer, or why it failed.
async fn read(response: reqwest::Response) -> Result<Value, ApiError> {
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("x-ogw-ratelimit-reset")
        .or_else(|| response.headers().get("retry-after"))
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(DEFAULT_RETRY_AFTER);
    let bytes = response.bytes().await.map_err(transport)?;
    let body: Option<Value> = serde_json::from_slice(&bytes).ok();
    let code = body.as_ref().and_then(|b| b["code"].as_i64());
    if status == 429 || matches!(code, Some(CODE_RATE_LIMITED | CODE_MESSAGE_RATE_LIMITED)) {
        return Err(ApiError::RateLimited(retry_after));
    }
    match (code, body) {
        (Some(0), Some(body)) => Ok(body),
        (Some(code), Some(body)) => Err(ApiError::Feishu {
            code,
            msg: body["msg"].as_str().unwrap_or("").to_owned(),
        }),
        _ if status >= 400 => Err(ApiError::Http(status)),
        _ => Err(ApiError::Transport(format!(
            "HTTP {status} with a body that is not a Feishu answer"
        ))),
    }
}

/// A message's `msg_type` and its content (sent as a JSON string).
#[derive(Debug, Clone, PartialEq)]
pub struct Content {
    msg_type: &'static str,
    body: Value,
}

impl Content {
    /// A card entity (CardKit), shown by its id.
    pub fn card(card_id: &str) -> Content {
        Content {
            msg_type: "interactive",
            body: json!({ "type": "card", "data": { "card_id": card_id } }),
        }
    }

    /// A text message.
    pub fn text(text: &str) -> Content {
        Content {
            msg_type: "text",
            body: json!({ "text": text }),
        }
    }
}

/// The `file_type` Feishu wants for an upload: its named kinds, else `stream` (any file).
fn file_type(name: &str, media_type: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match (ext.as_str(), media_type) {
        ("pdf", _) | (_, "application/pdf") => "pdf",
        ("doc" | "docx", _) => "doc",
        ("xls" | "xlsx", _) => "xls",
        ("ppt" | "pptx", _) => "ppt",
        ("mp4", _) | (_, "video/mp4") => "mp4",
        ("opus", _) | (_, "audio/opus") => "opus",
        _ => "stream",
    }
}

fn sent_id(answer: &Value) -> String {
    answer["data"]["message_id"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

/// A message id as one URL path segment (ids are `om_…`, but never trust input in a path).
pub(crate) fn path_segment(id: &str) -> String {
    url::form_urlencoded::byte_serialize(id.as_bytes()).collect()
}

/// A reqwest error without its URL (which holds nothing secret, but is noise in a log line).
fn transport(err: reqwest::Error) -> ApiError {
    let kind = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "connection failed"
    } else if err.is_body() || err.is_decode() {
        "the answer was cut off"
    } else {
        "request failed"
    };
    ApiError::Transport(kind.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_accepts_fractions_and_refuses_nonsense() {
        assert_eq!(seconds(&json!(120)), Some(Duration::from_secs(120)));
        assert_eq!(seconds(&json!(0.5)), Some(Duration::from_millis(500)));
        assert_eq!(seconds(&json!(0)), None);
        assert_eq!(seconds(&json!(-3)), None);
        assert_eq!(seconds(&json!("120")), None);
    }

    #[test]
    fn message_ids_are_escaped_in_paths() {
        assert_eq!(path_segment("om_abc123"), "om_abc123");
        assert_eq!(path_segment("../x?y"), "..%2Fx%3Fy");
    }
}
