//! `[cluster]`: a lease long enough to renew in time (renewals go out every third of it), and an
//! instance id that reads well in `baton cluster status` and in logs.

use super::super::Config;
use super::Checker;

/// The shortest lease: renewals every second, with room for a slow database round trip.
const MIN_LEASE_SECONDS: u64 = 3;
/// The longest: beyond an hour an account would stay dark too long after its instance died.
const MAX_LEASE_SECONDS: u64 = 3600;
/// The longest instance id.
const MAX_INSTANCE_ID: usize = 64;

impl Checker<'_> {
    pub(super) fn cluster(&mut self, config: &Config) {
        let cluster = &config.cluster;
        let lease = cluster.lease_seconds;
        if !(MIN_LEASE_SECONDS..=MAX_LEASE_SECONDS).contains(&lease) {
            self.report(
                "cluster.lease_seconds",
                format!(
                    "is {lease}; write seconds from {MIN_LEASE_SECONDS} to {MAX_LEASE_SECONDS} \
                     (default 15): an account whose instance stops renewing moves to another \
                     after this long"
                ),
            );
        }
        if let Some(id) = &cluster.instance_id
            && !is_instance_id(id)
        {
            self.report(
                "cluster.instance_id",
                format!(
                    "must be 1 to {MAX_INSTANCE_ID} letters, digits, `-`, `_` or `.` (e.g. \
                     \"baton-a\"), one per instance; or remove the key to use the host name and \
                     process id"
                ),
            );
        }
    }
}

/// Whether `id` can name an instance.
fn is_instance_id(id: &str) -> bool {
    (1..=MAX_INSTANCE_ID).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::super::fixture::problems;

    #[test]
    fn defaults_and_good_values_pass() {
        assert!(problems("").is_empty());
        let good = "[cluster]\ninstance_id = \"baton-a.eu_1\"\nlease_seconds = 3\n";
        assert_eq!(problems(good), Vec::<String>::new());
    }

    #[test]
    fn a_bad_lease_or_instance_id_is_refused_with_the_fix() {
        for lease in [0, 2, 3601] {
            let found = problems(&format!("[cluster]\nlease_seconds = {lease}\n"));
            assert_eq!(found.len(), 1, "{found:?}");
            assert!(found[0].contains("cluster.lease_seconds"), "{found:?}");
            assert!(found[0].contains("from 3 to 3600"), "{found:?}");
        }
        for id in ["", "has space", "ünï", &"x".repeat(65)] {
            let found = problems(&format!("[cluster]\ninstance_id = \"{id}\"\n"));
            assert_eq!(found.len(), 1, "{id}: {found:?}");
            assert!(found[0].contains("cluster.instance_id"), "{found:?}");
            assert!(found[0].contains("\"baton-a\""), "{found:?}");
        }
    }
}
