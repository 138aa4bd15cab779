//! `[[chats]]` and `[chats_default]`: chat ids and bot lists are globs, and each
//! (platform, id) has at most one entry, so which policy applies is never ambiguous.

use std::collections::HashMap;

use baton_contract::Platform;

use super::super::Config;
use super::{Checker, earlier};

impl Checker<'_> {
    pub(super) fn chats(&mut self, config: &Config) {
        let mut seen: HashMap<(Platform, &str), usize> = HashMap::new();
        for (i, chat) in config.chats.iter().enumerate() {
            self.glob(format!("chats[{i}].id"), &chat.id);
            if let Some(first) = earlier(&mut seen, (chat.platform, &chat.id), i) {
                self.report(
                    format!("chats[{i}].id"),
                    format!(
                        "{} chat `{}` already has an entry, chats[{first}]; merge the two",
                        chat.platform, chat.id
                    ),
                );
            }
            if let Some(allow_bots) = &chat.allow_bots {
                self.globs(&format!("chats[{i}].allow_bots"), allow_bots);
            }
        }
        self.globs("chats_default.allow_bots", &config.chats_default.allow_bots);
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::assert_broken_reports;

    #[test]
    fn chats_report_each_problem_by_key() {
        assert_broken_reports(
            &["chats[0].allow_bots[0]", "chats[1].id", "chats[2].id"],
            // A glob is a fine id; only the second entry for it is a duplicate.
            &["chats[0].id"],
        );
    }
}
