//! `[retention]` in a running gateway: the configured ages turned into prune dates, applied at
//! start and every hour by the maintenance task (`Store::prune` says what each rule keeps).

use std::time::Duration;

use crate::config::{RetentionConfig, parse_age};
use crate::store::{PruneTable, Store};

/// Each table with an age, and the age (tables set to `"keep"` are left out).
#[derive(Debug, Clone, Default)]
pub(super) struct Retention {
    rules: Vec<(PruneTable, Duration)>,
}

/// A `[retention]` value that is not `"keep"` or an age (`baton check` reports it with its line).
#[derive(Debug, thiserror::Error)]
#[error("retention.{key}: {message}; run `baton check` for every problem with its line")]
pub struct RetentionError {
    key: &'static str,
    message: String,
}

impl Retention {
    pub(super) fn from_config(config: &RetentionConfig) -> Result<Self, RetentionError> {
        let tables = [
            (PruneTable::Transcripts, "transcripts", &config.transcripts),
            (PruneTable::Audit, "audit", &config.audit),
            (PruneTable::Deliveries, "deliveries", &config.deliveries),
            (PruneTable::Chains, "chains", &config.chains),
            (PruneTable::Pairing, "pairing", &config.pairing),
            (PruneTable::History, "history_idle", &config.history_idle),
            (PruneTable::Artifacts, "artifacts", &config.artifacts),
            (PruneTable::Escalations, "escalations", &config.escalations),
            (PruneTable::Sessions, "sessions", &config.sessions),
            (PruneTable::Usage, "usage", &config.usage),
        ];
        let mut rules = Vec::new();
        for (table, key, value) in tables {
            match parse_age(value) {
                Ok(Some(age)) => rules.push((table, age)),
                Ok(None) => {}
                Err(message) => return Err(RetentionError { key, message }),
            }
        }
        Ok(Retention { rules })
    }

    /// Prunes every table with an age; a failure is logged and the next table still runs.
    pub(super) async fn apply(&self, store: &Store, now_ms: i64) {
        for &(table, age) in &self.rules {
            let age_ms = i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
            match store
                .prune(table, now_ms.saturating_sub(age_ms), now_ms)
                .await
            {
                Ok(0) => {}
                Ok(rows) => tracing::info!(table = table.as_str(), rows, "retention: pruned"),
                Err(err) => tracing::warn!(table = table.as_str(), %err, "retention: prune failed"),
            }
        }
    }
}
