//! `[artifacts]`: a size cap that is a size. SQLite holds a value of up to 1 GB; a cap above it
//! would promise what the store cannot keep.

use super::super::Config;
use super::Checker;

/// The largest `max_bytes` accepted: SQLite's default length limit for one value (1e9 bytes).
const MAX_ARTIFACT_BYTES: u64 = 1_000_000_000;

impl Checker<'_> {
    pub(super) fn artifacts(&mut self, config: &Config) {
        let max = config.artifacts.max_bytes;
        if !(1..=MAX_ARTIFACT_BYTES).contains(&max) {
            self.report(
                "artifacts.max_bytes",
                format!(
                    "is {max}; write a size in bytes from 1 to {MAX_ARTIFACT_BYTES} (default \
                     26214400, 25 MiB)"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixture::problems;

    #[test]
    fn a_cap_outside_what_the_store_keeps_is_reported() {
        assert!(problems("[artifacts]\nmax_bytes = 1048576\n").is_empty());
        let found = problems("[artifacts]\nmax_bytes = 0\n");
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].starts_with("line 2: artifacts.max_bytes"),
            "{found:#?}"
        );
        assert!(found[0].contains("from 1 to"), "{found:#?}");
    }
}
