//! Lengths of time written in the config: numbers with unit letters run together (`1h30m`,
//! `90d`). One grammar for every key that takes one, each with its own units and hint, so a
//! heartbeat's `every` and a retention age are read and refused in the same words.

use std::time::Duration;

/// Parse `text` as numbers each followed by one of `units` (letter, seconds). Zero is refused.
/// The error says what is wrong and ends with `hint` (what to write instead).
pub fn parse_span(text: &str, units: &[(char, u64)], hint: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(format!("is empty; {hint}"));
    }
    let mut total: u64 = 0;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let Some(&(_, unit)) = units.iter().find(|(letter, _)| *letter == c) else {
            return Err(format!("`{text}` has `{c}`, which is not a unit; {hint}"));
        };
        let n: u64 = digits
            .parse()
            .map_err(|_| format!("`{text}` has a unit without a number before it; {hint}"))?;
        digits.clear();
        total = n
            .checked_mul(unit)
            .and_then(|part| total.checked_add(part))
            .ok_or_else(|| format!("`{text}` is too long; {hint}"))?;
    }
    if !digits.is_empty() {
        return Err(format!("`{text}` ends in a number without a unit; {hint}"));
    }
    if total == 0 {
        return Err(format!("`{text}` is zero; {hint}"));
    }
    Ok(Duration::from_secs(total))
}

/// What a retention key says: `"keep"` (`None`: never delete) or an age such as `"90d"`, `"12h"`
/// or `"2w"` (rows older than this go).
///
/// ```
/// use std::time::Duration;
/// use baton::config::parse_age;
/// assert_eq!(parse_age("keep"), Ok(None));
/// assert_eq!(parse_age("90d"), Ok(Some(Duration::from_secs(90 * 86_400))));
/// assert!(parse_age("90").is_err());
/// ```
pub fn parse_age(text: &str) -> Result<Option<Duration>, String> {
    if text.trim() == "keep" {
        return Ok(None);
    }
    let hint = "write \"keep\" or an age such as \"90d\", \"12h\" or \"2w\" (units h, d, w)";
    parse_span(text, &[('h', 3600), ('d', 86_400), ('w', 7 * 86_400)], hint).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_keep() {
        assert_eq!(parse_age(" keep "), Ok(None));
        assert_eq!(parse_age("12h"), Ok(Some(Duration::from_secs(12 * 3600))));
        assert_eq!(
            parse_age("2w1d"),
            Ok(Some(Duration::from_secs(15 * 86_400)))
        );
    }

    #[test]
    fn bad_ages_say_what_to_write() {
        for bad in [
            "",
            "90",
            "d",
            "90 d",
            "30m",
            "0d",
            "-1d",
            "forever",
            "99999999999999999w",
        ] {
            let err = parse_age(bad).unwrap_err();
            assert!(err.contains("\"keep\""), "{bad}: {err}");
        }
    }
}
