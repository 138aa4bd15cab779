//! The gateway's clock (`[gateway] timezone`): which wall-clock time a cron schedule and quiet
//! hours are read in.
//!
//! `local` (the default) follows the machine, daylight-saving changes included, as a person
//! writing `0 9 * * 1-5` expects. `UTC` and fixed offsets (`+08:00`) never shift, which is
//! what servers in containers (often set to UTC) and tests want. IANA names (`Europe/Paris`)
//! would need the tz database in the binary; an offset or the machine's zone covers the need.

use chrono::{DateTime, FixedOffset, Local, NaiveDateTime, TimeDelta, TimeZone, Utc};
use croner::Cron;

/// A time zone setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// The machine's zone (`TZ`, `/etc/localtime`).
    Local,
    /// A fixed offset from UTC (`UTC` is `+00:00`).
    Fixed(FixedOffset),
}

impl Zone {
    /// Parse `local`, `UTC` or `+HH:MM` / `-HH:MM`. The error says what to write.
    pub fn parse(text: &str) -> Result<Zone, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("local") {
            return Ok(Zone::Local);
        }
        if text.eq_ignore_ascii_case("utc") || text == "Z" {
            return Ok(Zone::Fixed(FixedOffset::east_opt(0).expect("zero offset")));
        }
        let bad = || {
            format!(
                "`{text}` is not a time zone baton knows; write \"local\" (the machine's zone), \
                 \"UTC\", or an offset such as \"+08:00\" or \"-05:00\""
            )
        };
        let (sign, rest) = match text.as_bytes().first() {
            Some(b'+') => (1, &text[1..]),
            Some(b'-') => (-1, &text[1..]),
            _ => return Err(bad()),
        };
        let (hh, mm) = rest.split_once(':').ok_or_else(bad)?;
        if hh.len() != 2 || mm.len() != 2 {
            return Err(bad());
        }
        let (h, m): (i32, i32) = match (hh.parse(), mm.parse()) {
            (Ok(h), Ok(m)) if (0..=14).contains(&h) && (0..60).contains(&m) => (h, m),
            _ => return Err(bad()),
        };
        FixedOffset::east_opt(sign * (h * 3600 + m * 60))
            .map(Zone::Fixed)
            .ok_or_else(bad)
    }

    /// The wall-clock time at `at`.
    pub fn wall(&self, at: DateTime<Utc>) -> NaiveDateTime {
        match self {
            Zone::Local => at.with_timezone(&Local).naive_local(),
            Zone::Fixed(offset) => at.with_timezone(offset).naive_local(),
        }
    }

    /// `at` shown with this zone's offset, for people.
    pub fn show(&self, at: DateTime<Utc>) -> DateTime<FixedOffset> {
        match self {
            Zone::Local => at.with_timezone(&Local).fixed_offset(),
            Zone::Fixed(offset) => at.with_timezone(offset),
        }
    }

    /// The instant a wall-clock time names. A time that occurs twice (clocks going back) is its
    /// first occurrence; one that never occurs (clocks going forward) is taken an hour later.
    pub fn instant(&self, wall: NaiveDateTime) -> DateTime<Utc> {
        fn resolve<Tz: TimeZone>(tz: &Tz, wall: NaiveDateTime) -> DateTime<Utc> {
            let at = tz.from_local_datetime(&wall).earliest().or_else(|| {
                tz.from_local_datetime(&(wall + TimeDelta::hours(1)))
                    .earliest()
            });
            match at {
                Some(at) => at.with_timezone(&Utc),
                // No zone skips two hours; read the wall time as UTC rather than fail.
                None => wall.and_utc(),
            }
        }
        match self {
            Zone::Local => resolve(&Local, wall),
            Zone::Fixed(offset) => resolve(offset, wall),
        }
    }

    /// The first time after `after` that `cron` names, on this zone's clock.
    pub fn next_cron(&self, cron: &Cron, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let next = match self {
            Zone::Local => cron
                .find_next_occurrence(&after.with_timezone(&Local), false)
                .map(|t| t.with_timezone(&Utc)),
            Zone::Fixed(offset) => cron
                .find_next_occurrence(&after.with_timezone(offset), false)
                .map(|t| t.with_timezone(&Utc)),
        };
        next.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_offsets() {
        assert_eq!(Zone::parse("local"), Ok(Zone::Local));
        let utc = Zone::parse("UTC").unwrap();
        assert_eq!(utc, Zone::Fixed(FixedOffset::east_opt(0).unwrap()));
        assert_eq!(
            Zone::parse("+08:00"),
            Ok(Zone::Fixed(FixedOffset::east_opt(8 * 3600).unwrap()))
        );
        assert_eq!(
            Zone::parse("-05:30"),
            Ok(Zone::Fixed(FixedOffset::west_opt(5 * 3600 + 1800).unwrap()))
        );
        for bad in ["Europe/Paris", "+8", "08:00", "+25:00", "+08:60", ""] {
            let err = Zone::parse(bad).unwrap_err();
            assert!(err.contains("\"+08:00\""), "{bad}: {err}");
        }
    }

    #[test]
    fn wall_time_and_back_in_a_fixed_zone() {
        let zone = Zone::parse("+08:00").unwrap();
        let at = Utc.with_ymd_and_hms(2025, 3, 3, 23, 30, 0).unwrap();
        let wall = zone.wall(at);
        assert_eq!(wall.to_string(), "2025-03-04 07:30:00");
        assert_eq!(zone.instant(wall), at);
        assert_eq!(zone.show(at).to_rfc3339(), "2025-03-04T07:30:00+08:00");
    }
}
