//! Heartbeat intervals: `2s`, `5m`, `1h`, or parts of them run together (`1h30m`).
//!
//! A tiny grammar of our own rather than a crate (`span.rs`, shared with the retention
//! ages): the spec names exactly these units, and a wrong value must be reported with its key by
//! `baton check`, in words that say what to write.

use std::time::Duration;

use super::span::parse_span;

/// Parse an interval such as `30m`. The error says what is wrong and what to write instead.
///
/// ```
/// use std::time::Duration;
/// use baton::timing::parse_every;
/// assert_eq!(parse_every("1h30m"), Ok(Duration::from_secs(5400)));
/// assert!(parse_every("30").is_err());
/// ```
pub fn parse_every(text: &str) -> Result<Duration, String> {
    let hint = "write a duration such as \"30m\", \"2s\", \"1h\" or \"1h30m\" (units s, m, h)";
    parse_span(text, &[('s', 1), ('m', 60), ('h', 3600)], hint)
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
