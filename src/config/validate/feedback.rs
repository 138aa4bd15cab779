//! `[feedback]` and each bot's `feedback = { ... }`: an edit interval short enough to meet the
//! platforms' rate limits is refused, so a stream cannot turn into a 429 storm.

use super::super::{Config, FeedbackConfig};
use super::Checker;

impl Checker<'_> {
    pub(super) fn feedback(&mut self, config: &Config) {
        let intervals = std::iter::once((
            "feedback.edit_interval_ms".to_owned(),
            Some(config.feedback.edit_interval_ms),
        ))
        .chain(config.bots.iter().enumerate().map(|(i, bot)| {
            (
                format!("bots[{i}].feedback.edit_interval_ms"),
                bot.feedback.edit_interval_ms,
            )
        }));
        for (key, interval) in intervals {
            if let Some(ms) = interval.filter(|ms| *ms < FeedbackConfig::MIN_EDIT_INTERVAL_MS) {
                self.report(
                    key,
                    format!(
                        "{ms} ms is shorter than the platforms' rate limits allow; use at least \
                         {} (default 1200)",
                        FeedbackConfig::MIN_EDIT_INTERVAL_MS
                    ),
                );
            }
        }
    }
}
