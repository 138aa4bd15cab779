//! What may be shown of a reply while the model is still writing it.
//!
//! A streamed reply must never show anything the finished turn would not post. The outcome rule
//! ([`crate::outcome`]) trims the reply, strips every silent token and calls the turn silent if
//! nothing is left. So the *certain* part of a growing text is: the text with the tokens it
//! already holds stripped, minus its last `len(silent_token)` characters (they may be the start
//! of a token still being written: "NO_", "NO_RE"), trimmed. That part is a prefix of what the
//! turn will post, and it is empty for every text that may still turn out silent: a stream can
//! show it, and edit it only by adding to it.

/// A reply as far as the model has written it.
#[derive(Debug, Clone)]
pub struct Draft {
    raw: String,
    token: String,
}

impl Draft {
    /// An empty draft under `silent_token`.
    pub fn new(silent_token: &str) -> Self {
        Self {
            raw: String::new(),
            token: silent_token.to_owned(),
        }
    }

    /// The model wrote `delta`.
    pub fn push(&mut self, delta: &str) {
        self.raw.push_str(delta);
    }

    /// What was written was not the reply (the model went on to call tools): start over.
    pub fn retract(&mut self) {
        self.raw.clear();
    }

    /// The part of the reply that is certain, as it may be shown now (see the module doc).
    ///
    /// ```
    /// use baton::post::Draft;
    /// let mut draft = Draft::new("NO_REPLY");
    /// draft.push("Here is the plan. NO_RE");
    /// assert_eq!(draft.certain(), "Here is the pl");
    /// draft.push("PLY");
    /// assert_eq!(draft.certain(), "Here is th");
    /// ```
    pub fn certain(&self) -> String {
        let stripped = if self.token.is_empty() {
            self.raw.clone()
        } else {
            self.raw.replace(&self.token, "")
        };
        let held = self.token.chars().count();
        let keep = stripped.chars().count().saturating_sub(held);
        let shown: String = stripped.trim_start().chars().collect();
        let cut = keep.saturating_sub(stripped.chars().count() - shown.chars().count());
        shown
            .chars()
            .take(cut)
            .collect::<String>()
            .trim_end()
            .to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Outcome;

    const TOKEN: &str = "NO_REPLY";

    /// Every prefix of every text shows only a prefix of what the turn posts, and nothing for a
    /// silent turn.
    #[test]
    fn nothing_shown_is_ever_taken_back_or_silent() {
        let replies = [
            "NO_REPLY",
            "  NO_REPLY \n",
            "NO",
            "Sure, here it is.\n\nNO_REPLY",
            "Done. NO_REPLY and more",
            "A long answer that goes on for a while, without any token at all.",
            "NO_REPLYNO_REPLY",
            "短い答え。NO_REPLY",
        ];
        for reply in replies {
            let posted = match Outcome::from_text(reply, TOKEN) {
                Outcome::Reply(text) => text,
                Outcome::Silent => String::new(),
            };
            let mut draft = Draft::new(TOKEN);
            for c in reply.chars() {
                draft.push(&c.to_string());
                let shown = draft.certain();
                assert!(
                    posted.starts_with(&shown),
                    "{reply:?}: showed {shown:?}, posts {posted:?}"
                );
                assert!(!shown.contains("NO_"), "{reply:?}: showed {shown:?}");
            }
        }
    }

    #[test]
    fn a_retracted_draft_starts_over() {
        let mut draft = Draft::new(TOKEN);
        draft.push("Let me look that up for you first, one moment");
        assert!(!draft.certain().is_empty());
        draft.retract();
        assert_eq!(draft.certain(), "");
    }
}
