//! Several instances on one database (`[cluster]`): each socket account is connected by exactly
//! one instance at a time, the one holding its lease in the store (`store/leases.rs`).
//!
//! `renewal.rs` keeps this instance's leases: one round every third of `lease_seconds` renews
//! the leases it holds and tries to take those it wants, and publishes for each account until
//! when it may use the socket. `fence.rs` connects an account only while that holds, and drops
//! the socket, and refuses the events still arriving on it, once it lapses. On SQLite the one
//! instance wins every lease on its first round: the same path, nobody to race.
//!
//! Webhook accounts need no lease: any instance takes their webhooks, since dedupe, the inbox
//! and sessions are in the shared database.

mod fence;
mod renewal;

pub use fence::connect_while_held;
pub use renewal::{Holding, Leases};

use baton_contract::Receive;

use crate::roster::Account;
use crate::store::LeaseKey;

/// The lease of each of `accounts` that keeps a socket (the others take webhooks on any
/// instance and have none).
pub fn socket_leases<'a>(accounts: impl IntoIterator<Item = &'a Account>) -> Vec<LeaseKey> {
    accounts
        .into_iter()
        .filter(|account| account.adapter.receive() == Receive::Socket)
        .map(lease_key)
        .collect()
}

/// The lease key of `account`.
pub fn lease_key(account: &Account) -> LeaseKey {
    LeaseKey {
        platform: account.platform.as_str().to_owned(),
        account: account.id.to_string(),
    }
}

/// The longest default instance id; longer host names are cut.
const MAX_HOST: usize = 48;

/// The instance id when `cluster.instance_id` is unset: the host name and the process id
/// (`web-3-12345`), unique among live processes and readable in `baton cluster status`.
pub fn default_instance_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    let mut host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(MAX_HOST)
        .collect();
    if host.is_empty() {
        host.push_str("baton");
    }
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_id_is_the_host_and_the_pid_in_the_id_alphabet() {
        let id = default_instance_id();
        assert!(id.ends_with(&format!("-{}", std::process::id())), "{id}");
        assert!(id.len() <= 64, "{id}");
        assert!(
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')),
            "{id}"
        );
    }
}
