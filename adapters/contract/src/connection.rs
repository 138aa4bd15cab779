//! An account's connection as the gateway sees it: the state it is in ([`ConnectionCell`],
//! which the gateway watches), why it is not connected ([`Trouble`]) and how it receives its
//! events ([`Receive`]). Every adapter's run keeps it through the one skeleton in
//! `run_connection.rs`.

use tokio::sync::watch;

/// How an account's connection is doing, for `/readyz` and `/baton status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// Not started yet, or starting.
    Connecting,
    /// Connected and receiving events (or webhook mode, ready to receive).
    Connected,
    /// Lost the connection; reconnecting with backoff. `attempt` counts from 1.
    Retrying {
        /// How many reconnect attempts so far.
        attempt: u32,
    },
    /// Another instance sharing the database holds this account's lease and connects it; this
    /// one takes over if that one stops renewing.
    Standby,
    /// Stopped for good (shutdown, or a fatal error such as a revoked token).
    Stopped,
}

impl ConnectionState {
    /// The state's name: `connecting`, `connected`, `retrying`, `stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionState::Connecting => "connecting",
            ConnectionState::Connected => "connected",
            ConnectionState::Retrying { .. } => "retrying",
            ConnectionState::Standby => "standby",
            ConnectionState::Stopped => "stopped",
        }
    }

    /// Reconnect attempts so far, while retrying.
    pub fn attempt(self) -> Option<u32> {
        match self {
            ConnectionState::Retrying { attempt } => Some(attempt),
            _ => None,
        }
    }

    /// Ready means the account can receive: connected, on its way back with backoff after a
    /// few attempts at most, or connected by another instance (standby). An account still
    /// failing after [`Self::READY_RETRIES`] attempts is not ready: it is not coming back by
    /// itself.
    pub fn is_ready(self) -> bool {
        match self {
            ConnectionState::Connected | ConnectionState::Standby => true,
            ConnectionState::Retrying { attempt } => attempt <= Self::READY_RETRIES,
            ConnectionState::Connecting | ConnectionState::Stopped => false,
        }
    }

    /// Reconnect attempts an account may make and still count as ready (a blip, a platform's
    /// restart); with the contract's backoff that is about the first 7 seconds.
    pub const READY_RETRIES: u32 = 3;
}

/// Why an account is not connected, as far as the platform said: what `/readyz`, the dashboard
/// and `/baton status` show beside its state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trouble {
    /// The platform refused the credentials (a wrong, revoked or expired token or secret).
    InvalidToken,
    /// The credentials work but lack a scope or intent the account needs.
    MissingScope,
    /// The platform did not answer, or the connection failed on the way.
    Unreachable,
}

impl Trouble {
    /// How it is shown: `invalid token`, `missing scope`, `unreachable`.
    pub fn as_str(self) -> &'static str {
        match self {
            Trouble::InvalidToken => "invalid token",
            Trouble::MissingScope => "missing scope",
            Trouble::Unreachable => "unreachable",
        }
    }
}

impl std::fmt::Display for Trouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// An account's connection state, set by its adapter (through [`run_connection`], and from
/// inside its sessions: Slack's `hello`, Discord's READY) and watched by the gateway: `/readyz`
/// reads it, and each change is announced on the gateway's event stream as it happens (a watch
/// channel, so nobody polls).
#[derive(Debug)]
pub struct ConnectionCell {
    state: watch::Sender<ConnectionState>,
    /// Why the last attempt failed, until the account connects again.
    trouble: std::sync::Mutex<Option<Trouble>>,
}

impl Default for ConnectionCell {
    /// [`ConnectionState::Connecting`].
    fn default() -> Self {
        Self::new(ConnectionState::Connecting)
    }
}

impl ConnectionCell {
    /// A cell holding `state`.
    pub fn new(state: ConnectionState) -> Self {
        Self {
            state: watch::channel(state).0,
            trouble: std::sync::Mutex::new(None),
        }
    }

    /// Move to `state`; watchers are woken when it differs from the last one. Connected (here
    /// or by another instance) clears the trouble.
    pub fn set(&self, state: ConnectionState) {
        if matches!(state, ConnectionState::Connected | ConnectionState::Standby) {
            *self.trouble_slot() = None;
        }
        self.state.send_if_modified(|now| {
            let changed = *now != state;
            *now = state;
            changed
        });
    }

    /// The state now.
    pub fn get(&self) -> ConnectionState {
        *self.state.borrow()
    }

    /// A receiver woken on every change.
    pub fn watch(&self) -> watch::Receiver<ConnectionState> {
        self.state.subscribe()
    }

    /// Say why the last attempt to connect failed.
    pub fn set_trouble(&self, trouble: Trouble) {
        *self.trouble_slot() = Some(trouble);
    }

    /// Why the account is not connected, when the last attempt said.
    pub fn trouble(&self) -> Option<Trouble> {
        *self.trouble_slot()
    }

    fn trouble_slot(&self) -> std::sync::MutexGuard<'_, Option<Trouble>> {
        // A panic while holding it cannot leave the value half-written: it is one word.
        self.trouble.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How an account receives its events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receive {
    /// The adapter dials out and keeps a socket up (`Link::session`).
    Socket,
    /// The platform posts to `/hooks/...`: nothing to dial; ready until shutdown.
    Webhooks,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cell_wakes_watchers_only_on_a_change() {
        let cell = ConnectionCell::default();
        let mut changes = cell.watch();
        cell.set(ConnectionState::Connecting);
        assert!(!changes.has_changed().unwrap(), "same state, nobody woken");
        cell.set(ConnectionState::Retrying { attempt: 1 });
        assert!(changes.has_changed().unwrap());
        assert_eq!(
            *changes.borrow_and_update(),
            ConnectionState::Retrying { attempt: 1 }
        );
        assert_eq!(cell.get().attempt(), Some(1));
    }
}
