//! Pipeline step 5: may this sender talk to bots in this chat at all?
//!
//! Groups follow `group_policy` (fail closed: `allowlist` by default, so a bot added to a random
//! channel stays quiet until the chat is listed). Direct messages follow `dm_policy`; under
//! `pairing` an unknown sender gets a one-time code an admin approves. Admins and `dm_allow`
//! users are always let into DMs. Local DMs (terminal chat, `/v1/chat/completions`) are already
//! gated by the HTTP API token or the loopback rule, so they are allowed here.
//!
//! [`decide`] is the rule, pure; [`check`] is the step: a refusal owes its notice, and a DM
//! sender the policy wants paired gets a pairing code.

use baton_contract::{ChatKind, InboundEvent, Platform};

use super::stop::{DropReason, Mode, Notice, Refusal, Step, Stop};
use super::{Inbound, admin_step};
use crate::config::{ChatsDefault, Config, DmPolicy, GroupPolicy};
use crate::roster::ChatPolicy;
use crate::store::{Pairing, Store};
use crate::timing::now_ms;

/// The policy verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PolicyDecision {
    /// Go on.
    Allow,
    /// Stop; DMs get a (rate-limited) notice.
    Refuse(Refusal),
    /// `dm_policy = "pairing"` and the sender is not known yet: check the pairing store.
    NeedsPairing,
}

/// Decide for `event` in a chat with `chat` policy.
pub(crate) fn decide(
    event: &InboundEvent,
    chat: &ChatPolicy,
    defaults: &ChatsDefault,
    is_admin: bool,
) -> PolicyDecision {
    match event.chat_kind {
        ChatKind::Group => match defaults.group_policy {
            GroupPolicy::Open => PolicyDecision::Allow,
            GroupPolicy::Allowlist if chat.listed => PolicyDecision::Allow,
            GroupPolicy::Allowlist => PolicyDecision::Refuse(Refusal::GroupNotListed),
            GroupPolicy::Disabled => PolicyDecision::Refuse(Refusal::GroupsDisabled),
        },
        ChatKind::Dm => {
            let allowed = is_admin
                || event.platform == Platform::Local
                || defaults
                    .dm_allow
                    .iter()
                    .any(|u| u == event.sender.id.as_str());
            match defaults.dm_policy {
                _ if allowed => PolicyDecision::Allow,
                DmPolicy::Open => PolicyDecision::Allow,
                DmPolicy::Allowlist => PolicyDecision::Refuse(Refusal::DmNotAllowed),
                DmPolicy::Disabled => PolicyDecision::Refuse(Refusal::DmsDisabled),
                DmPolicy::Pairing => PolicyDecision::NeedsPairing,
            }
        }
    }
}

/// Step 5's verdict for `inbound` under `config`, before it acts on it (a refusal's notice, a
/// pairing code).
fn decision(config: &Config, inbound: &Inbound<'_>) -> PolicyDecision {
    let is_admin = admin_step::is_admin(&config.admins, &inbound.event);
    decide(
        &inbound.event,
        &inbound.policy,
        &config.chats_default,
        is_admin,
    )
}

/// Step 5: a refusal owes its notice, and a DM sender the policy wants paired gets a pairing
/// code (from `store`). Asked, a sender to pair stops without a code.
pub(super) async fn check(
    config: &Config,
    store: &Store,
    inbound: &Inbound<'_>,
    mode: Mode,
) -> Step<()> {
    let event = &inbound.event;
    match decision(config, inbound) {
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
        PolicyDecision::NeedsPairing if mode == Mode::Ask => {
            Err(Stop::dropped(DropReason::PairingPending))
        }
        PolicyDecision::NeedsPairing => {
            let pairing = store
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use baton_contract::Sender;

    use super::*;
    use crate::config::Activation;

    fn chat(listed: bool) -> ChatPolicy {
        ChatPolicy {
            listed,
            activation: Activation::Mention,
            allow_bots: Arc::new(globset::GlobSet::empty()),
            history_limit: 10,
            ignore_other_mentions: true,
            mentions: crate::config::MentionMode::Leading,
            respond_to_at_all: false,
            personas: Arc::default(),
        }
    }

    fn event(platform: Platform, kind: ChatKind, sender: &str) -> InboundEvent {
        let sender = Sender {
            id: sender.into(),
            name: String::new(),
            is_bot: false,
            is_self: false,
        };
        InboundEvent::text_message(
            platform,
            "a".into(),
            "c".into(),
            kind,
            sender,
            "m".into(),
            "",
        )
    }

    #[test]
    fn groups_fail_closed_unless_listed_or_open() {
        let mut d = ChatsDefault::default();
        let e = event(Platform::Slack, ChatKind::Group, "U1");
        assert_eq!(
            decide(&e, &chat(false), &d, false),
            PolicyDecision::Refuse(Refusal::GroupNotListed)
        );
        assert_eq!(decide(&e, &chat(true), &d, false), PolicyDecision::Allow);
        d.group_policy = GroupPolicy::Open;
        assert_eq!(decide(&e, &chat(false), &d, false), PolicyDecision::Allow);
        d.group_policy = GroupPolicy::Disabled;
        assert_eq!(
            decide(&e, &chat(true), &d, false),
            PolicyDecision::Refuse(Refusal::GroupsDisabled)
        );
    }

    #[test]
    fn dms_by_policy_with_admins_allow_list_and_local_let_in() {
        let mut d = ChatsDefault::default();
        let e = event(Platform::Slack, ChatKind::Dm, "U1");
        assert_eq!(
            decide(&e, &chat(false), &d, false),
            PolicyDecision::NeedsPairing
        );
        assert_eq!(decide(&e, &chat(false), &d, true), PolicyDecision::Allow);
        d.dm_policy = DmPolicy::Allowlist;
        assert_eq!(
            decide(&e, &chat(false), &d, false),
            PolicyDecision::Refuse(Refusal::DmNotAllowed)
        );
        d.dm_allow = vec!["U1".into()];
        assert_eq!(decide(&e, &chat(false), &d, false), PolicyDecision::Allow);
        d.dm_policy = DmPolicy::Disabled;
        d.dm_allow.clear();
        let local = event(Platform::Local, ChatKind::Dm, "alice");
        assert_eq!(
            decide(&local, &chat(false), &d, false),
            PolicyDecision::Allow
        );
        assert_eq!(
            decide(&e, &chat(false), &d, false),
            PolicyDecision::Refuse(Refusal::DmsDisabled)
        );
    }
}
