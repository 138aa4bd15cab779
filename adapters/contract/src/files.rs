//! Files posted in chats: what an event says about each one, and fetching its bytes within a cap.
//!
//! An adapter only describes a file ([`InboundFile`]) when it normalizes the event: fetching it
//! takes a platform call with the bot's credentials, and the platform redelivers an event that
//! is not acknowledged within ~3 s. The gateway fetches later, with
//! [`Adapter::download`](crate::Adapter::download), only for an event that wakes a bot.

use std::fmt::Display;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

/// Where an adapter fetches a file from, as it wrote it when it normalized the event (a Slack
/// `url_private_download`, a Discord attachment URL, a Feishu `<message_id>/<key>?type=...`).
/// Opaque to the gateway, which only hands it back to the same adapter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef(pub String);

/// A file that came with a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundFile {
    /// Its file name (`report.pdf`); a platform that names none gets a generic one (`image`).
    pub name: String,
    /// Its media type, when the platform says.
    pub media_type: Option<String>,
    /// Its size in bytes, when the platform says: a file known to be over the cap is not fetched.
    pub size: Option<u64>,
    /// How to fetch it.
    pub source: FileRef,
}

/// A file's bytes, as fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downloaded {
    /// The content.
    pub bytes: Vec<u8>,
    /// The media type the platform served it with, when it named one.
    pub media_type: Option<String>,
}

/// Why a file was not fetched. The text is fit for a log and for the bot that is told about it:
/// it never holds a token or a signed URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownloadError {
    /// The adapter cannot fetch files.
    #[error("this platform's adapter cannot fetch files")]
    NotSupported,
    /// The file is larger than the cap (`size` when the platform said how large).
    #[error("over the {limit}-byte limit")]
    TooLarge {
        /// Its size, when known.
        size: Option<u64>,
        /// The cap.
        limit: u64,
    },
    /// The platform answered with an error status (a missing scope, a deleted file, an outage).
    #[error("the platform answered HTTP {0}")]
    Status(u16),
    /// The reference does not point where the bot's credentials may be sent.
    #[error("{0}")]
    NotAllowed(String),
    /// The platform could not be reached, or the transfer broke off.
    #[error("could not fetch it: {0}")]
    Transport(String),
}

/// How long one file may take to arrive: a 25 MB file on a slow link, not a hung connection.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// Send `request` (a GET with the account's credentials already on it) and read the file it
/// answers, at most `limit` bytes: an announced `Content-Length` over the cap is refused before
/// any of the body is read, and a body that runs past it is cut off there. Errors never carry
/// the URL (a signed URL is a credential too).
pub async fn fetch(
    request: reqwest::RequestBuilder,
    limit: u64,
) -> Result<Downloaded, DownloadError> {
    let response = request
        .timeout(DOWNLOAD_TIMEOUT)
        .send()
        .await
        .map_err(|e| DownloadError::Transport(e.without_url().to_string()))?;
    let status = response.status();
    if !status.is_success() {
        return Err(DownloadError::Status(status.as_u16()));
    }
    let media_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let length = response.content_length();
    let body = response
        .bytes_stream()
        .map(|chunk| chunk.map_err(|e| e.without_url()));
    let bytes = read_capped(length, limit, body).await?;
    Ok(Downloaded { bytes, media_type })
}

/// Read a response body of `content_length` (as the server announced it) into memory, refusing
/// it at once when the announced length is over `limit`, and stopping as soon as more than
/// `limit` bytes arrived when none was announced (or the announcement was false).
async fn read_capped<S, E>(
    content_length: Option<u64>,
    limit: u64,
    body: S,
) -> Result<Vec<u8>, DownloadError>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: Display,
{
    if let Some(size) = content_length.filter(|size| *size > limit) {
        return Err(DownloadError::TooLarge {
            size: Some(size),
            limit,
        });
    }
    let mut body = std::pin::pin!(body);
    let expected = content_length.unwrap_or(0).min(limit);
    let mut out = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| DownloadError::Transport(e.to_string()))?;
        if (out.len() + chunk.len()) as u64 > limit {
            return Err(DownloadError::TooLarge { size: None, limit });
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static [u8]]) -> impl Stream<Item = Result<Bytes, String>> {
        futures::stream::iter(
            parts
                .iter()
                .map(|p| Ok(Bytes::from_static(p)))
                .collect::<Vec<_>>(),
        )
    }

    #[tokio::test]
    async fn a_body_within_the_cap_is_read_whole() {
        let read = read_capped(Some(6), 6, chunks(&[b"abc", b"def"])).await;
        assert_eq!(read.unwrap(), b"abcdef");
    }

    #[tokio::test]
    async fn an_announced_length_over_the_cap_is_refused_before_reading() {
        let never =
            futures::stream::poll_fn(|_| -> std::task::Poll<Option<Result<Bytes, String>>> {
                panic!("the body must not be read")
            });
        let read = read_capped(Some(7), 6, never).await;
        assert_eq!(
            read.unwrap_err(),
            DownloadError::TooLarge {
                size: Some(7),
                limit: 6
            }
        );
    }

    #[tokio::test]
    async fn reading_stops_once_past_the_cap_when_the_length_was_not_announced() {
        let endless = futures::stream::repeat_with(|| Ok::<_, String>(Bytes::from_static(b"xx")));
        let read = read_capped(None, 5, endless).await;
        assert_eq!(
            read.unwrap_err(),
            DownloadError::TooLarge {
                size: None,
                limit: 5
            }
        );
        let broken = futures::stream::iter(vec![Ok(Bytes::from_static(b"a")), Err("reset")]);
        let read = read_capped(None, 5, broken).await;
        assert_eq!(read.unwrap_err(), DownloadError::Transport("reset".into()));
    }
}
