//! The Discord REST calls baton makes, on reqwest, with baton's own rate-limit handling.
//!
//! serenity's `Http` is not used for these: with its rate limiter disabled (which baton must do,
//! or requests bypass `api_url` — see ARCHITECTURE.md) a 429 comes back from serenity as an
//! undecodable error, losing `retry_after` and the `global` flag. Here every 429 becomes
//! [`SendError::RateLimited`] with Discord's wait, and the gateway's delivery step retries after
//! it with the same idempotency key. Nothing in this module retries on its own, so nothing is
//! posted twice.
//!
//! Two waits are remembered so a burst does not turn into a 429 storm: a *global* limit stops
//! every call of this bot until it expires, and a route whose bucket Discord reported empty
//! (`X-RateLimit-Remaining: 0`) is not called again before `X-RateLimit-Reset-After`. A call
//! that would hit either returns `RateLimited` at once, without touching the network.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use baton_contract::{DownloadError, Downloaded, FileRef, Secret, SendError, fetch};
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// How long one REST call may take before it counts as a transport failure.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Discord's documented minimum wait when a 429 names none.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Whether a call carries the bot token. Interaction callbacks and webhook follow-ups are
/// authorised by the interaction token in their path and are exempt from the global limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bot <token>`, counted against the bot's global limit.
    Bot,
    /// No `Authorization` header; not subject to the global limit.
    Interaction,
}

/// What a call sends.
enum Body<'a> {
    Json(&'a Value),
    Multipart(reqwest::multipart::Form),
}

/// One account's REST client.
pub struct Rest {
    client: reqwest::Client,
    /// `<api_url>/api/v10`.
    base: String,
    token: Secret,
    waits: Mutex<Waits>,
}

#[derive(Default)]
struct Waits {
    global_until: Option<Instant>,
    routes: HashMap<String, Instant>,
}

/// A 429, read from its body and headers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// How long to wait.
    pub retry_after: Duration,
    /// The whole bot is limited, not just this route.
    pub global: bool,
}

impl Rest {
    /// A client for `api_url` (`https://discord.com`, or a proxy or fake); REST is under
    /// `/api/v10`.
    pub fn new(api_url: &str, token: Secret) -> Self {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("a reqwest client with only a timeout set always builds");
        Rest {
            client,
            base: format!("{}/api/v10", api_url.trim_end_matches('/')),
            token,
            waits: Mutex::default(),
        }
    }

    /// `GET /gateway`: the websocket URL. Asked before serenity's client is built so a failure
    /// is retried here instead of serenity silently falling back to the real Discord host.
    pub async fn gateway_url(&self) -> Result<String, SendError> {
        let body = self
            .call(Method::GET, "/gateway", None, Auth::Bot, "gateway")
            .await?;
        body.get("url")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| SendError::Transport("GET /gateway answered without a url".into()))
    }

    /// `GET /channels/<id>`: whether a guild channel is a thread, and its parent if so.
    pub async fn thread_parent(&self, channel: u64) -> Result<Option<u64>, SendError> {
        let body = self
            .call(
                Method::GET,
                &format!("/channels/{channel}"),
                None,
                Auth::Bot,
                &format!("channel-info:{channel}"),
            )
            .await?;
        // 10, 11, 12: announcement, public and private threads.
        let is_thread = matches!(body.get("type").and_then(Value::as_u64), Some(10..=12));
        let parent = body
            .get("parent_id")
            .and_then(Value::as_str)
            .and_then(|p| p.parse().ok());
        Ok(parent.filter(|_| is_thread))
    }

    /// A message attachment's bytes, at most `limit`. Attachment URLs are signed CDN links that
    /// need no token, so none is sent: the bot token never goes to a URL a message carried.
    pub async fn attachment(
        &self,
        file: &FileRef,
        limit: u64,
    ) -> Result<Downloaded, DownloadError> {
        let url = reqwest::Url::parse(&file.0)
            .ok()
            .filter(|url| matches!(url.scheme(), "https" | "http"))
            .ok_or_else(|| DownloadError::NotAllowed("the attachment has no web address".into()))?;
        fetch(self.client.get(url), limit).await
    }

    /// Make one call; `route` names the rate-limit bucket it belongs to. Returns the JSON body
    /// (`Null` for 204).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        auth: Auth,
        route: &str,
    ) -> Result<Value, SendError> {
        self.request(method, path, body.map(Body::Json), auth, route)
            .await
    }

    /// [`Rest::call`] with a `multipart/form-data` body (files), as the bot.
    pub async fn call_multipart(
        &self,
        method: Method,
        path: &str,
        form: reqwest::multipart::Form,
        route: &str,
    ) -> Result<Value, SendError> {
        self.request(method, path, Some(Body::Multipart(form)), Auth::Bot, route)
            .await
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Body<'_>>,
        auth: Auth,
        route: &str,
    ) -> Result<Value, SendError> {
        if let Some(wait) = self.wait_before(route, auth) {
            return Err(SendError::RateLimited { retry_after: wait });
        }
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header(
                "user-agent",
                concat!("DiscordBot (baton, ", env!("CARGO_PKG_VERSION"), ")"),
            );
        if auth == Auth::Bot {
            request = request.header("authorization", format!("Bot {}", self.token.expose()));
        }
        request = match body {
            Some(Body::Json(json)) => request.json(json),
            Some(Body::Multipart(form)) => request.multipart(form),
            None => request,
        };
        // `without_url`: interaction URLs hold the interaction token.
        let response = request
            .send()
            .await
            .map_err(|e| SendError::Transport(e.without_url().to_string()))?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = response
            .text()
            .await
            .map_err(|e| SendError::Transport(e.without_url().to_string()))?;
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status == StatusCode::TOO_MANY_REQUESTS {
            let limit = rate_limit(&headers, &json);
            self.note_limit(route, limit);
            tracing::warn!(route, ?limit, "Discord rate limit");
            return Err(SendError::RateLimited {
                retry_after: limit.retry_after,
            });
        }
        self.note_bucket(route, &headers);
        if status.is_success() {
            return Ok(json);
        }
        Err(refusal(status, &json))
    }

    fn wait_before(&self, route: &str, auth: Auth) -> Option<Duration> {
        let now = Instant::now();
        let mut waits = self.waits.lock().expect("rate-limit lock poisoned");
        waits.routes.retain(|_, until| *until > now);
        let global = match (auth, waits.global_until) {
            (Auth::Bot, Some(until)) if until > now => Some(until - now),
            _ => None,
        };
        let route = waits.routes.get(route).map(|until| *until - now);
        global.max(route)
    }

    fn note_limit(&self, route: &str, limit: RateLimit) {
        let until = Instant::now() + limit.retry_after;
        let mut waits = self.waits.lock().expect("rate-limit lock poisoned");
        if limit.global {
            waits.global_until = Some(until);
        } else {
            waits.routes.insert(route.to_owned(), until);
        }
    }

    /// Remember an exhausted bucket until it resets, so the next call waits instead of 429ing.
    fn note_bucket(&self, route: &str, headers: &HeaderMap) {
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if header("x-ratelimit-remaining") != Some("0") {
            return;
        }
        let Some(reset) = header("x-ratelimit-reset-after").and_then(seconds) else {
            return;
        };
        let mut waits = self.waits.lock().expect("rate-limit lock poisoned");
        waits
            .routes
            .insert(route.to_owned(), Instant::now() + reset);
    }
}

/// Read a 429: `retry_after` (seconds, fractional) and `global` from the JSON body, falling back
/// to the `Retry-After` and `X-RateLimit-Global` headers (Cloudflare's 429s have no JSON body).
pub fn rate_limit(headers: &HeaderMap, body: &Value) -> RateLimit {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let from_body = body
        .get("retry_after")
        .and_then(Value::as_f64)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64);
    let from_header = header("retry-after").and_then(seconds);
    let retry_after = from_body.or(from_header).unwrap_or(DEFAULT_RETRY_AFTER);
    let global = body.get("global").and_then(Value::as_bool) == Some(true)
        || header("x-ratelimit-global") == Some("true")
        || header("x-ratelimit-scope") == Some("global");
    RateLimit {
        retry_after,
        global,
    }
}

fn seconds(s: &str) -> Option<Duration> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(Duration::from_secs_f64)
}

/// A non-429 failure: 5xx is of unknown fate (transport); 4xx is a refusal, with Discord's error
/// code and a hint for the common ones.
fn refusal(status: StatusCode, body: &Value) -> SendError {
    if status.is_server_error() {
        return SendError::Transport(format!("Discord answered HTTP {}", status.as_u16()));
    }
    // A refused token is told apart by status (Discord's own code for it is often 0).
    let code = match body.get("code").and_then(Value::as_i64) {
        Some(c) if status != StatusCode::UNAUTHORIZED => c.to_string(),
        _ => format!("http_{}", status.as_u16()),
    };
    let said = body
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    let hint = match status.as_u16() {
        401 => "; Discord refused the bot token: check the account's bot_token_env",
        403 => {
            "; the bot lacks a permission here (View Channel, Send Messages, Send Messages in \
             Threads, Read Message History): fix its role or the channel's overrides"
        }
        404 => "; the channel or message is gone, or the bot cannot see it",
        _ => "",
    };
    SendError::Rejected {
        code,
        message: format!("{said}{hint}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Value {
        let path = format!("{}/fixtures/{name}.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn headers_of(v: &Value) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (k, val) in v["headers"].as_object().unwrap() {
            headers.insert(
                reqwest::header::HeaderName::from_bytes(k.to_ascii_lowercase().as_bytes()).unwrap(),
                val.as_str().unwrap().parse().unwrap(),
            );
        }
        headers
    }

    #[test]
    fn a_user_429_waits_the_bodys_fractional_retry_after() {
        let f = fixture("rest_429_user");
        let limit = rate_limit(&headers_of(&f), &f["body"]);
        assert_eq!(limit.retry_after, Duration::from_secs_f64(64.57));
        assert!(!limit.global);
    }

    #[test]
    fn a_global_429_is_global_by_body_or_header() {
        let f = fixture("rest_429_global");
        let limit = rate_limit(&headers_of(&f), &f["body"]);
        assert!(limit.global);
        let by_header = rate_limit(&headers_of(&f), &Value::Null);
        assert!(by_header.global);
        assert_eq!(by_header.retry_after, Duration::from_secs(65));
    }

    #[test]
    fn a_shared_resource_429_is_not_global() {
        let f = fixture("rest_429_shared_resource");
        assert!(!rate_limit(&headers_of(&f), &f["body"]).global);
        assert_eq!(
            rate_limit(&HeaderMap::new(), &Value::Null).retry_after,
            DEFAULT_RETRY_AFTER
        );
    }

    #[test]
    fn refusals_carry_discords_code_and_a_hint_and_5xx_is_transport() {
        let err = refusal(
            StatusCode::UNAUTHORIZED,
            &fixture("rest_error_json_example"),
        );
        match err {
            SendError::Rejected { code, message } => {
                assert_eq!(code, "http_401");
                assert!(message.contains("bot_token_env"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            refusal(StatusCode::BAD_GATEWAY, &Value::Null),
            SendError::Transport(_)
        ));
    }

    #[test]
    fn a_refusal_other_than_401_keeps_discords_code() {
        let body = serde_json::json!({ "message": "Missing Permissions", "code": 50013 });
        match refusal(StatusCode::FORBIDDEN, &body) {
            SendError::Rejected { code, message } => {
                assert_eq!(code, "50013");
                assert!(message.contains("Send Messages"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_global_wait_blocks_bot_calls_but_not_interaction_callbacks() {
        let rest = Rest::new("http://127.0.0.1:9", Secret::new("t"));
        rest.note_limit(
            "channel:1",
            RateLimit {
                retry_after: Duration::from_secs(30),
                global: true,
            },
        );
        assert!(rest.wait_before("channel:2", Auth::Bot).is_some());
        assert!(rest.wait_before("interaction", Auth::Interaction).is_none());
        let mut headers = HeaderMap::new();
        headers.insert("x-ratelimit-remaining", "0".parse().unwrap());
        headers.insert("x-ratelimit-reset-after", "2.5".parse().unwrap());
        rest.note_bucket("webhook:x", &headers);
        let wait = rest.wait_before("webhook:x", Auth::Interaction).unwrap();
        assert!(wait <= Duration::from_millis(2500) && wait > Duration::from_secs(2));
    }
}
