//! A bot's backends: its own, and each other kind a `[[chats]]` entry gives it there
//! (`backend = "command"`), built at start from the bot's own settings for that kind, so a
//! turn only picks one.

use std::sync::Arc;

use crate::backend::Backend;
use crate::config::BackendKind;

/// Every backend one bot runs, by kind; its own first.
pub struct Backends {
    built: Vec<(BackendKind, Arc<dyn Backend>)>,
}

impl Backends {
    /// A bot running `kind` everywhere, on `backend`.
    pub fn new(kind: BackendKind, backend: Arc<dyn Backend>) -> Self {
        Self {
            built: vec![(kind, backend)],
        }
    }

    /// With `backend` for the chats that give the bot `kind`.
    pub fn with(mut self, kind: BackendKind, backend: Arc<dyn Backend>) -> Self {
        self.built.push((kind, backend));
        self
    }

    /// The bot's own kind.
    pub fn own(&self) -> BackendKind {
        self.built[0].0
    }

    /// The backend of `kind` (unset: the bot's own), or `None` when none of it was built:
    /// a kind no `[[chats]]` entry gives this bot.
    pub fn pick(&self, kind: Option<BackendKind>) -> Option<(BackendKind, &Arc<dyn Backend>)> {
        let kind = kind.unwrap_or_else(|| self.own());
        self.built
            .iter()
            .find(|(built, _)| *built == kind)
            .map(|(kind, backend)| (*kind, backend))
    }
}
