//! `[store]` and `[retention]`: the database file's upkeep. A bound the WAL can actually be kept
//! under, and retention ages that are `"keep"` or at least a day (younger rows may still be
//! needed to recognise a replayed event, so the store never prunes them anyway).

use super::super::{Config, parse_age};
use super::Checker;
use crate::store::DEFAULT_WAL_LIMIT_MB;

/// The largest WAL bound accepted, in MiB (1 TiB): beyond it the bound means nothing.
const MAX_WAL_LIMIT_MB: u64 = 1024 * 1024;

/// The smallest retention age, in seconds (the store's `MIN_AGE_MS`).
const MIN_AGE_SECS: u64 = (crate::store::MIN_AGE_MS / 1000) as u64;
impl Checker<'_> {
    pub(super) fn store(&mut self, config: &Config) {
        let limit = config.store.wal_limit_mb;
        if !(1..=MAX_WAL_LIMIT_MB).contains(&limit) {
            self.report(
                "store.wal_limit_mb",
                format!(
                    "is {limit}; write a size in MiB from 1 to {MAX_WAL_LIMIT_MB} (default \
                     {DEFAULT_WAL_LIMIT_MB}): \
                     the write-ahead log is emptied once it passes half of it"
                ),
            );
        }
    }

    pub(super) fn retention(&mut self, config: &Config) {
        for (key, value) in config.retention.keys() {
            let key = format!("retention.{key}");
            match parse_age(value) {
                Ok(Some(age)) if age.as_secs() < MIN_AGE_SECS => self.report(
                    key,
                    format!(
                        "`{value}` is less than a day; write \"keep\" or an age of at least \
                         \"1d\" (rows younger than a day are never pruned: a replayed event may \
                         still need them)"
                    ),
                ),
                Ok(_) => {}
                Err(why) => self.report(key, why),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::problems;

    #[test]
    fn defaults_and_good_values_pass() {
        assert!(problems("").is_empty());
        let good = "[store]\nwal_limit_mb = 8\n\n[retention]\ntranscripts = \"365d\"\n\
                    audit = \"2w\"\ndeliveries = \"30d\"\nchains = \"keep\"\npairing = \"1d\"\n\
                    history_idle = \"48h\"\n";
        assert_eq!(problems(good), Vec::<String>::new());
    }

    #[test]
    fn bad_values_are_reported_by_key_with_what_to_write() {
        let text = "[store]\nwal_limit_mb = 0\n\n[retention]\ntranscripts = \"90\"\n\
                    audit = \"forever\"\ndeliveries = \"12h\"\nhistory_idle = \"\"\n";
        let found = problems(text);
        let expect = [
            ("line 2: store.wal_limit_mb", "from 1 to"),
            ("line 5: retention.transcripts", "\"90d\""),
            ("line 6: retention.audit", "\"keep\""),
            ("line 7: retention.deliveries", "at least \"1d\""),
            ("line 8: retention.history_idle", "is empty"),
        ];
        assert_eq!(found.len(), expect.len(), "{found:#?}");
        for (at, says) in expect {
            assert!(
                found.iter().any(|p| p.starts_with(at) && p.contains(says)),
                "no `{at}` saying `{says}` in {found:#?}"
            );
        }
    }
}
