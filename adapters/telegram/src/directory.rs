//! The baton bots on Telegram: each account adds its `@username` and user id once `getMe` has
//! answered. Telegram ids are global (unlike Feishu's per-app ids), so this only maps a
//! `@username` in a text to the bot it names: a `mention` entity carries the name, not the id.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// `@username` (lowercase, without `@`) to user id, for every baton bot on Telegram. Clones
/// share one table: give every Telegram account the same one.
#[derive(Debug, Clone, Default)]
pub struct Directory(Arc<RwLock<HashMap<String, i64>>>);

impl Directory {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn add(&self, username: &str, id: i64) {
        let mut table = self.0.write().expect("directory lock poisoned");
        table.insert(username.to_lowercase(), id);
    }

    /// The user id of the baton bot `@username` (any case, with or without the `@`).
    pub fn id_of(&self, username: &str) -> Option<i64> {
        let name = username.trim_start_matches('@').to_lowercase();
        let table = self.0.read().expect("directory lock poisoned");
        table.get(&name).copied()
    }
}
