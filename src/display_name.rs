//! Names people give themselves reach the transcript, the audit log and the model. A control
//! character (NUL, a terminal escape, a newline) or a bidirectional override inside one can make
//! a line look as if someone else wrote it, so such characters never pass as they are: the local
//! channel refuses them at its edge, and every platform's display names are cleaned where they
//! enter the pipeline.

use std::borrow::Cow;

/// What replaces a character that could forge a line: visible, so the tampering shows.
pub const REPLACEMENT: char = '\u{FFFD}';

/// Whether `c` could change how a line reads: control characters, and the marks and overrides
/// that reorder text (U+200E/F, U+202A..E, U+2066..9).
pub fn is_spoofing(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `name` with every [`is_spoofing`] character replaced by [`REPLACEMENT`].
pub fn sanitize(name: &str) -> Cow<'_, str> {
    if name.chars().any(is_spoofing) {
        Cow::Owned(
            name.chars()
                .map(|c| if is_spoofing(c) { REPLACEMENT } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_replaced_and_plain_names_kept() {
        assert!(matches!(sanitize("Zoë Wang"), Cow::Borrowed("Zoë Wang")));
        assert_eq!(sanitize("alice\0admin"), "alice\u{FFFD}admin");
        assert_eq!(sanitize("a\u{1b}[2Jb\nc"), "a\u{FFFD}[2Jb\u{FFFD}c");
        assert_eq!(sanitize("bob\u{202E}nimda"), "bob\u{FFFD}nimda");
    }
}
