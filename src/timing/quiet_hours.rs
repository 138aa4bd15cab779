//! Quiet hours: `HH:MM-HH:MM` on the gateway's clock, when no heartbeat runs.
//!
//! The window may span midnight (`22:00-07:00`): that is the usual case, a night. The start is
//! inside the window and the end is not, so a heartbeat due at exactly 07:00 runs.

use chrono::{NaiveDateTime, NaiveTime, TimeDelta};

/// A daily window, start inclusive, end exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietHours {
    start: NaiveTime,
    end: NaiveTime,
}

impl QuietHours {
    /// Parse `22:00-07:00`. The error says what to write.
    pub fn parse(text: &str) -> Result<QuietHours, String> {
        let hint = "write the window as \"HH:MM-HH:MM\" on a 24-hour clock, e.g. \"22:00-07:00\"";
        let (start, end) = text
            .split_once('-')
            .ok_or_else(|| format!("`{text}` has no `-`; {hint}"))?;
        let time = |part: &str| {
            NaiveTime::parse_from_str(part.trim(), "%H:%M")
                .map_err(|_| format!("`{}` is not a time of day; {hint}", part.trim()))
        };
        let (start, end) = (time(start)?, time(end)?);
        if start == end {
            return Err(format!(
                "`{text}` starts and ends at the same time; {hint}, or remove quiet_hours"
            ));
        }
        Ok(QuietHours { start, end })
    }

    /// Whether `time` (on the gateway's clock) is inside the window.
    pub fn contains(&self, time: NaiveTime) -> bool {
        if self.start < self.end {
            self.start <= time && time < self.end
        } else {
            time >= self.start || time < self.end
        }
    }

    /// The first moment at or after `now` (wall-clock time) when the window ends.
    pub fn end_after(&self, now: NaiveDateTime) -> NaiveDateTime {
        let today = now.date().and_time(self.end);
        if today >= now {
            today
        } else {
            today + TimeDelta::days(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDate;

    use super::*;

    fn t(h: u32, m: u32) -> NaiveTime {
        NaiveTime::from_hms_opt(h, m, 0).unwrap()
    }

    #[test]
    fn a_window_across_midnight() {
        let night = QuietHours::parse("22:00-07:00").unwrap();
        assert!(night.contains(t(22, 0)));
        assert!(night.contains(t(23, 59)));
        assert!(night.contains(t(0, 0)));
        assert!(night.contains(t(6, 59)));
        assert!(!night.contains(t(7, 0)), "the end is outside");
        assert!(!night.contains(t(12, 0)));
        assert!(!night.contains(t(21, 59)));
    }

    #[test]
    fn a_window_within_a_day() {
        let lunch = QuietHours::parse(" 12:00 - 13:30 ").unwrap();
        assert!(lunch.contains(t(12, 0)) && lunch.contains(t(13, 29)));
        assert!(!lunch.contains(t(13, 30)) && !lunch.contains(t(11, 59)));
    }

    #[test]
    fn the_end_after_a_moment() {
        let night = QuietHours::parse("22:00-07:00").unwrap();
        let day = NaiveDate::from_ymd_opt(2025, 3, 3).unwrap();
        let at = |d: NaiveDate, h, m| d.and_time(t(h, m));
        let next_day = day.succ_opt().unwrap();
        assert_eq!(night.end_after(at(day, 23, 0)), at(next_day, 7, 0));
        assert_eq!(night.end_after(at(day, 3, 0)), at(day, 7, 0));
    }

    #[test]
    fn bad_windows_say_what_to_write() {
        for bad in [
            "22:00",
            "22-07",
            "25:00-07:00",
            "7:00-7:00",
            "22:00-07:00pm",
        ] {
            let err = QuietHours::parse(bad).unwrap_err();
            assert!(err.contains("HH:MM-HH:MM"), "{bad}: {err}");
        }
    }
}
