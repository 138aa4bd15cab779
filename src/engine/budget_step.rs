//! The budgets around a turn's model calls (SPEC 12): checked before the backend runs, charged
//! once it answered. A used-up `stop` budget ends the turn before any call, records why in the
//! transcript, announces the refusal on the event stream, and posts the budget's notice in the
//! chat the trigger came from (once per budget and window, claimed in the store). Crossing a
//! `warn` budget's 80 % or 100 % tells each admin of that platform by direct message, audited.
//!
//! The chat a call is charged to is the one the trigger happened in (the caller's origin),
//! whichever session the turn runs in; a thread counts toward its channel.

use std::sync::Mutex;

use async_trait::async_trait;

use serde_json::json;

use super::journal::Journal;
use super::say::{Line, say};
use super::turn_end::{TurnEnd, TurnFailure};
use super::{Caller, Engine};
use crate::backend::{BackendError, BackendReply, ToolCall, ToolExecutor, TurnRequest, Usage};
use crate::budget::{Bill, Call, Stopped, Verdict, Warning, estimate};
use crate::post::Target;
use crate::roster::Bot;
use crate::session::SessionKey;
use crate::store::{EntryKind, NewAudit};
use crate::timing::now_ms;

/// Who the turn's calls are charged to.
pub(super) fn bill<'a>(bot: &'a Bot, caller: &'a Caller, journal: &'a Journal) -> Bill<'a> {
    let at = charged_to(caller, journal);
    Bill {
        bot: bot.id(),
        platform: at.platform,
        chat: at.chat.as_str(),
        trigger: caller.trigger.as_deref().unwrap_or(journal.run_id()),
    }
}

/// The session whose chat the calls are charged to: the trigger's, else the turn's own.
fn charged_to<'a>(caller: &'a Caller, journal: &'a Journal) -> &'a SessionKey {
    caller.origin.as_ref().unwrap_or(journal.session())
}

/// Checks the budgets before the turn's model calls: `Err` with how the turn ends when one
/// stops it.
pub(super) async fn admit(
    engine: &Engine,
    journal: &Journal,
    bot: &Bot,
    caller: &Caller,
) -> Result<(), TurnEnd> {
    match checked(engine, journal, bot, caller).await {
        Ok(()) => Ok(()),
        Err(stopped) => Err(refuse(engine, journal, bot, caller, stopped).await),
    }
}

/// Checks the budgets before one model call, warning the admins as they are crossed: `Err`
/// with the `stop` budget that is used up.
async fn checked(
    engine: &Engine,
    journal: &Journal,
    bot: &Bot,
    caller: &Caller,
) -> Result<(), Stopped> {
    let bill = bill(bot, caller, journal);
    match engine.budgets().check(&bill).await {
        Verdict::Go { warnings } => {
            for warning in warnings {
                warn_admins(engine, bot, charged_to(caller, journal), &warning).await;
            }
            Ok(())
        }
        Verdict::Stop(stopped) => Err(stopped),
    }
}

/// The turn's tools, charging each model call that asks for tools as it answers (before the
/// tools run: a `sessions_send` target is checked against what its sender spent so far), then
/// the rest of the turn once it ends ([`Metered::settle`]); and checking the budgets again
/// before each further model call ([`Metered::refused`] ends a turn one stopped).
pub(super) struct Metered<'a> {
    pub inner: &'a dyn ToolExecutor,
    pub engine: &'a Engine,
    pub journal: &'a Journal,
    pub bot: &'a Bot,
    pub caller: &'a Caller,
    pub request: &'a TurnRequest,
    /// What was charged so far, as the calls answered.
    pub charged: Mutex<Option<Usage>>,
    /// The `stop` budget that refused a further model call.
    pub stopped: Mutex<Option<Stopped>>,
}

/// When a charge's row is written.
#[derive(Clone, Copy)]
enum When {
    /// In a store job of its own, now: a later check in the turn counts it.
    Now,
    /// With the journal's next write.
    Owed,
}

impl Metered<'_> {
    /// How the turn ends when a budget refused one of its further model calls: refused as one
    /// refused before its first call is.
    pub(super) async fn refused(&self) -> Option<TurnEnd> {
        let stopped = self
            .stopped
            .lock()
            .expect("stopped budget poisoned")
            .take()?;
        Some(refuse(self.engine, self.journal, self.bot, self.caller, stopped).await)
    }

    /// Charges one call now (`Now`), or bills it for the journal's next write to record
    /// (`Owed`: the turn's last charge, which nothing waits for).
    async fn charge(&self, model: &str, usage: Usage, estimated: bool, when: When) {
        let session = self.journal.session().render();
        let call = Call {
            session: &session,
            run_id: self.journal.run_id(),
            model,
            usage,
            estimated,
        };
        let bill = bill(self.bot, self.caller, self.journal);
        let budgets = self.engine.budgets();
        match when {
            When::Now => budgets.charge(&bill, call).await,
            When::Owed => self.journal.owe(budgets, budgets.bill(&bill, call).await),
        }
    }

    /// Charges what the turn spent and was not charged yet: the backend's total less the calls
    /// charged as they answered, else an estimate from the characters. Its row rides on the
    /// journal's next write (the start of the post, or the line saying why there is none).
    pub(super) async fn settle(&self, reply: &BackendReply) {
        let charged = *self.charged.lock().expect("charged usage poisoned");
        match (reply.usage, charged) {
            (Some(total), Some(charged)) => {
                let rest = total.minus(charged);
                if rest != Usage::default() {
                    self.charge(&reply.model, rest, false, When::Owed).await;
                }
            }
            (Some(total), None) => {
                self.charge(&reply.model, total, false, When::Owed).await;
            }
            (None, _) => {
                let text = reply.text.as_deref().unwrap_or_default();
                let usage = estimate(self.request, text);
                self.charge(&reply.model, usage, true, When::Owed).await;
            }
        }
    }
}

#[async_trait]
impl ToolExecutor for Metered<'_> {
    async fn call(&self, call: &ToolCall) -> serde_json::Value {
        self.inner.call(call).await
    }

    async fn spent(&self, usage: Usage) {
        {
            let mut charged = self.charged.lock().expect("charged usage poisoned");
            *charged = Some(charged.unwrap_or_default().plus(usage));
        }
        self.charge(&self.request.model, usage, false, When::Now)
            .await;
    }

    async fn may_call(&self) -> Result<(), BackendError> {
        let stopped = checked(self.engine, self.journal, self.bot, self.caller).await;
        stopped.map_err(|stopped| {
            let budget = stopped.budget.clone();
            *self.stopped.lock().expect("stopped budget poisoned") = Some(stopped);
            BackendError::Budget(budget)
        })
    }
}

async fn refuse(
    engine: &Engine,
    journal: &Journal,
    bot: &Bot,
    caller: &Caller,
    stopped: Stopped,
) -> TurnEnd {
    let failure = TurnFailure::Budget(stopped.budget.clone());
    tracing::info!(session = %journal.session(), bot = %bot.id(), budget = %stopped.budget, "a budget is used up: the model call is not made");
    let at = charged_to(caller, journal);
    engine.refused("budget", "budget", Some(at.chat_key()), bot.id());
    journal
        .bot_did(
            EntryKind::Failure,
            &failure.to_string(),
            json!({"stage": "budget", "budget": stopped.budget}),
        )
        .await;
    if let (Some(text), Some(origin)) = (&stopped.notice, &caller.origin) {
        let run_id = format!("budget:{}:{}", stopped.budget, journal.run_id());
        post(engine, bot, origin, None, run_id, text).await;
    }
    TurnEnd::Failed(failure)
}

/// Tells each admin of the platform the trigger came from, by direct message, and audits it.
async fn warn_admins(engine: &Engine, bot: &Bot, at: &SessionKey, warning: &Warning) {
    let admins = engine.config().admins.for_platform(at.platform).to_vec();
    for admin in &admins {
        let run_id = format!(
            "budget-warn:{}:{}:{}",
            warning.budget,
            warning.percent,
            now_ms()
        );
        post(engine, bot, at, Some(admin), run_id, &warning.text).await;
    }
    let audit = NewAudit {
        ts_ms: now_ms(),
        platform: at.platform.to_string(),
        chat: at.chat.as_str().to_owned(),
        user: "baton".to_owned(),
        command: format!("budget warn {} {}%", warning.budget, warning.percent),
        outcome: format!("told {} admin(s): {}", admins.len(), warning.text),
    };
    if let Err(err) = engine.store().audit(audit).await {
        tracing::error!(%err, budget = %warning.budget, "could not audit a budget warning");
    }
}

/// Posts `text` as `bot` in `at`'s chat, or to `dm` (a user id) directly.
async fn post(
    engine: &Engine,
    bot: &Bot,
    at: &SessionKey,
    dm: Option<&String>,
    run_id: String,
    text: &str,
) {
    let roster = engine.roster();
    let account = roster
        .account_of_bot(at.platform, bot.id())
        .or_else(|| roster.account(at.platform, &at.account));
    let Some(account) = account else {
        tracing::warn!(bot = %bot.id(), platform = %at.platform, "no account to post a budget notice through");
        return;
    };
    let chat = dm.map_or_else(|| at.chat.clone(), |user| user.as_str().into());
    let thread = if dm.is_some() {
        None
    } else {
        at.thread.clone()
    };
    let session = SessionKey {
        bot: account.bot.id().clone(),
        platform: at.platform,
        account: account.id.clone(),
        chat: chat.clone(),
        thread: thread.clone(),
    };
    let line = Line {
        account,
        session: &session,
        run_id,
        quiet_in: session.chat_key(),
        target: Target {
            chat,
            thread,
            reply_to: None,
            ephemeral: None,
        },
        stage: "budget",
        text,
    };
    // A failure is logged and recorded by `say`.
    let _ = say(engine, line).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::journal::journal;
    use crate::gateway::testing::{echo_config, parts};
    use crate::session::test_key;

    /// A turn's calls are charged to the chat its trigger happened in (a thread to its
    /// channel) and to the trigger's run; a turn with neither is charged to its own.
    #[tokio::test]
    async fn calls_are_charged_to_the_triggers_chat_and_run() {
        let gw = parts(&echo_config(&["b"], "")).await;
        let bot = gw
            .engine
            .roster()
            .bot(&"b".parse().unwrap())
            .unwrap()
            .clone();
        let own = test_key("own");
        let opened = journal(&gw.engine, &own, "run-own".into()).await;

        let mut origin = test_key("room");
        origin.thread = Some("t1".into());
        let mut hop = Caller::from_chat(&origin);
        hop.trigger = Some("run-human".into());
        let charged = bill(&bot, &hop, &opened);
        assert_eq!((charged.chat, charged.trigger), ("room", "run-human"));
        assert_eq!(charged.platform, origin.platform);

        let external = Caller::external(&test_key("api"));
        let charged = bill(&bot, &external, &opened);
        assert_eq!((charged.chat, charged.trigger), ("own", "run-own"));
    }
}
