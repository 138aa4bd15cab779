//! `[retention]`: how long each table's rows are kept.

use serde::Deserialize;

/// `[retention]`: per table, `"keep"` or an age such as `"90d"`; `baton run` deletes older
/// rows at start and every hour (never what a live flow needs).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct RetentionConfig {
    /// Transcript entries.
    pub transcripts: String,
    /// Admin command audit rows.
    pub audit: String,
    /// Finished bot-to-bot deliveries.
    pub deliveries: String,
    /// Closed chains and their messages.
    pub chains: String,
    /// Pairing requests never approved.
    pub pairing: String,
    /// A chat's history buffer and cursors go once the chat has been quiet this long.
    pub history_idle: String,
    /// Artifacts, by when they were made.
    pub artifacts: String,
    /// Settled escalations (answered, approved, denied, failed), by when they settled.
    pub escalations: String,
    /// Sessions idle this long, with their transcripts (never one something waits on).
    pub sessions: String,
    /// What each model call spent (`/api/usage`, budgets), by when the call was made. Keep it
    /// at least as long as the longest budget window.
    pub usage: String,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self {
            transcripts: "keep".into(),
            audit: "keep".into(),
            deliveries: "keep".into(),
            chains: "keep".into(),
            pairing: "keep".into(),
            history_idle: "7d".into(),
            artifacts: "keep".into(),
            escalations: "keep".into(),
            sessions: "keep".into(),
            usage: "keep".into(),
        }
    }
}

impl RetentionConfig {
    /// Every key with its value, for validation and for building the prune plan.
    pub fn keys(&self) -> [(&'static str, &str); 10] {
        [
            ("transcripts", &self.transcripts),
            ("audit", &self.audit),
            ("deliveries", &self.deliveries),
            ("chains", &self.chains),
            ("pairing", &self.pairing),
            ("history_idle", &self.history_idle),
            ("artifacts", &self.artifacts),
            ("escalations", &self.escalations),
            ("sessions", &self.sessions),
            ("usage", &self.usage),
        ]
    }
}
