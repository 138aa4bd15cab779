//! How one model call attempt failed, and whether another attempt is worth it: kept apart
//! from the HTTP loop in `mod.rs` so the retry policy can be read and tested on its own.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use super::OpenAiSettings;
use crate::backend::BackendError;

/// Why one attempt did not produce a usable answer.
pub(super) enum Attempt {
    /// Worth another try (429, 5xx, transport).
    Retryable(Failure),
    /// Not worth another try (4xx, unreadable 2xx body).
    Final(FinalError),
}

/// A failure that ends the call at once.
pub(super) enum FinalError {
    /// An error status that retrying will not fix.
    Failure(Failure),
    /// A 2xx answer that is not JSON.
    Bad(String),
    /// An answer longer than the backend reads (this many bytes); the rest was not read.
    TooLong(usize),
}

impl FinalError {
    pub(super) fn with_attempts(self, attempts: u32) -> BackendError {
        match self {
            Self::Failure(failure) => failure.into_error(attempts),
            Self::Bad(text) => BackendError::BadResponse(text),
            Self::TooLong(max) => BackendError::TooLong(max),
        }
    }
}

/// A failed attempt, kept until we know whether it was the last one.
pub(super) enum Failure {
    /// The server answered with an error status.
    Status {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// No answer: connect failure, timeout, broken body.
    Unreachable(String),
}

impl Failure {
    pub(super) fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            Self::Unreachable(_) => None,
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            Self::Status {
                status, message, ..
            } => format!("HTTP {status}: {message}"),
            Self::Unreachable(text) => text.clone(),
        }
    }

    pub(super) fn into_error(self, attempts: u32) -> BackendError {
        match self {
            Self::Status {
                status, message, ..
            } => BackendError::Status {
                status,
                attempts,
                message,
            },
            Self::Unreachable(text) => {
                BackendError::Unreachable(format!("{text} (after {attempts} attempt(s))"))
            }
        }
    }
}

/// Rate limits and server errors pass; 408 too, as the official SDKs retry it.
pub(super) fn is_retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
        || status.is_server_error()
}

/// The server's requested wait: `retry-after-ms` (OpenAI) or `Retry-After` in seconds, capped at
/// [`OpenAiSettings::MAX_RETRY_AFTER`]. An HTTP-date form is ignored (backoff applies instead).
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    let wait = number("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| number("retry-after").map(Duration::from_secs_f64))?;
    Some(wait.min(OpenAiSettings::MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_and_capped() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after", "3600".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(OpenAiSettings::MAX_RETRY_AFTER));
        headers.insert("retry-after-ms", "120".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(120)));
        let mut date = HeaderMap::new();
        date.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&date), None);
    }

    #[test]
    fn retryable_statuses() {
        assert!(is_retryable(StatusCode::TOO_MANY_REQUESTS));
        assert!(is_retryable(StatusCode::BAD_GATEWAY));
        assert!(!is_retryable(StatusCode::UNAUTHORIZED));
        assert!(!is_retryable(StatusCode::NOT_FOUND));
    }
}
