//! The gateway's clock (`[gateway] timezone`): which wall-clock time a cron schedule and quiet
//! hours are read in.
//!
//! `local` (the default) follows the machine, daylight-saving changes included, as a person
//! writing `0 9 * * 1-5` expects. An IANA name (`Europe/Berlin`, `Asia/Shanghai`) follows that
//! zone's rules, daylight saving included, whatever the machine is set to: the tz database is
//! built into the binary (`chrono-tz`), so a container without `/usr/share/zoneinfo` works too.
//! `UTC` and fixed offsets (`+08:00`) never shift, which is what tests want.

use chrono::{DateTime, FixedOffset, Local, NaiveDateTime, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;

/// A time zone setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// The machine's zone (`TZ`, `/etc/localtime`).
    Local,
    /// A fixed offset from UTC (`UTC` is `+00:00`).
    Fixed(FixedOffset),
    /// An IANA zone, with its daylight-saving rules.
    Named(Tz),
}

impl Zone {
    /// Parse `local`, `UTC`, `+HH:MM` / `-HH:MM` or an IANA name. The error says what to write.
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
                 an IANA name such as \"Europe/Berlin\" (with its daylight saving), \"UTC\", \
                 or an offset such as \"+08:00\" or \"-05:00\""
            )
        };
        let (sign, rest) = match text.as_bytes().first() {
            Some(b'+') => (1, &text[1..]),
            Some(b'-') => (-1, &text[1..]),
            _ => return text.parse::<Tz>().map(Zone::Named).map_err(|_| bad()),
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
            Zone::Named(tz) => at.with_timezone(tz).naive_local(),
        }
    }

    /// `at` shown with this zone's offset, for people.
    pub fn show(&self, at: DateTime<Utc>) -> DateTime<FixedOffset> {
        match self {
            Zone::Local => at.with_timezone(&Local).fixed_offset(),
            Zone::Fixed(offset) => at.with_timezone(offset),
            Zone::Named(tz) => at.with_timezone(tz).fixed_offset(),
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
            Zone::Named(tz) => resolve(tz, wall),
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
            Zone::Named(tz) => cron
                .find_next_occurrence(&after.with_timezone(tz), false)
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
        assert_eq!(
            Zone::parse("Europe/Berlin"),
            Ok(Zone::Named(chrono_tz::Europe::Berlin))
        );
        assert_eq!(
            Zone::parse("Asia/Shanghai"),
            Ok(Zone::Named(chrono_tz::Asia::Shanghai))
        );
        for bad in [
            "Europe/Parris",
            "Mars/Olympus",
            "+8",
            "08:00",
            "+25:00",
            "+08:60",
            "",
        ] {
            let err = Zone::parse(bad).unwrap_err();
            assert!(err.contains("\"+08:00\""), "{bad}: {err}");
            assert!(err.contains("\"Europe/Berlin\""), "{bad}: {err}");
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

    #[test]
    fn an_iana_zone_follows_daylight_saving() {
        let berlin = Zone::parse("Europe/Berlin").unwrap();
        // Winter: UTC+1; summer (from 2025-03-30 01:00 UTC): UTC+2.
        let winter = Utc.with_ymd_and_hms(2025, 3, 29, 23, 30, 0).unwrap();
        let summer = Utc.with_ymd_and_hms(2025, 3, 30, 23, 30, 0).unwrap();
        assert_eq!(berlin.wall(winter).to_string(), "2025-03-30 00:30:00");
        assert_eq!(berlin.wall(summer).to_string(), "2025-03-31 01:30:00");
        assert_eq!(
            berlin.show(summer).to_rfc3339(),
            "2025-03-31T01:30:00+02:00"
        );
        // 02:30 never happens that night: taken an hour later (03:30 CEST = 01:30 UTC).
        let skipped = NaiveDateTime::parse_from_str("2025-03-30 02:30", "%Y-%m-%d %H:%M").unwrap();
        assert_eq!(
            berlin.instant(skipped),
            Utc.with_ymd_and_hms(2025, 3, 30, 1, 30, 0).unwrap()
        );
        // 02:30 happens twice on 2025-10-26: the first (CEST, 00:30 UTC).
        let twice = NaiveDateTime::parse_from_str("2025-10-26 02:30", "%Y-%m-%d %H:%M").unwrap();
        assert_eq!(
            berlin.instant(twice),
            Utc.with_ymd_and_hms(2025, 10, 26, 0, 30, 0).unwrap()
        );
    }
}
