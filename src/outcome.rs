//! Pipeline step 11: what a turn amounts to, `Reply(text)` or `Silent`.
//!
//! The silent token is recognised here and nowhere else. A reply whose trimmed text *equals* the
//! token is a silent turn; a reply that merely contains or ends with it is delivered with every
//! occurrence stripped, so the token itself never reaches a chat ("NO_REPLY" leaking into a
//! channel is one of the failures baton exists to prevent).
//!
//! Heartbeats have a token of their own, [`HEARTBEAT_OK`], matched by the same
//! rule in [`heartbeat_reply`]: the model's way of saying "nothing needs attention".

use crate::backend::BackendReply;

/// The typed result of a turn. Nothing of a `Silent` turn reaches the platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Post this text (already stripped of the silent token, never empty).
    Reply(String),
    /// Say nothing.
    Silent,
}

/// What a bot answers in a ping-pong exchange to end it early.
pub const REPLY_SKIP: &str = "REPLY_SKIP";

/// Whether `text` ends a ping-pong exchange: it equals [`REPLY_SKIP`] once trimmed, exactly as
/// the silent token is matched.
pub fn is_reply_skip(text: &str) -> bool {
    text.trim() == REPLY_SKIP
}

/// What a bot answers to a heartbeat when nothing needs attention.
pub const HEARTBEAT_OK: &str = "HEARTBEAT_OK";

/// What a heartbeat reply amounts to: [`Outcome::Silent`] when it equals [`HEARTBEAT_OK`] once
/// trimmed; otherwise the text to post, with any occurrence of the token stripped exactly as
/// the silent token is, so "All quiet. HEARTBEAT_OK" cannot leak the token into a chat.
///
/// ```
/// use baton::outcome::{Outcome, heartbeat_reply};
/// assert_eq!(heartbeat_reply(" HEARTBEAT_OK\n"), Outcome::Silent);
/// assert_eq!(heartbeat_reply("Ping @ana. HEARTBEAT_OK"), Outcome::Reply("Ping @ana.".into()));
/// ```
pub fn heartbeat_reply(text: &str) -> Outcome {
    Outcome::from_text(text, HEARTBEAT_OK)
}

impl Outcome {
    /// Decide the outcome of a backend's reply under `silent_token`.
    ///
    /// ```
    /// use baton::outcome::Outcome;
    /// assert_eq!(Outcome::from_text(" NO_REPLY\n", "NO_REPLY"), Outcome::Silent);
    /// assert_eq!(Outcome::from_text("Done. NO_REPLY", "NO_REPLY"), Outcome::Reply("Done.".into()));
    /// ```
    pub fn from_text(text: &str, silent_token: &str) -> Outcome {
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed == silent_token {
            return Outcome::Silent;
        }
        if silent_token.is_empty() || !trimmed.contains(silent_token) {
            return Outcome::Reply(trimmed.to_owned());
        }
        let stripped = trimmed.replace(silent_token, "");
        let stripped = stripped.trim();
        if stripped.is_empty() {
            Outcome::Silent
        } else {
            Outcome::Reply(stripped.to_owned())
        }
    }

    /// Decide the outcome of a backend reply; an explicit silence (`text: None`) stays silent.
    pub fn from_backend(reply: &BackendReply, silent_token: &str) -> Outcome {
        match &reply.text {
            Some(text) => Outcome::from_text(text, silent_token),
            None => Outcome::Silent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "NO_REPLY";

    #[test]
    fn exact_token_is_silent() {
        assert_eq!(Outcome::from_text("NO_REPLY", TOKEN), Outcome::Silent);
        assert_eq!(Outcome::from_text("  NO_REPLY \n", TOKEN), Outcome::Silent);
        assert_eq!(Outcome::from_text("   ", TOKEN), Outcome::Silent);
    }

    #[test]
    fn token_inside_a_reply_is_stripped_not_silenced() {
        assert_eq!(
            Outcome::from_text("All good.\n\nNO_REPLY", TOKEN),
            Outcome::Reply("All good.".into())
        );
        assert_eq!(
            Outcome::from_text("NO_REPLY but wait, NO_REPLY here", TOKEN),
            Outcome::Reply("but wait,  here".into())
        );
    }

    #[test]
    fn case_and_lookalikes_are_not_the_token() {
        assert_eq!(
            Outcome::from_text("no_reply", TOKEN),
            Outcome::Reply("no_reply".into())
        );
    }

    #[test]
    fn heartbeat_ok_is_matched_like_the_silent_token() {
        assert_eq!(heartbeat_reply("HEARTBEAT_OK"), Outcome::Silent);
        assert_eq!(heartbeat_reply("\n HEARTBEAT_OK \n"), Outcome::Silent);
        assert_eq!(
            heartbeat_reply("heartbeat_ok"),
            Outcome::Reply("heartbeat_ok".into())
        );
        assert_eq!(
            heartbeat_reply("HEARTBEAT_OK\n\nBut @ana asked about the deploy."),
            Outcome::Reply("But @ana asked about the deploy.".into())
        );
    }

    #[test]
    fn explicit_backend_silence_is_silent() {
        let reply = BackendReply {
            text: None,
            model: "m".into(),
            usage: None,
            attachments: Vec::new(),
        };
        assert_eq!(Outcome::from_backend(&reply, TOKEN), Outcome::Silent);
    }
}
