//! Pipeline step 4: admin commands are recognised here and answered without a model turn.
//!
//! A text command in a group reaches every bot account in that chat; it is claimed once per chat
//! (durably, like dedupe) so exactly one bot answers. Only ids in `[admins]` may run commands;
//! a human who is not an admin gets a short refusal, and a bot is never answered (so a bot cannot
//! start a command loop). Every call, allowed or not, is written to the audit table, except a
//! non-admin's past the inbound rate limit (step 8, applied here too): a flood of commands gets
//! one "slow down" and then silence, not a refusal and an audit row each.
//!
//! One exception to "admins only": `/baton chain stop` in a chat where a chain is posting, said
//! by any human, anywhere in a message. It is the brake on bots talking, and pulling it is safe.

use baton_contract::{InboundEvent, InboundKind};

use super::stop::{DropReason, Handled, Mode, Step, Stop};
use super::{Inbound, gateway_line};
use crate::admin::{self, Admin, AdminCommand, Invocation, asks_chain_stop, text_command};
use crate::config::AdminsConfig;
use crate::engine::Engine;
use crate::guards::Guards;
use crate::store::{Claim, NewAudit, dedupe_key};
use crate::timing::now_ms;

/// Whether the sender is a configured admin (bots never are).
pub(crate) fn is_admin(admins: &AdminsConfig, event: &InboundEvent) -> bool {
    !event.sender.is_bot
        && admins
            .for_platform(event.platform)
            .iter()
            .any(|id| id == event.sender.id.as_str())
}

/// Step 4: answer the event if it is an admin command, which ends its way down the pipeline;
/// `Ok` lets any other event go on. Asked, a command stops unanswered.
pub(crate) async fn intercept(
    admin: &Admin,
    guards: &Guards,
    inbound: &Inbound<'_>,
    mode: Mode,
) -> Step<()> {
    let Some(line) = command_line(&inbound.event) else {
        return Ok(());
    };
    if mode == Mode::Ask {
        return Err(Stop::handled(Handled::Admin(line.to_owned())));
    }
    // Boxed: every event passes through here, few are commands, and the commands' state
    // (admin actions, chains, the answer's delivery) would otherwise sit in every event's future.
    Err(Box::pin(run_command(admin, guards, inbound, line)).await)
}

/// The command `event` asks for, if it is one: a slash command, a `/baton` line, or a human's
/// `/baton chain stop` anywhere in a message.
pub(crate) fn command_line(event: &InboundEvent) -> Option<&str> {
    match &event.kind {
        InboundKind::Command { .. } => Some(event.text.trim()),
        InboundKind::Message => match text_command(&event.text) {
            Some(line) => Some(line),
            // The brake: a human asking anywhere in a message to stop the chains here.
            None if !event.sender.is_bot && asks_chain_stop(&event.text) => Some("chain stop"),
            None => None,
        },
    }
}

/// Run the admin command `line` (or refuse it) and answer it.
async fn run_command(admin: &Admin, guards: &Guards, inbound: &Inbound<'_>, line: &str) -> Stop {
    let engine = admin.engine();
    let event = &inbound.event;
    if !claim_once_per_chat(engine, inbound).await {
        return Stop::dropped(DropReason::AdminHandledElsewhere);
    }
    let mut then = None;
    let invocation = Invocation {
        event,
        account: inbound.account,
        speaker_name: &inbound.speaker.name,
        settings_key: &inbound.settings_key,
        activation: inbound.policy.activation,
        bot_chain: guards.bot_messages.chain_length(&inbound.chat_key),
    };
    let (outcome, reply) = if event.sender.is_bot {
        ("refused: bots may not run admin commands".to_owned(), None)
    } else {
        let parsed = AdminCommand::parse(line);
        let allowed = is_admin(&engine.config().admins, event)
            || match &parsed {
                Ok(command) => admin::may_stop(engine, &invocation, command).await,
                Err(_) => false,
            };
        if !allowed && let Err(limited) = super::guard_steps::rate_limit(guards, inbound) {
            // Over the sender's budget: no public refusal and no audit row each time.
            return limited;
        }
        match parsed {
            _ if !allowed => {
                let text = "Only baton admins can run /baton commands.".to_owned();
                ("refused: not an admin".to_owned(), Some(text))
            }
            Ok(command) => match admin::execute(admin, &invocation, &command).await {
                Ok(answer) => {
                    then = answer.then;
                    ("ok".to_owned(), Some(answer.text))
                }
                Err(err) => (format!("error: {err}"), Some(err.to_string())),
            },
            Err(err) => (format!("error: {err}"), Some(err.to_string())),
        }
    };
    audit(engine, inbound, line, &outcome).await;
    if let Some(text) = &reply {
        gateway_line::notice(engine, inbound, text).await;
    }
    if let Some(then) = then {
        admin::after(admin.chains(), then).await;
    }
    Stop::handled(Handled::Admin(reply.unwrap_or(outcome)))
}

/// True for the first account to see this command in this chat.
async fn claim_once_per_chat(engine: &Engine, inbound: &Inbound<'_>) -> bool {
    let event = &inbound.event;
    if matches!(event.kind, InboundKind::Command { .. }) {
        return true;
    }
    let scope = format!("admin:{}", inbound.chat_key);
    !matches!(
        engine
            .store()
            .claim(&scope, &dedupe_key(event), now_ms())
            .await,
        Ok(Claim::Duplicate)
    )
}

async fn audit(engine: &Engine, inbound: &Inbound<'_>, line: &str, outcome: &str) {
    let event = &inbound.event;
    let record = NewAudit {
        ts_ms: now_ms(),
        platform: event.platform.to_string(),
        chat: event.chat.to_string(),
        user: crate::display_name::sanitize(event.sender.id.as_str()).into_owned(),
        command: format!("/baton {line}").trim_end().to_owned(),
        outcome: outcome.to_owned(),
    };
    if let Err(err) = engine.store().audit(record).await {
        tracing::error!(%err, "could not write the audit record");
    }
}

#[cfg(test)]
mod tests {
    use baton_contract::{CommandReply, Platform};

    use super::super::testing::{inbound, to_bot};
    use super::*;
    use crate::gateway::testing::{Parts, echo_config, parts, room_texts};

    /// Bots `alpha` and `beta`; `root` is the local admin; a sender gets one message a minute.
    async fn gateway() -> Parts {
        let extra =
            "\n[admins]\nlocal = [\"root\"]\n\n[limits]\ninbound_per_sender_per_minute = 1\n";
        parts(&echo_config(&["alpha", "beta"], extra)).await
    }

    /// Step 4, acting, for message `n` saying `text` from `from` to bot `to` in `room`.
    async fn command(gw: &Parts, to: &str, n: u32, from: &str, text: &str) -> Stop {
        let d = &gw.dispatcher;
        let inbound = inbound(d, to_bot(to, n, "room", from, text));
        intercept(&d.admin, &d.own.guards, &inbound, Mode::Act)
            .await
            .expect_err("a command ends the event")
    }

    /// The audit rows' outcomes, oldest first.
    async fn audited(gw: &Parts) -> Vec<String> {
        let mut rows = gw.engine.store().audit_log(10).await.unwrap();
        rows.sort_by_key(|r| r.id);
        rows.into_iter().map(|r| r.outcome).collect()
    }

    /// An admin is a human listed for the event's platform: never a bot, even one listed,
    /// never someone listed for another platform.
    #[tokio::test]
    async fn only_a_human_listed_for_the_platform_is_an_admin() {
        let gw = gateway().await;
        let admins = &gw.engine.config().admins;
        let root = to_bot("alpha", 1, "room", "root", "hi");
        assert!(is_admin(admins, &root));
        assert!(!is_admin(admins, &to_bot("alpha", 1, "room", "ann", "hi")));
        let mut as_bot = root.clone();
        as_bot.sender.is_bot = true;
        assert!(!is_admin(admins, &as_bot), "a bot never is");
        let mut elsewhere = root;
        elsewhere.platform = Platform::Slack;
        assert!(!is_admin(admins, &elsewhere), "listed for local only");
    }

    /// A command is a native slash command, a `/baton` line (after leading mentions), or a
    /// human's `/baton chain stop` anywhere in a message; a bot's aside is no brake.
    #[test]
    fn a_command_is_a_slash_command_a_baton_line_or_a_humans_brake() {
        let said = |from, text| to_bot("alpha", 1, "room", from, text);
        assert_eq!(
            command_line(&said("ann", "@alpha /baton status")),
            Some("status")
        );
        assert_eq!(command_line(&said("ann", "hello /baton")), None);
        let brake = "ok, /baton chain stop now";
        assert_eq!(command_line(&said("ann", brake)), Some("chain stop"));
        assert_eq!(command_line(&said("beta", brake)), None, "a bot's");
        let mut native = said("ann", " pause alpha ");
        native.kind = InboundKind::Command {
            reply: CommandReply { token: "t".into() },
        };
        assert_eq!(command_line(&native), Some("pause alpha"));
    }

    /// A text command in a group reaches every bot's account: the first answers it, the
    /// others drop their copies; it is answered and audited once.
    #[tokio::test]
    async fn a_text_command_in_a_group_is_answered_by_one_account() {
        let gw = gateway().await;
        let first = command(&gw, "alpha", 1, "root", "/baton activation always").await;
        assert!(matches!(first.handled, Handled::Admin(_)), "{first:?}");
        let copy = command(&gw, "beta", 1, "root", "/baton activation always").await;
        assert_eq!(
            copy.handled,
            Handled::Dropped(DropReason::AdminHandledElsewhere)
        );
        assert_eq!(audited(&gw).await, ["ok"]);
        assert_eq!(room_texts(&gw, "room").await.len(), 1, "answered once");
    }

    /// A bot's command is refused without an answer in the chat (a bot cannot start a command
    /// loop), and audited.
    #[tokio::test]
    async fn a_bots_command_is_refused_without_an_answer_and_audited() {
        let gw = gateway().await;
        let stop = command(&gw, "alpha", 1, "beta", "/baton help").await;
        let refused = "refused: bots may not run admin commands";
        assert_eq!(stop.handled, Handled::Admin(refused.into()));
        assert!(room_texts(&gw, "room").await.is_empty());
        assert_eq!(audited(&gw).await, [refused]);
    }

    /// A human who is not an admin is refused and audited, within the sender's rate budget;
    /// past it, the flood gets the rate limit's stop, with no refusal and no audit row each.
    #[tokio::test]
    async fn a_non_admin_is_refused_and_audited_only_within_the_rate_budget() {
        let gw = gateway().await;
        let refused = command(&gw, "alpha", 1, "ann", "/baton help").await;
        let Handled::Admin(answer) = &refused.handled else {
            panic!("not answered: {refused:?}");
        };
        assert!(answer.starts_with("Only baton admins"), "{answer}");
        for n in [2, 3] {
            let limited = command(&gw, "alpha", n, "ann", "/baton help").await;
            assert_eq!(limited.handled, Handled::Dropped(DropReason::RateLimited));
        }
        assert_eq!(audited(&gw).await, ["refused: not an admin"]);
        let admin = command(&gw, "alpha", 4, "root", "/baton help").await;
        assert!(
            matches!(admin.handled, Handled::Admin(_)),
            "an admin is not limited"
        );
    }
}
