//! Who a message is addressed to (SPEC 6.2): the mentions that open it, before its first word.
//! "`@snark ask @caid: write a haiku`" is for snark; caid is named, not addressed. Every adapter
//! counts them the same way over its own mention markup, with [`leading_mentions`].

/// How many distinct users the mentions opening `text` name (0 when it opens with a word).
/// `mention` reads one mention token at the start of what it is given and returns the user id
/// and the token's length in bytes, or `None` when the text does not start with one. Spaces,
/// commas and colons between the opening mentions are skipped.
///
/// ```
/// # use baton_contract::leading_mentions;
/// let slack = |s: &str| {
///     let inner = s.strip_prefix("<@")?;
///     let end = inner.find('>')?;
///     Some((inner[..end].to_owned(), end + 3))
/// };
/// assert_eq!(leading_mentions("<@U1> ask <@U2>: a haiku", slack), 1);
/// assert_eq!(leading_mentions("<@U1>, <@U2> hi", slack), 2);
/// assert_eq!(leading_mentions("can <@U1> help?", slack), 0);
/// ```
pub fn leading_mentions(text: &str, mention: impl Fn(&str) -> Option<(String, usize)>) -> usize {
    let mut seen: Vec<String> = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',' || c == ':');
        match mention(rest) {
            Some((id, len)) if len > 0 && len <= rest.len() => {
                if !seen.contains(&id) {
                    seen.push(id);
                }
                rest = &rest[len..];
            }
            _ => return seen.len(),
        }
    }
}
