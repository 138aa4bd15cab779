//! Pipeline step 5: the chat's group or DM policy decides (`policy.rs`, pure); here a refusal
//! owes its notice, and a DM sender the policy wants paired gets a pairing code.

use super::policy::{self, PolicyDecision};
use super::stop::{Notice, Step, Stop};
use super::{Dispatcher, DropReason, Inbound, admin_step};
use crate::store::Pairing;
use crate::timing::now_ms;

impl Dispatcher {
    /// Step 5's verdict, before it acts on it (a refusal's notice, a pairing code).
    pub(super) fn policy_decision(&self, inbound: &Inbound<'_>) -> PolicyDecision {
        let config = self.engine.config();
        let is_admin = admin_step::is_admin(&config.admins, &inbound.event);
        policy::decide(
            &inbound.event,
            &inbound.policy,
            &config.chats_default,
            is_admin,
        )
    }

    /// Step 5.
    pub(super) async fn policy(&self, inbound: &Inbound<'_>) -> Step<()> {
        let engine = &self.engine;
        let event = &inbound.event;
        match self.policy_decision(inbound) {
            PolicyDecision::Allow => Ok(()),
            PolicyDecision::Refuse(refusal) => {
                tracing::info!(sender = %event.sender.id, chat = %event.chat, reason = refusal.as_str(), "policy refused the sender");
                let stop = Stop::dropped(DropReason::Policy(refusal));
                if event.chat_kind == baton_contract::ChatKind::Dm {
                    let notice = Notice::OncePerSender(refusal.notice().to_owned());
                    return Err(stop.with_notice(notice));
                }
                Err(stop)
            }
            PolicyDecision::NeedsPairing => {
                let pairing = engine
                    .store()
                    .pairing(
                        event.platform.as_str(),
                        inbound.account.id.as_str(),
                        event.sender.id.as_str(),
                        now_ms(),
                    )
                    .await;
                let pending = Stop::dropped(DropReason::PairingPending);
                match pairing {
                    Ok(Pairing::Paired) => Ok(()),
                    Ok(Pairing::Pending { code, .. }) => {
                        let text = format!(
                            "Hi! I need an admin's approval before we can talk. Ask an admin to run \
                             `/baton pairing approve {code}` (or `baton pairing approve {code}`). \
                             The code is good for one hour."
                        );
                        tracing::info!(sender = %event.sender.id, "DM sender waiting for pairing");
                        Err(pending.with_notice(Notice::OncePerSender(text)))
                    }
                    Ok(Pairing::Full) => {
                        tracing::warn!(
                            sender = %event.sender.id, account = %inbound.account.id,
                            "DM sender not given a pairing code: the account holds its three \
                             live codes; approve or let them expire"
                        );
                        Err(pending)
                    }
                    Err(err) => {
                        tracing::error!(%err, "pairing store failed; refusing the DM");
                        Err(pending)
                    }
                }
            }
        }
    }
}
