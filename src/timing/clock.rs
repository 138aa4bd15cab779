//! The gateway's one wall clock. Everything that stamps a row, a deadline or an event reads it
//! here, so a test or a reader finds the single place time comes from.

/// Milliseconds since the Unix epoch; 0 if the system clock is before it.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_after_2020_and_moves_forward() {
        let first = now_ms();
        assert!(first > 1_577_836_800_000, "{first}");
        assert!(now_ms() >= first);
    }
}
