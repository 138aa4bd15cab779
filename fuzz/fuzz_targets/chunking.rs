//! Replies split to a platform's message limit (`baton::post::split`). The text is a model's
//! reply, which is outside input as much as a chat message is. The first byte of the input is
//! the limit in characters (0 to 255; `split` treats 0 as 1), the rest the reply.
//!
//! Checked, as `src/post/chunk.rs` promises: every chunk is non-blank and within the limit;
//! the chunks keep every non-whitespace character of the reply in order (only whitespace at a
//! split point is dropped; a fenced code block split across chunks is closed and reopened,
//! which adds fence lines and may replace a fence's own closing line); and a reply that fits is
//! one chunk.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&limit, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let limit = usize::from(limit);
    let chunks = baton::post::split(text, limit);

    for chunk in &chunks {
        let chars = chunk.chars().count();
        assert!(
            chars <= limit.max(1),
            "a {chars}-char chunk over limit {limit}: {chunk:?}"
        );
        assert!(!chunk.trim().is_empty(), "a blank chunk");
        assert_eq!(chunk.trim_end(), chunk, "trailing whitespace kept");
    }

    if text.trim().is_empty() {
        assert!(chunks.is_empty());
        return;
    }
    if text.trim_end().chars().count() <= limit.max(1) {
        assert_eq!(chunks.len(), 1, "text that fits is one chunk");
        assert_eq!(chunks[0].trim_start(), text.trim());
    }

    let original: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
    let joined: Vec<char> = chunks
        .iter()
        .flat_map(|c| c.chars())
        .filter(|c| !c.is_whitespace())
        .collect();
    if !text.contains(['`', '~']) {
        // No fence, nothing added: exactly the reply's text, split only at whitespace.
        assert_eq!(original, joined, "text lost or added");
    } else {
        // Fence lines may be added (reopened) or replaced (a closing line): everything else
        // must still be there, in order.
        let mut it = joined.iter();
        for c in original.iter().filter(|c| !matches!(c, '`' | '~')) {
            assert!(
                it.any(|j| j == c),
                "lost {c:?} (limit {limit}, text {text:?})"
            );
        }
    }
});
