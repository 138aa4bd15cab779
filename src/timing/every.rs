//! Heartbeat intervals: `2s`, `5m`, `1h`, or parts of them run together (`1h30m`).
//!
//! A tiny grammar of our own rather than a crate: the spec names exactly these units, and a
//! wrong value must be reported with its key by `baton check`, in words that say what to write.

use std::time::Duration;

/// Parse an interval such as `30m`. The error says what is wrong and what to write instead.
///
/// ```
/// use std::time::Duration;
/// use baton::schedule::parse_every;
/// assert_eq!(parse_every("1h30m"), Ok(Duration::from_secs(5400)));
/// assert!(parse_every("30").is_err());
/// ```
pub fn parse_every(text: &str) -> Result<Duration, String> {
    let hint = "write a duration such as \"30m\", \"2s\", \"1h\" or \"1h30m\" (units s, m, h)";
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
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return Err(format!("`{text}` has `{c}`, which is not a unit; {hint}")),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_compounds() {
        assert_eq!(parse_every("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_every("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_every(" 1h "), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_every("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_every("90s"), Ok(Duration::from_secs(90)));
    }

    #[test]
    fn bad_values_say_what_to_write() {
        for bad in [
            "",
            "30",
            "m",
            "5 m",
            "1d",
            "0s",
            "-5m",
            "99999999999999999999h",
        ] {
            let err = parse_every(bad).unwrap_err();
            assert!(err.contains("\"30m\""), "{bad}: {err}");
        }
    }
}
