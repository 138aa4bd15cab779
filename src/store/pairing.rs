//! DM pairing (`dm_policy = "pairing"`): an unknown sender gets a one-time code, and an admin
//! running `baton pairing approve CODE` (or `/baton pairing approve CODE`) lets them in. An
//! approved sender stays in: the approved rows are the allow store.
//!
//! - Codes are 8 characters without look-alikes (no `0`/`O`, `1`/`I`), because people read them
//!   out and retype them.
//! - A code lasts [`CODE_TTL_MS`] (one hour). Asking again within the hour gives the same code,
//!   so the code a sender already passed on stays good; after it, the next DM gets a new one,
//!   and approving the old one fails saying it expired.
//! - Each bot account holds at most [`MAX_PENDING_PER_ACCOUNT`] live codes. Strangers beyond
//!   that get nothing until one is approved or expires, so a flood of DMs cannot bury the codes
//!   an admin is waiting for.

use rand::Rng;
use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

use super::{Store, StoreError};

/// Characters a code is made of: uppercase letters and digits, minus look-alikes.
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
/// Characters per code.
pub const CODE_LEN: usize = 8;
/// How long a code can be approved.
pub const CODE_TTL_MS: i64 = 60 * 60 * 1000;
/// Live codes one bot account may hold.
pub const MAX_PENDING_PER_ACCOUNT: i64 = 3;

/// Where a DM sender stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Pairing {
    /// Approved: let them in.
    Paired,
    /// Not approved yet; `code` is what an admin must approve.
    Pending {
        /// The sender's pairing code.
        code: String,
        /// Whether the code was created by this call.
        new: bool,
    },
    /// The account already holds its share of live codes: nothing is issued.
    Full,
}

/// What approving a code did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum PairingApproval {
    /// The sender is in (also when the code was approved before).
    Approved {
        /// Platform name.
        platform: String,
        /// Platform user id.
        user: String,
    },
    /// The code was not approved within its hour; the sender must ask for a new one.
    Expired {
        /// Platform name.
        platform: String,
        /// Platform user id.
        user: String,
    },
    /// No such code.
    Unknown,
}

/// A pairing, for `baton pairing list`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PairingRecord {
    /// Platform name.
    pub platform: String,
    /// Platform user id.
    pub user: String,
    /// The bot account the code was issued by (none for codes older than schema 5).
    pub account: Option<String>,
    /// The code they were given.
    pub code: String,
    /// Whether an admin approved it.
    pub approved: bool,
    /// When the code was created, milliseconds since the Unix epoch.
    pub created_ms: i64,
}

impl PairingRecord {
    /// `approved`, `pending` or `expired`, at `now_ms`.
    pub fn state(&self, now_ms: i64) -> &'static str {
        if self.approved {
            "approved"
        } else if expired(self.created_ms, now_ms) {
            "expired"
        } else {
            "pending"
        }
    }
}

fn expired(created_ms: i64, now_ms: i64) -> bool {
    now_ms - created_ms >= CODE_TTL_MS
}

fn new_code(conn: &Connection) -> rusqlite::Result<String> {
    let mut rng = rand::rng();
    loop {
        let code: String = (0..CODE_LEN)
            .map(|_| char::from(CODE_ALPHABET[rng.random_range(0..CODE_ALPHABET.len())]))
            .collect();
        let taken: bool = conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM pairing WHERE code = ?1)")?
            .query_row([&code], |r| r.get(0))?;
        if !taken {
            return Ok(code);
        }
    }
}

/// Live codes `account` holds on `platform`.
fn live_codes(
    conn: &Connection,
    platform: &str,
    account: &str,
    now_ms: i64,
) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "SELECT count(*) FROM pairing
         WHERE approved = 0 AND platform = ?1 AND account = ?2 AND created_ms > ?3",
    )?
    .query_row((platform, account, now_ms - CODE_TTL_MS), |r| r.get(0))
}

impl Store {
    /// Where `user` on `platform`, writing to `account`, stands: paired, or the code to give
    /// them (the live one, or a new one when they have none or it expired), or nothing when
    /// the account holds its share of live codes already.
    pub async fn pairing(
        &self,
        platform: &str,
        account: &str,
        user: &str,
        now_ms: i64,
    ) -> Result<Pairing, StoreError> {
        let (platform, account, user) = (platform.to_owned(), account.to_owned(), user.to_owned());
        self.sqlite_write(move |conn| {
            let existing: Option<(String, bool, i64)> = conn
                .prepare_cached(
                    "SELECT code, approved, created_ms FROM pairing
                     WHERE platform = ?1 AND user = ?2",
                )?
                .query_row((&platform, &user), |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()?;
            match existing {
                Some((_, true, _)) => return Ok(Pairing::Paired),
                Some((code, false, created)) if !expired(created, now_ms) => {
                    return Ok(Pairing::Pending { code, new: false });
                }
                _ => {}
            }
            if live_codes(conn, &platform, &account, now_ms)? >= MAX_PENDING_PER_ACCOUNT {
                return Ok(Pairing::Full);
            }
            let code = new_code(conn)?;
            conn.prepare_cached(
                "INSERT INTO pairing (platform, user, code, created_ms, account)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (platform, user) DO UPDATE SET
                    code = excluded.code, created_ms = excluded.created_ms,
                    account = excluded.account",
            )?
            .execute((&platform, &user, &code, now_ms, &account))?;
            Ok(Pairing::Pending { code, new: true })
        })
        .await
    }

    /// Approve a code. Case and surrounding spaces are ignored; approving an approved code
    /// again names its sender again; a code past its hour is not approved.
    pub async fn approve_pairing(
        &self,
        code: &str,
        now_ms: i64,
    ) -> Result<PairingApproval, StoreError> {
        let code = code.trim().to_ascii_uppercase();
        self.sqlite_write(move |conn| {
            let row: Option<(String, String, bool, i64)> = conn
                .prepare_cached(
                    "SELECT platform, user, approved, created_ms FROM pairing WHERE code = ?1",
                )?
                .query_row([&code], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .optional()?;
            let Some((platform, user, approved, created)) = row else {
                return Ok(PairingApproval::Unknown);
            };
            if !approved && expired(created, now_ms) {
                return Ok(PairingApproval::Expired { platform, user });
            }
            conn.prepare_cached(
                "UPDATE pairing SET approved = 1, approved_ms = coalesce(approved_ms, ?2)
                 WHERE code = ?1",
            )?
            .execute((&code, now_ms))?;
            Ok(PairingApproval::Approved { platform, user })
        })
        .await
    }

    /// Every pairing, pending ones first, then oldest first.
    pub async fn pairings(&self) -> Result<Vec<PairingRecord>, StoreError> {
        self.sqlite_read(|conn| {
            conn.prepare_cached(
                "SELECT platform, user, account, code, approved, created_ms FROM pairing
                 ORDER BY approved, created_ms, platform, user",
            )?
            .query_map([], |r| {
                Ok(PairingRecord {
                    platform: r.get(0)?,
                    user: r.get(1)?,
                    account: r.get(2)?,
                    code: r.get(3)?,
                    approved: r.get(4)?,
                    created_ms: r.get(5)?,
                })
            })?
            .collect()
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = CODE_TTL_MS;

    fn code_of(p: Pairing) -> (String, bool) {
        match p {
            Pairing::Pending { code, new } => (code, new),
            other => panic!("expected a code, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn code_flow_from_first_ask_to_approval() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let path = path.to_str().unwrap();
        let store = Store::open(path).await.unwrap();

        let (code, new) = code_of(store.pairing("slack", "snark", "U1", 10).await.unwrap());
        assert!(new, "first ask creates a code");
        assert_eq!(code.len(), 8);
        assert!(code.bytes().all(|b| CODE_ALPHABET.contains(&b)), "{code}");
        // Asking again within the hour: same code, not new.
        assert_eq!(
            store.pairing("slack", "snark", "U1", 20).await.unwrap(),
            Pairing::Pending {
                code: code.clone(),
                new: false
            }
        );
        let (other, _) = code_of(store.pairing("discord", "snark", "U1", 30).await.unwrap());
        assert_ne!(other, code, "another platform is another sender");

        assert_eq!(
            store.approve_pairing("NOPE4242", 40).await.unwrap(),
            PairingApproval::Unknown
        );
        let approved = PairingApproval::Approved {
            platform: "slack".to_owned(),
            user: "U1".to_owned(),
        };
        let messy = format!(" {} ", code.to_lowercase());
        assert_eq!(store.approve_pairing(&messy, 40).await.unwrap(), approved);
        store.close().await.unwrap();

        let store = Store::open(path).await.unwrap();
        assert_eq!(
            store.pairing("slack", "snark", "U1", 50).await.unwrap(),
            Pairing::Paired
        );
        // Approved stays approved, whatever the hour.
        assert_eq!(
            store.approve_pairing(&code, 10 * HOUR).await.unwrap(),
            approved
        );
        let list = store.pairings().await.unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(
            (list[0].platform.as_str(), list[0].state(40)),
            ("discord", "pending")
        );
        assert_eq!(list[0].state(30 + HOUR), "expired");
        assert_eq!(list[1].code, code);
        assert_eq!(list[1].account.as_deref(), Some("snark"));
        assert_eq!(list[1].state(50), "approved");
    }

    #[tokio::test]
    async fn an_expired_code_fails_clearly_and_the_next_dm_gets_a_new_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("e.db").to_str().unwrap())
            .await
            .unwrap();
        let (old, _) = code_of(store.pairing("slack", "snark", "U1", 0).await.unwrap());
        assert_eq!(
            store.approve_pairing(&old, HOUR).await.unwrap(),
            PairingApproval::Expired {
                platform: "slack".into(),
                user: "U1".into()
            }
        );
        let (fresh, new) = code_of(
            store
                .pairing("slack", "snark", "U1", HOUR + 1)
                .await
                .unwrap(),
        );
        assert!(new);
        assert_ne!(fresh, old);
        assert_eq!(
            store.approve_pairing(&old, HOUR + 2).await.unwrap(),
            PairingApproval::Unknown,
            "the old code is gone"
        );
        assert!(matches!(
            store.approve_pairing(&fresh, HOUR + 2).await.unwrap(),
            PairingApproval::Approved { .. }
        ));
    }

    #[tokio::test]
    async fn an_account_holds_at_most_three_live_codes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("f.db").to_str().unwrap())
            .await
            .unwrap();
        for user in ["U1", "U2", "U3"] {
            code_of(store.pairing("slack", "snark", user, 0).await.unwrap());
        }
        assert_eq!(
            store.pairing("slack", "snark", "U4", 1).await.unwrap(),
            Pairing::Full
        );
        // Another account has its own share; the first three still get their codes.
        code_of(store.pairing("slack", "caid", "U4", 1).await.unwrap());
        assert!(matches!(
            store.pairing("slack", "snark", "U1", 2).await.unwrap(),
            Pairing::Pending { new: false, .. }
        ));
        // Once the codes expire, there is room again.
        code_of(store.pairing("slack", "snark", "U5", HOUR).await.unwrap());
    }
}
