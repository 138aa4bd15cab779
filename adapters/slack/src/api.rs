//! The Slack Web API calls baton makes, on slack-morphism's hyper client.
//!
//! The connector is built from `https_or_http()` so `api_url` can point at a loopback fake
//! (slack-morphism's default connector is https-only), and slack-morphism's own rate control is
//! left off: a 429 must reach the gateway as [`SendError::RateLimited`], which retries after
//! `Retry-After` — nothing else retries a post, so nothing is posted twice.

use std::sync::Arc;

use baton_contract::{Secret, SendError};
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;

use crate::normalize::Identity;

type Connector = SlackClientHyperHttpsConnector;

/// One account's Web API client: the bot token for posting, the app token for Socket Mode.
#[derive(Clone)]
pub struct Api {
    client: Arc<SlackClient<Connector>>,
    bot_token: SlackApiToken,
    app_token: Option<SlackApiToken>,
}

/// Why a Web API call failed, in the terms the adapter acts on.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The token was refused: fix the variable named by the account's `*_token_env`.
    #[error("Slack refused the token ({0}); check the account's bot_token_env / app_token_env")]
    Auth(String),
    /// Slack answered `ok:false` with this error code.
    #[error("Slack error `{0}`")]
    Slack(String),
    /// Anything else (network, 5xx, unexpected body); worth retrying later.
    #[error("could not reach Slack: {0}")]
    Transport(String),
}

impl Api {
    /// A client for `api_url` (which must end in `/api`, like `https://slack.com/api`).
    pub fn new(api_url: &str, bot_token: &Secret, app_token: Option<&Secret>) -> Self {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .build();
        // slack-morphism appends `/<method>` itself.
        let url = api_url.trim_end_matches('/');
        let connector = SlackClientHyperConnector::with_connector(https).with_slack_api_url(url);
        let token = |s: &Secret| SlackApiToken::new(SlackApiTokenValue(s.expose().to_owned()));
        Api {
            client: Arc::new(SlackClient::new(connector)),
            bot_token: token(bot_token),
            app_token: app_token.map(token),
        }
    }

    /// `auth.test`: who the bot token belongs to.
    pub async fn auth_test(&self) -> Result<Identity, ApiError> {
        let session = self.client.open_session(&self.bot_token);
        let me = session.auth_test().await.map_err(classify)?;
        Ok(Identity {
            user_id: me.user_id.to_string(),
            bot_id: me.bot_id.map(|b| b.to_string()),
            team_id: me.team_id.to_string(),
        })
    }

    /// `apps.connections.open`: a fresh Socket Mode websocket URL (single use).
    pub async fn connections_open(&self) -> Result<String, ApiError> {
        let Some(app_token) = &self.app_token else {
            return Err(ApiError::Auth(
                "no app-level token; set the account's app_token_env (xapp-...)".into(),
            ));
        };
        let session = self.client.open_session(app_token);
        let open = session
            .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
            .await
            .map_err(classify)?;
        Ok(open.url.0.to_string())
    }

    /// `chat.postMessage` of `text` to `channel`, inside `thread_ts` when given. Returns the
    /// posted message's `ts`.
    pub async fn post_message(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        text: &str,
    ) -> Result<String, SendError> {
        let request = SlackApiChatPostMessageRequest::new(
            SlackChannelId(channel.to_owned()),
            SlackMessageContent::new().with_text(text.to_owned()),
        )
        .opt_thread_ts(thread_ts.map(|t| SlackTs(t.to_owned())));
        let session = self.client.open_session(&self.bot_token);
        let posted = session
            .chat_post_message(&request)
            .await
            .map_err(send_error)?;
        Ok(posted.ts.to_string())
    }

    /// `chat.update`: replace the text of the message `ts` in `channel`.
    pub async fn update_message(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
    ) -> Result<(), SendError> {
        let request = SlackApiChatUpdateRequest::new(
            SlackChannelId(channel.to_owned()),
            SlackMessageContent::new().with_text(text.to_owned()),
            SlackTs(ts.to_owned()),
        );
        let session = self.client.open_session(&self.bot_token);
        session.chat_update(&request).await.map_err(send_error)?;
        Ok(())
    }

    /// `chat.startStream`: a streamed reply in the thread `thread_ts`, shown to `recipient`
    /// (user and team ids), starting with `text`. Returns the stream message's `ts`.
    pub async fn start_stream(
        &self,
        channel: &str,
        thread_ts: &str,
        recipient: Option<(&str, &str)>,
        text: &str,
    ) -> Result<String, SendError> {
        let request = SlackApiChatStartStreamRequest::new(SlackChannelId(channel.to_owned()))
            .with_thread_ts(SlackTs(thread_ts.to_owned()))
            .opt_recipient_user_id(recipient.map(|(user, _)| SlackUserId(user.to_owned())))
            .opt_recipient_team_id(recipient.map(|(_, team)| SlackTeamId(team.to_owned())))
            .with_markdown_text(text.to_owned());
        let session = self.client.open_session(&self.bot_token);
        let started = session
            .chat_start_stream(&request)
            .await
            .map_err(send_error)?;
        Ok(started.ts.to_string())
    }

    /// `chat.appendStream`: add `text` to the stream `ts`.
    pub async fn append_stream(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
    ) -> Result<(), SendError> {
        let request = SlackApiChatAppendStreamRequest::new(
            SlackChannelId(channel.to_owned()),
            SlackTs(ts.to_owned()),
        )
        .with_markdown_text(text.to_owned());
        let session = self.client.open_session(&self.bot_token);
        session
            .chat_append_stream(&request)
            .await
            .map_err(send_error)?;
        Ok(())
    }

    /// `chat.stopStream`: end the stream `ts`, adding `text` (a markdown chunk) first.
    pub async fn stop_stream(&self, channel: &str, ts: &str, text: &str) -> Result<(), SendError> {
        let chunks = (!text.is_empty()).then(|| {
            vec![SlackStreamChunk::MarkdownText {
                text: text.to_owned(),
            }]
        });
        let request = SlackApiChatStopStreamRequest::new(
            SlackChannelId(channel.to_owned()),
            SlackTs(ts.to_owned()),
            SlackMessageContent::new(),
        )
        .opt_chunks(chunks);
        let session = self.client.open_session(&self.bot_token);
        session
            .chat_stop_stream(&request)
            .await
            .map_err(send_error)?;
        Ok(())
    }

    /// `chat.delete` of the bot's own message `ts`.
    pub async fn delete_message(&self, channel: &str, ts: &str) -> Result<(), SendError> {
        let request = SlackApiChatDeleteRequest::new(
            SlackChannelId(channel.to_owned()),
            SlackTs(ts.to_owned()),
        );
        let session = self.client.open_session(&self.bot_token);
        session.chat_delete(&request).await.map_err(send_error)?;
        Ok(())
    }

    /// Post `content` as the file `name` into `channel` (inside `thread_ts` when given), the
    /// way Slack wants it: `files.getUploadURLExternal`, the bytes POSTed to the returned
    /// `upload_url`, then `files.completeUploadExternal` sharing it there. Returns the file id.
    /// A 429 at any step is [`SendError::RateLimited`]; the gateway then runs all three again
    /// (a file uploaded but never completed is not shared anywhere, and Slack drops it).
    pub async fn upload_file(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        name: &str,
        media_type: &str,
        content: &[u8],
    ) -> Result<String, SendError> {
        let session = self.client.open_session(&self.bot_token);
        let url = session
            .get_upload_url_external(&SlackApiFilesGetUploadUrlExternalRequest::new(
                name.to_owned(),
                content.len(),
            ))
            .await
            .map_err(send_error)?;
        session
            .files_upload_via_url(&SlackApiFilesUploadViaUrlRequest::new(
                url.upload_url,
                content.to_vec(),
                media_type.to_owned(),
            ))
            .await
            .map_err(send_error)?;
        let file = SlackApiFilesComplete::new(url.file_id.clone()).with_title(name.to_owned());
        let request = SlackApiFilesCompleteUploadExternalRequest::new(vec![file])
            .with_channel_id(SlackChannelId(channel.to_owned()))
            .opt_thread_ts(thread_ts.map(|t| SlackTs(t.to_owned())));
        session
            .files_complete_upload_external(&request)
            .await
            .map_err(send_error)?;
        Ok(url.file_id.to_string())
    }

    /// `assistant.threads.setStatus`: the "is working" line under the thread `thread_ts`; an
    /// empty `status` clears it.
    pub async fn set_status(
        &self,
        channel: &str,
        thread_ts: &str,
        status: &str,
    ) -> Result<(), SendError> {
        let request = SlackApiAssistantThreadsSetStatusRequest::new(
            SlackChannelId(channel.to_owned()),
            status.to_owned(),
            SlackTs(thread_ts.to_owned()),
        );
        let session = self.client.open_session(&self.bot_token);
        session
            .assistant_threads_set_status(&request)
            .await
            .map_err(send_error)?;
        Ok(())
    }

    /// Answer a slash command privately through its `response_url` (ephemeral by default).
    pub async fn respond(&self, response_url: &str, text: &str) -> Result<(), SendError> {
        let url: url::Url = response_url.parse().map_err(|_| SendError::Rejected {
            code: "bad_response_url".into(),
            message: "the command's response_url is not a URL".into(),
        })?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(SendError::Rejected {
                code: "bad_response_url".into(),
                message: "the command's response_url is not http(s)".into(),
            });
        }
        let request = SlackApiPostWebhookMessageRequest::new(
            SlackMessageContent::new().with_text(text.to_owned()),
        );
        self.client
            .post_webhook_message(&url, &request)
            .await
            .map_err(send_error)?;
        Ok(())
    }
}

/// Token problems are fatal; other `ok:false` codes are Slack's answer; the rest is transport.
fn classify(err: SlackClientError) -> ApiError {
    match err {
        SlackClientError::ApiError(e) => match e.code.as_str() {
            "invalid_auth"
            | "not_authed"
            | "account_inactive"
            | "token_revoked"
            | "token_expired"
            | "not_allowed_token_type" => ApiError::Auth(e.code),
            _ => ApiError::Slack(e.code),
        },
        SlackClientError::HttpError(e) if e.status_code.as_u16() == 401 => {
            ApiError::Auth("HTTP 401".into())
        }
        other => ApiError::Transport(describe(&other)),
    }
}

/// Map a failed post onto the contract: only a 429 is safe to retry.
fn send_error(err: SlackClientError) -> SendError {
    match err {
        SlackClientError::RateLimitError(e) => SendError::RateLimited {
            // Slack always sends Retry-After with a 429; one second is its documented minimum.
            retry_after: e.retry_after.unwrap_or(std::time::Duration::from_secs(1)),
        },
        SlackClientError::ApiError(e) => SendError::Rejected {
            message: format!("Slack answered ok:false with `{}`", e.code),
            code: e.code,
        },
        SlackClientError::HttpError(e) if e.status_code.is_client_error() => SendError::Rejected {
            code: format!("http_{}", e.status_code.as_u16()),
            message: "Slack refused the request".into(),
        },
        other => SendError::Transport(describe(&other)),
    }
}

/// A description that never includes a body or URL (a response_url is a capability).
fn describe(err: &SlackClientError) -> String {
    match err {
        SlackClientError::HttpError(e) => format!("HTTP {}", e.status_code),
        SlackClientError::HttpProtocolError(_) => "connection failed".into(),
        SlackClientError::ProtocolError(_) => "unexpected response body".into(),
        SlackClientError::EndOfStream(_) => "connection closed".into(),
        SlackClientError::SystemError(_) => "system error".into(),
        SlackClientError::SocketModeProtocolError(_) => "socket mode protocol error".into(),
        SlackClientError::ApiError(e) => format!("Slack error `{}`", e.code),
        SlackClientError::RateLimitError(_) => "rate limited".into(),
    }
}
