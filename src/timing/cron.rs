//! Cron entries' schedules: standard 5-field expressions (`minute hour day-of-month month
//! day-of-week`), read by the `croner` crate.
//!
//! Why croner: it reads the POSIX 5-field form as it is (the `cron` crate wants a seconds
//! field, so `0 9 * * 1-5` would mean something else or fail), it is maintained, it works on
//! chrono times in any zone and handles daylight-saving gaps, and it keeps POSIX's rule that a
//! day matches when *either* day field does. Seconds and years are refused here, so every
//! schedule in a baton config reads the way crontab(5) reads.

use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use super::Zone;

/// A parsed cron expression.
#[derive(Debug, Clone)]
pub struct Schedule {
    cron: Cron,
}

impl Schedule {
    /// Parse a 5-field expression (names like `MON` and `JAN`, lists, ranges, steps, and the
    /// `@daily`-style nicknames work). The error says what to write.
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let parser = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build();
        parser
            .parse(text.trim())
            .map(|cron| Schedule { cron })
            .map_err(|err| {
                format!(
                    "`{text}` is not a cron schedule ({err}); write five fields, minute hour \
                     day-of-month month day-of-week, e.g. \"0 9 * * 1-5\" for 09:00 on weekdays"
                )
            })
    }

    /// The first time strictly after `after` that the schedule names, on `zone`'s clock.
    pub fn next_after(&self, zone: Zone, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        zone.next_cron(&self.cron, after)
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn utc() -> Zone {
        Zone::parse("UTC").unwrap()
    }

    #[test]
    fn weekdays_at_nine() {
        let s = Schedule::parse("0 9 * * 1-5").unwrap();
        // 2025-03-07 is a Friday.
        let friday_8 = Utc.with_ymd_and_hms(2025, 3, 7, 8, 0, 0).unwrap();
        let friday_9 = Utc.with_ymd_and_hms(2025, 3, 7, 9, 0, 0).unwrap();
        let monday_9 = Utc.with_ymd_and_hms(2025, 3, 10, 9, 0, 0).unwrap();
        assert_eq!(s.next_after(utc(), friday_8), Some(friday_9));
        assert_eq!(
            s.next_after(utc(), friday_9),
            Some(monday_9),
            "strictly after"
        );
    }

    #[test]
    fn read_on_the_gateways_clock() {
        let s = Schedule::parse("0 9 * * *").unwrap();
        let zone = Zone::parse("+08:00").unwrap();
        let at = Utc.with_ymd_and_hms(2025, 3, 3, 0, 0, 0).unwrap();
        // 09:00 at +08:00 is 01:00 UTC.
        assert_eq!(
            s.next_after(zone, at),
            Some(Utc.with_ymd_and_hms(2025, 3, 3, 1, 0, 0).unwrap())
        );
    }

    #[test]
    fn only_five_fields() {
        assert!(Schedule::parse("*/15 * * * *").is_ok());
        assert!(Schedule::parse("0 9 * * MON-FRI").is_ok());
        assert!(Schedule::parse("@daily").is_ok());
        for bad in ["0 0 9 * * 1-5", "0 9 * *", "61 * * * *", "every day"] {
            let err = Schedule::parse(bad).unwrap_err();
            assert!(err.contains("\"0 9 * * 1-5\""), "{bad}: {err}");
        }
    }
}
