//! The typing indicator on Slack: the assistant thread status ("is working on it…") under the
//! thread the reply goes to, set with `assistant.threads.setStatus` and cleared with an empty
//! status when the turn ends. While the turn runs, the status says the bot's latest progress
//! line instead, when it reports one.
//!
//! The method needs the `assistant:write` scope. An app without it (or a workspace where the
//! method is refused) shows nothing: the first refusal is remembered and no further calls are
//! made, so a missing scope costs one request per process, not one per turn.

use std::sync::atomic::{AtomicBool, Ordering};

use baton_contract::{SendError, Typing, TypingTarget};

use crate::api::Api;
use crate::normalize::ts_of;

/// What the status line says while the bot works.
const WORKING: &str = "is working on it…";

/// The longest progress line the status shows, in characters: it is one line under the thread.
const MAX_STATUS_CHARS: usize = 150;

/// Whether this app may set the status (unknown until the first call).
#[derive(Default)]
pub(crate) struct Status {
    refused: AtomicBool,
}

impl Status {
    /// Show the status under the thread of `at`; `None` when the app may not.
    pub(crate) async fn start(
        &self,
        api: &Api,
        at: &TypingTarget,
    ) -> Result<Option<Typing>, SendError> {
        if self.refused.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let Some(thread_ts) = thread_ts(at) else {
            return Ok(None);
        };
        match api.set_status(at.chat.as_str(), thread_ts, WORKING).await {
            Ok(()) => Ok(Some(Typing {
                renew_every: None,
                handle: None,
            })),
            Err(SendError::Rejected { code, .. }) => {
                tracing::info!(
                    %code,
                    "Slack refused assistant.threads.setStatus; no typing status for this app \
                     (it needs the assistant:write scope)"
                );
                self.refused.store(true, Ordering::Relaxed);
                Ok(None)
            }
            Err(other) => Err(other),
        }
    }

    /// Make the status say `line` (cut to [`MAX_STATUS_CHARS`], the cut marked `…`).
    pub(crate) async fn say(
        &self,
        api: &Api,
        at: &TypingTarget,
        line: &str,
    ) -> Result<(), SendError> {
        let Some(thread_ts) = thread_ts(at).filter(|_| !self.refused.load(Ordering::Relaxed))
        else {
            return Ok(());
        };
        let line = line.trim();
        let status = match line.char_indices().nth(MAX_STATUS_CHARS - 1) {
            Some((cut, _)) => format!("{}…", &line[..cut]),
            None if line.is_empty() => WORKING.to_owned(),
            None => line.to_owned(),
        };
        api.set_status(at.chat.as_str(), thread_ts, &status).await
    }

    /// Clear the status again.
    pub(crate) async fn stop(&self, api: &Api, at: &TypingTarget) -> Result<(), SendError> {
        match thread_ts(at) {
            Some(thread_ts) => api.set_status(at.chat.as_str(), thread_ts, "").await,
            None => Ok(()),
        }
    }
}

/// The thread the reply goes to: the message's thread, or the thread the reply starts under
/// the message itself.
fn thread_ts(at: &TypingTarget) -> Option<&str> {
    at.thread
        .as_ref()
        .map(|t| t.as_str())
        .or_else(|| ts_of(&at.message))
}
