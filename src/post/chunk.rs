//! Splitting a reply to a platform's message limit.
//!
//! Limits are in characters (`char`s), the unit Discord (2000), Slack (4000) and Feishu (4000)
//! count in, never bytes: a CJK or emoji reply would otherwise be cut far too early or, worse,
//! inside a character. Nothing is dropped: the only text lost at a split point is the
//! whitespace the split happens at.
//!
//! Where to split, best first: a paragraph break (a blank line, or the edge of a code block),
//! a line break, a space, and only then a hard cut. A chunk that has to end inside a fenced
//! code block gets the fence closed at its end and reopened, with the same info string
//! (```` ```rust ````), at the start of the next, so each message renders on its own; those added
//! lines count toward the limit.
//!
//! The work is done on byte offsets into the reply ([`Piece`]s); strings are built once, at the
//! end, each with its exact capacity. It is linear in the reply's length whatever its shape: the
//! end of a line longer than a chunk is looked up once ([`Newlines`]), not once per chunk (a
//! 16 MiB reply with no newline took 9 s to split that way, now milliseconds).

/// Split `text` into chunks of at most `limit` characters, never losing content.
///
/// Whitespace at a split point is dropped (indentation of the next line is kept), as is
/// trailing whitespace. Empty or whitespace-only text gives no chunks. A `limit` of 0 is
/// treated as 1.
///
/// ```
/// let chunks = baton::post::split("first paragraph\n\nsecond paragraph", 20);
/// assert_eq!(chunks, ["first paragraph", "second paragraph"]);
/// ```
pub fn split(text: &str, limit: usize) -> Vec<String> {
    pieces(text, limit).iter().map(Piece::render).collect()
}

/// Where the first `posts` chunks of [`split`]`(text, limit)` end in `text` (a byte offset),
/// when it makes more than `posts`; `None` when it makes no more. `text[..end]` splits into
/// those same chunks, so a reply can be cut to a number of posts.
pub fn posts_end(text: &str, limit: usize, posts: usize) -> Option<usize> {
    let pieces = pieces(text, limit);
    if pieces.len() <= posts {
        return None;
    }
    Some(
        posts
            .checked_sub(1)
            .map_or(0, |last| pieces[last].start + pieces[last].body.len()),
    )
}

/// An open fenced code block: its opening line and its marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fence<'a> {
    /// The opening line without indentation: ```` ```rust ````.
    open: &'a str,
    /// The run of backticks or tildes that opened it: ```` ``` ````, `~~~~`.
    marker: &'a str,
}

impl Fence<'_> {
    /// Characters a reopening line costs: the opening line and its newline.
    fn reopen_cost(&self) -> usize {
        self.open.chars().count() + 1
    }

    /// Characters a closing line costs: a newline and the marker (ASCII).
    fn close_cost(&self) -> usize {
        self.marker.len() + 1
    }

    /// Whether `line` closes this fence: at least as many marker characters, nothing else.
    fn closed_by(&self, line: &str) -> bool {
        let Some(line) = strip_indent(line) else {
            return false;
        };
        let mark = self.marker.as_bytes()[0];
        let run = line.bytes().take_while(|&b| b == mark).count();
        run >= self.marker.len() && line[run..].trim().is_empty()
    }
}

/// The fence a line opens, if it is an opening fence line (CommonMark: up to three spaces of
/// indentation, three or more backticks or tildes; a backtick fence's info has no backtick).
fn fence_open(line: &str) -> Option<Fence<'_>> {
    let line = strip_indent(line)?;
    let mark = *line.as_bytes().first()?;
    if mark != b'`' && mark != b'~' {
        return None;
    }
    let run = line.bytes().take_while(|&b| b == mark).count();
    if run < 3 || (mark == b'`' && line[run..].contains('`')) {
        return None;
    }
    Some(Fence {
        open: line.trim_end(),
        marker: &line[..run],
    })
}

/// `line` without up to three leading spaces; `None` when it is indented further.
fn strip_indent(line: &str) -> Option<&str> {
    let spaces = line.bytes().take_while(|&b| b == b' ').count();
    (spaces <= 3).then(|| &line[spaces..])
}

/// One chunk: a slice of the reply, with the fence lines added around it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Piece<'a> {
    /// Opening line of a fence reopened at the start.
    reopen: Option<&'a str>,
    /// Byte offset of `body` in the reply.
    start: usize,
    /// The reply's own text.
    body: &'a str,
    /// Marker of a fence closed at the end.
    close: Option<&'a str>,
}

impl Piece<'_> {
    fn render(&self) -> String {
        let extra = self.reopen.map_or(0, |open| open.len() + 1)
            + self.close.map_or(0, |marker| marker.len() + 1);
        let mut out = String::with_capacity(self.body.len() + extra);
        if let Some(open) = self.reopen {
            out.push_str(open);
            out.push('\n');
        }
        out.push_str(self.body);
        if let Some(marker) = self.close {
            out.push('\n');
            out.push_str(marker);
        }
        out
    }
}

/// A place to end a chunk: byte offset (relative to the rest of the reply) of the whitespace
/// the split happens at, and the fence open there.
#[derive(Debug, Clone, Copy)]
struct Cut<'a> {
    at: usize,
    fence: Option<Fence<'a>>,
}

/// The last split point of each kind within a window.
struct Breaks<'a> {
    paragraph: Option<Cut<'a>>,
    line: Option<Cut<'a>>,
    space: Option<Cut<'a>>,
    hard: Cut<'a>,
}

impl<'a> Breaks<'a> {
    fn best(&self) -> Cut<'a> {
        self.paragraph
            .or(self.line)
            .or(self.space)
            .unwrap_or(self.hard)
    }
}

fn pieces(text: &str, limit: usize) -> Vec<Piece<'_>> {
    let limit = limit.max(1);
    let end = text.trim_end().len();
    let mut out = Vec::with_capacity(end / limit + 1);
    let mut newlines = Newlines::new(text.as_bytes());
    let mut pos = skip_split(text, 0, end);
    let mut fence: Option<Fence<'_>> = None;
    // Whether the previous chunk closed `fence` with an added line.
    let mut closed = false;
    while pos < end {
        let at_line_start = pos == 0 || text.as_bytes()[pos - 1] == b'\n';
        if let (Some(f), true, true) = (fence, closed, at_line_start) {
            // The previous chunk ended just before this fence's own closing line and closed
            // the fence itself: that line is done, and reopening for it would make an empty
            // block.
            let line_end = newlines.next(pos).min(end);
            if f.closed_by(&text[pos..line_end]) {
                fence = None;
                closed = false;
                pos = skip_split(text, line_end, end);
                continue;
            }
        }
        let rest = &text[pos..end];
        // Fence repair needs room for both added lines and some text; below that, split plainly.
        let affordable = |f: &Fence<'_>| f.reopen_cost() + f.close_cost() < limit;
        let reopen = fence.filter(affordable);
        let budget = limit - reopen.map_or(0, |f| f.reopen_cost());
        let Some(window) = char_offset(rest, budget) else {
            out.push(Piece {
                reopen: reopen.map(|f| f.open),
                start: pos,
                body: rest,
                close: None,
            });
            break;
        };
        // Find a cut; if it lies inside a fence, reserve room for the closing line and look
        // again (the new cut may lie in another fence, so repeat until the room suffices).
        let mut reserve = 0;
        let mut window = window;
        let (cut, close) = loop {
            let cut = scan(rest, pos, &mut newlines, at_line_start, fence, window).best();
            let close = cut
                .fence
                .filter(|f| affordable(f) && f.close_cost() < budget);
            let need = close.map_or(0, |f| f.close_cost());
            if need <= reserve {
                break (cut, close);
            }
            reserve = need;
            window = char_offset(rest, budget - reserve).unwrap_or(rest.len());
        };
        let body = rest[..cut.at].trim_end();
        if !body.is_empty() {
            out.push(Piece {
                reopen: reopen.map(|f| f.open),
                start: pos,
                body,
                close: close.map(|f| f.marker),
            });
        }
        fence = cut.fence;
        closed = close.is_some();
        pos = skip_split(text, pos + cut.at, end);
    }
    out
}

/// Byte offset just past the first `n` chars of `s`; `None` when `s` has `n` chars or fewer.
fn char_offset(s: &str, n: usize) -> Option<usize> {
    if s.len() <= n {
        // Never more chars than bytes: it all fits.
        return None;
    }
    s.char_indices().nth(n).map(|(i, _)| i)
}

/// Where the next chunk starts after a split at `from`: past the whitespace, but keeping the
/// indentation of the next line.
fn skip_split(text: &str, from: usize, end: usize) -> usize {
    let rest = &text[from..end];
    let run = &rest[..rest.len() - rest.trim_start().len()];
    from + run.rfind('\n').map_or(run.len(), |i| i + 1)
}

/// The split points in `rest[..=window]`, with the fence open at each. `rest` starts at byte
/// `pos` of the reply whose newlines `newlines` finds. `fence` is the fence open at the start of
/// `rest`; `at_line_start` says whether `rest` starts a line (a chunk that began mid-line must
/// not read its first line as a fence line).
fn scan<'a>(
    rest: &'a str,
    pos: usize,
    newlines: &mut Newlines<'_>,
    at_line_start: bool,
    fence: Option<Fence<'a>>,
    window: usize,
) -> Breaks<'a> {
    let bytes = rest.as_bytes();
    let mut state = fence;
    let mut breaks = Breaks {
        paragraph: None,
        line: None,
        space: None,
        hard: Cut {
            at: window,
            fence: state,
        },
    };
    // Whether anything but whitespace came before the current line.
    let mut content = false;
    let mut prev_blank = false;
    let mut prev_closed = false;
    let mut line_start = 0;
    loop {
        let line_end = (newlines.next(pos + line_start) - pos).min(rest.len());
        let line = &rest[line_start..line_end];
        let blank = line.trim().is_empty();
        let first = line_start == 0;
        if !first && content {
            // The newline ending the previous line: a paragraph break if a blank line or a
            // fence edge is next to it.
            let opens = state.is_none() && fence_open(line).is_some();
            let cut = Cut {
                at: line_start - 1,
                fence: state,
            };
            if blank || prev_blank || prev_closed || opens {
                breaks.paragraph = Some(cut);
            } else {
                breaks.line = Some(cut);
            }
        }
        let before = state;
        if !first || at_line_start {
            state = match state {
                None => fence_open(line),
                Some(f) if f.closed_by(line) => None,
                Some(f) => Some(f),
            };
        }
        if line_start <= window {
            // Spaces up to and including the window's edge (a space there ends a full chunk).
            let hi = if window < line_end {
                window + 1
            } else {
                line_end
            };
            if let Some(p) = bytes[line_start..hi]
                .iter()
                .rposition(|&b| b == b' ' || b == b'\t')
            {
                let p = line_start + p;
                if content || !rest[line_start..p].trim().is_empty() {
                    breaks.space = Some(Cut {
                        at: p,
                        fence: state,
                    });
                }
            }
            if window <= line_end {
                breaks.hard.fence = state;
            }
        }
        content |= !blank;
        prev_blank = blank;
        prev_closed = before.is_some() && state.is_none();
        if line_end >= rest.len() || line_end > window {
            break;
        }
        line_start = line_end + 1;
    }
    breaks
}

/// Finds the next newline of a reply, remembering the farthest one found: each chunk asks for
/// the end of the line it ends in, and for a line longer than a chunk that is the same far-off
/// newline every time. Searching for it anew each time made splitting quadratic.
struct Newlines<'a> {
    bytes: &'a [u8],
    /// No newline lies in `from..at`; `at` is a newline or the end of the reply.
    from: usize,
    at: usize,
}

impl<'a> Newlines<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            from: 0,
            at: find_newline(bytes, 0),
        }
    }

    /// Byte offset of the first newline at or after `from`, or the reply's length.
    fn next(&mut self, from: usize) -> usize {
        if from < self.from {
            // Only as far as the remembered stretch, which has none.
            let nearer = find_newline(&self.bytes[..self.from], from);
            return if nearer < self.from { nearer } else { self.at };
        }
        if from > self.at {
            self.from = from;
            self.at = find_newline(self.bytes, from);
        }
        self.at
    }
}

fn find_newline(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| from + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> usize {
        s.chars().count()
    }

    /// Every chunk fits, renders from its piece, and the pieces cover the text with only
    /// whitespace (or a fence's own closing line, replaced by an added one) between them.
    fn assert_lossless(text: &str, limit: usize) -> Vec<String> {
        let pieces = pieces(text, limit);
        let chunks = split(text, limit);
        assert_eq!(pieces.len(), chunks.len());
        let mut cursor = 0;
        let mut prev_closed = false;
        for (piece, chunk) in pieces.iter().zip(&chunks) {
            assert!(
                chars(chunk) <= limit.max(1),
                "chunk of {} chars over limit {limit}: {chunk:?} (text {text:?})",
                chars(chunk)
            );
            assert!(!chunk.trim().is_empty(), "empty chunk from {text:?}");
            assert_eq!(
                &text[piece.start..piece.start + piece.body.len()],
                piece.body
            );
            let gap = &text[cursor..piece.start];
            assert!(
                gap_ok(gap, prev_closed),
                "lost {gap:?} before chunk {chunk:?} (text {text:?}, limit {limit})"
            );
            let mut expected = String::new();
            if let Some(open) = piece.reopen {
                expected.push_str(open);
                expected.push('\n');
            }
            expected.push_str(piece.body);
            if let Some(marker) = piece.close {
                expected.push('\n');
                expected.push_str(marker);
            }
            assert_eq!(&expected, chunk);
            cursor = piece.start + piece.body.len();
            prev_closed = piece.close.is_some();
        }
        let tail = &text[cursor..];
        assert!(
            gap_ok(tail, prev_closed),
            "lost {tail:?} at the end of {text:?}"
        );
        chunks
    }

    /// Text between two chunks: whitespace, or a fence's closing line that the earlier chunk
    /// replaced with an added one.
    fn gap_ok(gap: &str, replaced_close: bool) -> bool {
        let inner = gap.trim();
        inner.is_empty()
            || (replaced_close
                && !inner.contains('\n')
                && inner.bytes().all(|b| b == b'`' || b == b'~'))
    }

    /// Whether every fence a chunk opens is closed in it.
    fn balanced(chunk: &str) -> bool {
        let mut state: Option<Fence<'_>> = None;
        for line in chunk.lines() {
            state = match state {
                None => fence_open(line),
                Some(f) if f.closed_by(line) => None,
                Some(f) => Some(f),
            };
        }
        state.is_none()
    }

    #[test]
    fn short_text_is_one_chunk() {
        assert_eq!(split("hello there", 2000), ["hello there"]);
        assert_eq!(split("  \n\nhello\n\n  ", 2000), ["hello"]);
    }

    #[test]
    fn empty_and_blank_text_give_no_chunks() {
        assert!(split("", 10).is_empty());
        assert!(split(" \n\t \n ", 10).is_empty());
    }

    #[test]
    fn text_exactly_at_the_limit_is_one_chunk() {
        let text = "a".repeat(2000);
        assert_eq!(split(&text, 2000), std::slice::from_ref(&text));
        let over = format!("{text}b");
        let chunks = assert_lossless(&over, 2000);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[1], "b");
    }

    #[test]
    fn a_paragraph_break_is_preferred_over_a_line_break() {
        let text = "one one\n\ntwo two\nthree three four";
        assert_eq!(
            assert_lossless(text, 25),
            ["one one", "two two\nthree three four"]
        );
    }

    #[test]
    fn a_line_break_is_preferred_over_a_space() {
        let text = "alpha beta\ngamma delta epsilon";
        assert_eq!(
            assert_lossless(text, 20),
            ["alpha beta", "gamma delta epsilon"]
        );
    }

    #[test]
    fn a_space_is_preferred_over_a_hard_cut() {
        assert_eq!(assert_lossless("aaaa bbbb cccc", 10), ["aaaa bbbb", "cccc"]);
        // A space right at the edge ends a full chunk.
        assert_eq!(assert_lossless("aaaa bbbb", 4), ["aaaa", "bbbb"]);
    }

    #[test]
    fn crlf_line_endings_split_like_lf() {
        assert_eq!(
            assert_lossless("one\r\n\r\ntwo\r\nthree", 10),
            ["one", "two\r\nthree"]
        );
    }

    #[test]
    fn indentation_after_a_split_is_kept() {
        assert_eq!(
            assert_lossless("first line\n    indented", 12),
            ["first line", "    indented"]
        );
    }

    #[test]
    fn a_single_long_word_is_cut_hard() {
        let word = "x".repeat(25);
        assert_eq!(
            assert_lossless(&word, 10),
            ["x".repeat(10), "x".repeat(10), "x".repeat(5)]
        );
    }

    #[test]
    fn multibyte_text_is_counted_in_chars_and_never_split_inside_one() {
        let emoji = "😀".repeat(7);
        let chunks = assert_lossless(&emoji, 3);
        assert_eq!(chunks, ["😀😀😀", "😀😀😀", "😀"]);
        let cjk = "漢字かな交じり文は長いです。".repeat(3);
        let chunks = assert_lossless(&cjk, 10);
        assert!(chunks.iter().all(|c| chars(c) <= 10));
        assert_eq!(chunks.concat(), cjk);
        // 2000 emoji are 8000 bytes but one Discord message.
        assert_eq!(split(&"🎉".repeat(2000), 2000).len(), 1);
    }

    #[test]
    fn a_code_fence_is_closed_and_reopened_with_its_info_string() {
        let code: String = (0..30).map(|i| format!("let x{i} = {i};\n")).collect();
        let text = format!("Here is the fix:\n\n```rust\n{code}```\n\nThat should do it.");
        let chunks = assert_lossless(&text, 120);
        assert!(chunks.len() > 3, "{chunks:#?}");
        assert_eq!(chunks[0], "Here is the fix:");
        for chunk in &chunks {
            assert!(chars(chunk) <= 120);
            assert!(balanced(chunk), "unbalanced: {chunk:?}");
        }
        let code_chunks: Vec<_> = chunks.iter().filter(|c| c.contains("let x")).collect();
        assert!(code_chunks.len() > 2, "{chunks:#?}");
        for chunk in code_chunks {
            assert!(chunk.starts_with("```rust\n"), "{chunk:?}");
        }
        for chunk in &chunks[1..chunks.len() - 1] {
            assert!(chunk.ends_with("\n```"), "{chunk:?}");
        }
        assert!(
            chunks
                .last()
                .is_some_and(|c| c.ends_with("That should do it."))
        );
    }

    #[test]
    fn a_chunk_does_not_end_just_after_a_fence_opens() {
        let text = format!(
            "{}\n```py\nprint(1)\nprint(2)\n```",
            "intro ".repeat(3).trim()
        );
        let chunks = assert_lossless(&text, 30);
        assert_eq!(chunks[0], "intro intro intro");
        assert!(chunks.iter().all(|c| balanced(c)), "{chunks:#?}");
    }

    #[test]
    fn inline_triple_backticks_are_not_a_fence() {
        let text = "```x``` is inline\nand more words follow here";
        let chunks = assert_lossless(text, 20);
        assert!(chunks.iter().all(|c| !c.ends_with("\n```")), "{chunks:#?}");
    }

    /// Adversarial shapes of a large reply: each must split in linear time. Quadratic splitting
    /// (each chunk searching to the end of a long line) takes tens of seconds on these at a small
    /// limit; linear takes a fraction of one, even unoptimised on a busy machine.
    #[test]
    fn splitting_is_linear_whatever_the_shape() {
        let n = 1 << 20;
        let shapes: Vec<(&str, String)> = vec![
            ("one line, no space", "x".repeat(n)),
            ("one line of words", "word ".repeat(n / 5)),
            ("one line of emoji", "😀".repeat(n / 4)),
            (
                "a fence around one long line",
                format!("```rust\n{}", "y".repeat(n)),
            ),
            ("an inline fence line", format!("```a`{}", "z".repeat(n))),
            (
                "a closing line of spaces",
                format!("```\nq\n```{}x", " ".repeat(n)),
            ),
            ("short lines", "a\n".repeat(n / 2)),
            ("short paragraphs", "a b\n\n".repeat(n / 5)),
            ("tiny fences", "```\nv\n```\n".repeat(n / 10)),
            ("leading spaces", format!("\n{}x", " ".repeat(n))),
        ];
        for (shape, text) in &shapes {
            for limit in [7, 50, 2000] {
                let started = std::time::Instant::now();
                let chunks = split(text, limit);
                let took = started.elapsed();
                assert!(!chunks.is_empty());
                assert!(
                    took < std::time::Duration::from_secs(3),
                    "{shape} at limit {limit}: {took:?}"
                );
            }
        }
    }

    #[test]
    fn the_end_of_the_first_posts_splits_into_those_posts() {
        let text = "one two three four five six seven eight nine ten";
        assert_eq!(posts_end(text, 10, 6), None);
        let end = posts_end(text, 10, 2).unwrap();
        assert_eq!(&text[..end], "one two three four");
        assert_eq!(split(&text[..end], 10), &split(text, 10)[..2]);
        assert_eq!(posts_end(text, 10, 0), Some(0));
    }

    /// A small deterministic generator: no extra dependency, same texts on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn generate(rng: &mut Rng) -> String {
        const WORDS: &[&str] = &[
            "a",
            "word",
            "longerword",
            "😀",
            "漢字",
            "naïve",
            "x",
            "fn",
            "{",
            "}",
            "``",
            "~",
        ];
        let mut text = String::new();
        let mut fenced = false;
        for _ in 0..rng.below(120) {
            match rng.below(20) {
                0 => text.push_str("\n\n"),
                1 | 2 => text.push('\n'),
                3 => text.push_str("   "),
                4 => {
                    text.push_str(if fenced { "\n```\n" } else { "\n```rust\n" });
                    fenced = !fenced;
                }
                5 => text.push_str("\n~~~~\n"),
                6 => text.push_str(&"y".repeat(rng.below(50))),
                7 => text.push('\t'),
                _ => {
                    text.push_str(WORDS[rng.below(WORDS.len())]);
                    text.push(' ');
                }
            }
        }
        text
    }

    #[test]
    fn generated_texts_always_fit_and_lose_nothing() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..3000 {
            let text = generate(&mut rng);
            let limit = match round % 4 {
                0 => 1 + rng.below(8),
                1 => 8 + rng.below(30),
                _ => 30 + rng.below(200),
            };
            assert_lossless(&text, limit);
        }
    }

    #[test]
    fn balanced_fences_stay_balanced_in_every_chunk() {
        let mut rng = Rng(42);
        for _ in 0..500 {
            let mut text = String::new();
            for _ in 0..1 + rng.below(5) {
                text.push_str("Some prose before the code.\n\n```python\n");
                for l in 0..rng.below(40) {
                    text.push_str(&format!("line_{l} = {}\n", "v".repeat(rng.below(30))));
                }
                text.push_str("```\n\n");
            }
            let limit = 40 + rng.below(400);
            for chunk in assert_lossless(&text, limit) {
                assert!(balanced(&chunk), "unbalanced at {limit}: {chunk:?}");
            }
        }
    }
}
