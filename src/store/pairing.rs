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
use serde::Serialize;

use super::sql::{Db, DbError, OptionalRow, args};
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

fn new_code(db: Db<'_>) -> Result<String, DbError> {
    let mut rng = rand::rng();
    loop {
        let code: String = (0..CODE_LEN)
            .map(|_| char::from(CODE_ALPHABET[rng.random_range(0..CODE_ALPHABET.len())]))
            .collect();
        let taken: bool = db.query_row(
            "SELECT EXISTS (SELECT 1 FROM pairing WHERE code = ?1)",
            args![&code],
            |r| r.get(0),
        )?;
        if !taken {
            return Ok(code);
        }
    }
}

/// Live codes `account` holds on `platform`.
fn live_codes(db: Db<'_>, platform: &str, account: &str, now_ms: i64) -> Result<i64, DbError> {
    db.query_row(
        "SELECT count(*) FROM pairing
         WHERE approved = 0 AND platform = ?1 AND account = ?2 AND created_ms > ?3",
        args![platform, account, now_ms - CODE_TTL_MS],
        |r| r.get(0),
    )
}

/// Where `user` stands now, if a row says: paired, or pending with a live code.
fn standing(
    db: Db<'_>,
    platform: &str,
    user: &str,
    now_ms: i64,
) -> Result<Option<Pairing>, DbError> {
    let existing: Option<(String, bool, i64)> = db
        .query_row(
            "SELECT code, approved, created_ms FROM pairing WHERE platform = ?1 AND \"user\" = ?2",
            args![platform, user],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    Ok(match existing {
        Some((_, true, _)) => Some(Pairing::Paired),
        Some((code, false, created)) if !expired(created, now_ms) => {
            Some(Pairing::Pending { code, new: false })
        }
        _ => None,
    })
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
        self.write(move |db| {
            if let Some(known) = standing(db, &platform, &user, now_ms)? {
                return Ok(known);
            }
            // Another instance sharing the database may be issuing a code for this account:
            // the count against the cap and the issue are one step there too.
            db.exclusive(&format!("pairing:{platform}:{account}"))?;
            if live_codes(db, &platform, &account, now_ms)? >= MAX_PENDING_PER_ACCOUNT {
                return Ok(Pairing::Full);
            }
            let code = new_code(db)?;
            // Only a missing row, or one with an expired unapproved code, takes the new code:
            // another instance sharing the database may have issued one (or an admin approved
            // it) since `standing` looked, and that one stands.
            let issued = db
                .query_row(
                    "INSERT INTO pairing (platform, \"user\", code, created_ms, account)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (platform, \"user\") DO UPDATE SET
                        code = excluded.code, created_ms = excluded.created_ms,
                        account = excluded.account
                     WHERE pairing.approved = 0 AND pairing.created_ms <= ?6
                     RETURNING code",
                    args![
                        &platform,
                        &user,
                        &code,
                        now_ms,
                        &account,
                        now_ms - CODE_TTL_MS
                    ],
                    |r| r.get::<String>(0),
                )
                .optional()?;
            match issued {
                Some(code) => Ok(Pairing::Pending { code, new: true }),
                None => Ok(standing(db, &platform, &user, now_ms)?.unwrap_or(Pairing::Full)),
            }
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
        self.write(move |db| {
            // One conditional statement: a code replaced or expired meanwhile is not approved.
            let approved: Option<(String, String)> = db
                .query_row(
                    "UPDATE pairing SET approved = 1, approved_ms = coalesce(approved_ms, ?2)
                     WHERE code = ?1 AND (approved = 1 OR created_ms > ?3)
                     RETURNING platform, \"user\"",
                    args![&code, now_ms, now_ms - CODE_TTL_MS],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            if let Some((platform, user)) = approved {
                return Ok(PairingApproval::Approved { platform, user });
            }
            let stale: Option<(String, String)> = db
                .query_row(
                    "SELECT platform, \"user\" FROM pairing WHERE code = ?1",
                    args![&code],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            Ok(match stale {
                Some((platform, user)) => PairingApproval::Expired { platform, user },
                None => PairingApproval::Unknown,
            })
        })
        .await
    }

    /// Every pairing, pending ones first, then oldest first.
    pub async fn pairings(&self) -> Result<Vec<PairingRecord>, StoreError> {
        self.read(|db| {
            db.query_map(
                "SELECT platform, \"user\", account, code, approved, created_ms FROM pairing
                 ORDER BY approved, created_ms, platform, \"user\"",
                &[],
                |r| {
                    Ok(PairingRecord {
                        platform: r.get(0)?,
                        user: r.get(1)?,
                        account: r.get(2)?,
                        code: r.get(3)?,
                        approved: r.get(4)?,
                        created_ms: r.get(5)?,
                    })
                },
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;

    const HOUR: i64 = CODE_TTL_MS;

    fn code_of(p: Pairing) -> (String, bool) {
        match p {
            Pairing::Pending { code, new } => (code, new),
            other => panic!("expected a code, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn code_flow_from_first_ask_to_approval() {
        for db in testing::engines().await {
            code_flow_from_first_ask_to_approval_on(&db).await;
        }
    }

    async fn code_flow_from_first_ask_to_approval_on(db: &testing::TestDb) {
        let store = db.open().await;

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

        let store = db.open().await;
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
        for db in testing::engines().await {
            an_expired_code_fails_clearly_on(db.open().await).await;
        }
    }

    async fn an_expired_code_fails_clearly_on(store: Store) {
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
        for db in testing::engines().await {
            an_account_holds_at_most_three_live_codes_on(db.open().await).await;
        }
    }

    async fn an_account_holds_at_most_three_live_codes_on(store: Store) {
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
