//! The steps, in order: [`Dispatcher::pipeline`] is the one list, like teloxide's `schema()`.
//! Each step returns a [`Step`]; the first [`Stop`] ends the event, and
//! [`Dispatcher::stopped`] performs what stopping it owes.

use baton_contract::InboundEvent;

use super::decision::{self, Turned};
use super::stop::{DropReason, Handled, Mode, Notice, Step, Stop};
use super::{
    Dispatcher, Inbound, Wake, activation, admin_step, answer_step, guard_steps, policy, self_drop,
    turn_step,
};
use crate::pen::Arrival;
use crate::store::InboxId;
use crate::trace::{Span, SpanKind, attr, in_span};

/// The largest inbound text the pipeline takes: anything longer is refused
/// with a message, never truncated.
pub const MAX_TEXT_BYTES: usize = crate::field_bound::MAX_TEXT_BYTES;

impl Dispatcher {
    /// Steps 3 to 13: the event's account, then [`Dispatcher::pipeline`]; a step that stops the
    /// event has its side effects performed in one place ([`Dispatcher::stopped`]). The run
    /// ends by taking `filed` out of the inbox: in the stop's own write when it keeps the
    /// message as history (one write instead of two for chatter), otherwise on its own. That
    /// write keeps the decision on the event too (`decision.rs`), built once here.
    pub(crate) async fn process(
        &self,
        event: InboundEvent,
        arrival: Arrival,
        filed: Option<InboxId>,
    ) -> Handled {
        let engine = &self.engine;
        let Some(account) = engine.roster().account(event.platform, &event.account) else {
            tracing::warn!(platform = %event.platform, account = %event.account, "event for an unknown account");
            self.finish(filed, None).await;
            return Handled::Dropped(DropReason::UnknownAccount);
        };
        let span = Span::start("inbound", SpanKind::Consumer, || {
            vec![
                attr("baton.platform", event.platform.as_str()),
                attr("baton.account", event.account.as_str().to_owned()),
                attr("baton.chat", event.chat.as_str().to_owned()),
                attr("baton.message_id", event.message_id.as_str().to_owned()),
                attr("baton.bot", account.bot.id().as_str().to_owned()),
            ]
        });
        let inbound = self.inbound(event, account, arrival, filed);
        in_span!(span, self.decided(&inbound))
    }

    /// [`Dispatcher::pipeline`] under the span of its decision: the decision record
    /// (`decision.rs`) is built once and feeds both the stored row and the span.
    async fn decided(&self, inbound: &Inbound<'_>) -> Handled {
        let span = Span::start("pipeline", SpanKind::Internal, Vec::new);
        let ran = in_span!(span, self.pipeline(inbound));
        let decided = decision::of(inbound, &ran);
        span.set(|| {
            vec![
                attr("baton.outcome", decided.outcome.as_str()),
                attr("baton.step", decided.step.as_str()),
                attr("baton.reason", decided.reason.clone()),
                attr("baton.stopped", ran.is_err()),
            ]
        });
        match ran {
            Ok(turned) if self.engine.store().write_epoch() != inbound.began => {
                // A write of the turn (its reply's record, its failure) may have been refused
                // while the store was away, even if it writes again now: run the event again
                // rather than take it out unanswered or unrecorded. A reply already posted is
                // not posted again (its post was begun on record).
                self.run_again(inbound.filed).await;
                turned.handled
            }
            Ok(turned) => {
                self.finish(inbound.filed, Some(decided)).await;
                turned.handled
            }
            Err(stop) => self.stopped(inbound, stop, decided).await,
        }
    }

    /// The steps, in order. Each is a free function given only what it uses, and returns a
    /// [`Step`]: the value the next steps need, or the [`Stop`] that ends the event here.
    pub(super) async fn pipeline(&self, inbound: &Inbound<'_>) -> Step<Turned> {
        let (engine, guards) = (&self.engine, &self.own.guards);
        let wake = self.before_turn(inbound, Mode::Act).await?; // 3 to 6
        guard_steps::bot_message(guards, inbound)?; // 7
        guard_steps::rate_limit(guards, inbound)?; // 8
        turn_step::run(engine, inbound, wake).await // 9 to 13
    }

    /// Steps 3 to 6, which decide whether the event wakes its bot. The pipeline runs them
    /// acting; chatter's question at intake ([`Dispatcher::is_chatter`]) runs the same list
    /// asking, so the two cannot drift apart.
    pub(super) async fn before_turn(&self, inbound: &Inbound<'_>, mode: Mode) -> Step<Wake> {
        let (engine, guards) = (&self.engine, &self.own.guards);
        let (config, store) = (engine.config(), engine.store());
        self_drop::not_own(inbound)?; // 3
        self_drop::not_a_gateway_line(engine.own_notices(), inbound)?; // 3
        within_size(inbound)?; // refused, never truncated
        admin_step::intercept(&self.admin, guards, inbound, mode).await?; // 4
        policy::check(config, store, inbound, mode).await?; // 5
        if mode == Mode::Act {
            guard_steps::human_spoke(guards, inbound); // heard, never stops
        }
        answer_step::answer(engine, inbound, mode).await?; // 5½
        activation::wakes(store, engine.roster(), inbound).await // 6
    }
}

/// Over [`MAX_TEXT_BYTES`]: refused with a notice.
pub(super) fn within_size(inbound: &Inbound<'_>) -> Step<()> {
    if inbound.event.text.len() > MAX_TEXT_BYTES {
        let text = "That message is over 100 kB, too long for me to read; please send less.";
        return Err(Stop::dropped(DropReason::TooLong).with_notice(Notice::Now(text.into())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use baton_contract::{AccountId, ChatKey, Platform};

    use super::*;
    use crate::bot_id::BotId;
    use crate::dispatcher::testing::{allow, refuse, to_bot};
    use crate::gateway::testing::{echo_config, parts};

    /// Two echo bots; the local chat `room` is the only group allowed; `root` is an admin; a
    /// sender gets one message a minute; no bot's messages may wake a bot.
    fn config() -> String {
        echo_config(
            &["alpha", "beta"],
            "\n[[chats]]\nplatform = \"local\"\nid = \"room\"\n\n[admins]\nlocal = [\"root\"]\n\n\
             [limits]\ninbound_per_sender_per_minute = 1\n",
        )
        .replace("group_policy = \"open\"", "group_policy = \"allowlist\"")
    }

    /// Each event below would trip its step and every later one; it must stop at its own step.
    /// Moving a step later (or earlier) in [`Dispatcher::pipeline`] makes one of them stop
    /// elsewhere.
    #[tokio::test]
    async fn the_steps_run_in_order_and_the_first_stop_wins() {
        let gw = parts(&config()).await;
        let d = &gw.dispatcher;
        let huge = format!("/baton help {}", "x".repeat(MAX_TEXT_BYTES));
        // A sender over the rate limit, to show that every earlier step runs before it.
        let alpha: BotId = "alpha".parse().unwrap();
        for sender in ["ann", "beta"] {
            gw.dispatcher.guards().inbound.check(&alpha, sender);
            let label = if sender == "beta" { "bot:beta" } else { sender };
            gw.dispatcher.guards().inbound.check(&alpha, label);
        }

        let own = to_bot("alpha", 1, "elsewhere", "alpha", &huge);
        assert_eq!(
            d.process(own, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::OwnMessage)
        );

        gw.engine.own_notices().remember(
            &ChatKey::new(baton_contract::Platform::Local, &"room".into(), None),
            &"beta".parse().unwrap(),
            &huge,
        );
        let notice = to_bot("alpha", 2, "room", "beta", &huge);
        assert_eq!(
            d.process(notice, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::GatewayNotice)
        );

        let long = to_bot("alpha", 3, "elsewhere", "ann", &huge);
        assert_eq!(
            d.process(long, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::TooLong)
        );

        let command = to_bot("alpha", 4, "elsewhere", "cid", "/baton help");
        let Handled::Admin(answer) = d.process(command, Arrival::Fresh, None).await else {
            panic!("an admin command is answered before the policy");
        };
        assert!(answer.contains("Only baton admins"), "{answer}");

        let refused = to_bot("alpha", 5, "elsewhere", "ann", "@alpha hi");
        assert!(matches!(
            d.process(refused, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::Policy(_))
        ));

        let mut unaddressed = to_bot("alpha", 6, "room", "beta", "chatter");
        unaddressed.mentions.clear();
        assert_eq!(
            d.process(unaddressed, Arrival::Fresh, None).await,
            Handled::Buffered
        );

        let from_bot = to_bot("alpha", 7, "room", "beta", "@alpha hi");
        assert!(matches!(
            d.process(from_bot, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::BotGuard(_))
        ));

        let limited = to_bot("alpha", 8, "room", "ann", "@alpha hi");
        assert_eq!(
            d.process(limited, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::RateLimited)
        );

        let fine = to_bot("alpha", 9, "room", "bob", "@alpha hi");
        assert_eq!(
            d.process(fine, Arrival::Fresh, None).await,
            Handled::Replied("hi".into())
        );
    }

    /// A filed message kept as history whose write the store refuses (PostgreSQL restarting)
    /// is handed back, made nobody's, for the instance serving its account to run again; not
    /// left as this live instance's row, which nothing would ever run or take out.
    #[tokio::test]
    async fn a_filed_message_whose_history_write_is_refused_is_handed_back() {
        let gw = parts(&config()).await;
        let (d, store) = (&gw.dispatcher, gw.engine.store());
        store.instance_register("solo", "test", 1).await.unwrap();
        let mut aside = to_bot("alpha", 1, "room", "ann", "the deploy is at five");
        aside.mentions.clear();
        let filed = store.file(crate::store::Filing::of(&aside), 1, None);
        let id = filed.await.unwrap().expect("fresh");
        refuse(store, "INSERT", "history").await;
        let kept = d.process(aside.clone(), Arrival::Fresh, Some(id)).await;
        assert_eq!(kept, Handled::Buffered);
        let left = store.inbox_left("local:alpha").await.unwrap();
        assert_eq!(left.len(), 1, "not taken out: its history was not kept");
        assert_eq!(left[0].owner, "", "handed back to be run again");

        allow(store).await;
        let taken = store.inbox_adopt("local:alpha", 1).await.unwrap();
        assert_eq!(taken.len(), 1, "the serving instance takes it over");
        let kept = d.process(aside, Arrival::Replayed, Some(id)).await;
        assert_eq!(kept, Handled::Buffered);
        assert!(store.inbox_left("local:alpha").await.unwrap().is_empty());
    }

    /// Chatter costs one write: its dedupe claim and its history push together, with no inbox
    /// row, and a redelivery of it keeps nothing more. A mention costs seven: the turn's start
    /// is one job, the local room keeping the reply is the post itself, and an adapter that
    /// shows no typing indicator writes no typing rows.
    #[tokio::test]
    async fn chatter_is_claimed_and_kept_in_one_write() {
        let gw = parts(&config()).await;
        let (d, store) = (&gw.dispatcher, gw.engine.store());
        let mut chatter = to_bot("alpha", 1, "room", "ann", "the deploy is at five");
        chatter.mentions.clear();
        let before = store.jobs();
        assert_eq!(d.handle(chatter.clone()).await, Handled::Buffered);
        assert_eq!(store.jobs() - before, 1, "claimed and kept together");
        assert_eq!(d.handle(chatter).await, Handled::Duplicate);
        assert!(store.inbox_left("local:alpha").await.unwrap().is_empty());
        let kept = store
            .history_take(crate::store::HistoryTake {
                chat_key: &ChatKey::new(baton_contract::Platform::Local, &"room".into(), None),
                bot: &"alpha".parse().unwrap(),
                skip_sender: None,
                skip_message: None,
                limit: 10,
            })
            .await
            .unwrap();
        assert_eq!(kept.len(), 1, "kept once: {kept:?}");

        let mention = to_bot("alpha", 2, "room", "bob", "@alpha hi");
        let before = store.jobs();
        assert_eq!(d.handle(mention).await, Handled::Replied("hi".into()));
        assert_eq!(
            store.jobs() - before,
            6,
            "filed; session, history and inbound entry together; post begun with the turn's \
             usage; the local room keeps the reply (the local channel's post itself); reply; \
             done (the local channel shows no typing, so no typing rows)"
        );
        assert!(store.inbox_left("local:alpha").await.unwrap().is_empty());
    }

    /// Chatter is exactly what the pipeline would keep as history without acting: asked for
    /// each kind of message the steps before the turn tell apart, [`Dispatcher::is_chatter`]
    /// agrees with the pipeline's outcome.
    #[tokio::test]
    async fn chatter_is_what_the_pipeline_keeps_without_acting() {
        let gw = parts(&config()).await;
        let d = &gw.dispatcher;
        let unaddressed = |n, chat, from, text: &str| {
            let mut event = to_bot("alpha", n, chat, from, text);
            event.mentions.clear();
            event
        };
        let mut dm = unaddressed(9, "ann-dm", "ann", "hello there");
        dm.chat_kind = baton_contract::ChatKind::Dm;
        let cases = [
            (unaddressed(1, "room", "ann", "the deploy is at five"), true),
            (unaddressed(2, "room", "beta", "a bot's aside"), true),
            (to_bot("alpha", 3, "room", "bob", "@alpha hi"), false),
            (unaddressed(4, "room", "alpha", "my own line"), false),
            (
                unaddressed(5, "room", "ann", &"x".repeat(MAX_TEXT_BYTES + 1)),
                false,
            ),
            (unaddressed(6, "room", "ann", "/baton help"), false),
            (
                unaddressed(7, "room", "ann", "ok, /baton chain stop"),
                false,
            ),
            (
                unaddressed(8, "elsewhere", "ann", "in a chat not listed"),
                false,
            ),
            (dm, false),
        ];
        for (event, chatter) in cases {
            let text = event.text.chars().take(40).collect::<String>();
            let account = gw.engine.roster().account(event.platform, &event.account);
            let inbound = d.inbound(event, account.unwrap(), Arrival::Fresh, None);
            assert_eq!(
                d.is_chatter(&inbound).await.is_some(),
                chatter,
                "asked: {text}"
            );
            let outcome = d.pipeline(&inbound).await;
            let kept = matches!(&outcome, Err(stop) if stop.is_chatter());
            assert_eq!(kept, chatter, "{text}: {outcome:?}");
        }
    }

    /// Asked (chatter's question at intake), the steps act on nothing: an admin's command
    /// stops the list unanswered and unaudited; acting, the same list answers and audits it.
    #[tokio::test]
    async fn asked_the_steps_act_on_nothing() {
        let gw = parts(&config()).await;
        let d = &gw.dispatcher;
        let store = gw.engine.store();
        let account = gw
            .engine
            .roster()
            .account(Platform::Local, &AccountId::from("alpha"))
            .unwrap();
        let command = || to_bot("alpha", 1, "room", "root", "/baton help");
        let asked = d.inbound(command(), account, Arrival::Fresh, None);
        assert!(matches!(
            d.before_turn(&asked, Mode::Ask).await,
            Err(Stop {
                handled: Handled::Admin(_),
                ..
            })
        ));
        assert!(store.audit_log(10).await.unwrap().is_empty(), "not run");
        let acted = d.inbound(command(), account, Arrival::Fresh, None);
        assert!(d.before_turn(&acted, Mode::Act).await.is_err());
        assert_eq!(store.audit_log(10).await.unwrap().len(), 1, "run once");
    }

    /// A stop's side effects happen in one place: the notice it owes is posted (and recorded),
    /// and a message kept as history is in the chat's buffer for the next turn.
    #[tokio::test]
    async fn a_stop_posts_its_notice_and_keeps_history_as_told() {
        let gw = parts(&config()).await;
        let d = &gw.dispatcher;
        let mut chatter = to_bot("alpha", 1, "room", "ann", "the deploy is at five");
        chatter.mentions.clear();
        assert_eq!(
            d.process(chatter, Arrival::Fresh, None).await,
            Handled::Buffered
        );
        let history = gw
            .engine
            .store()
            .history_take(crate::store::HistoryTake {
                chat_key: &ChatKey::new(baton_contract::Platform::Local, &"room".into(), None),
                bot: &"alpha".parse().unwrap(),
                skip_sender: None,
                skip_message: None,
                limit: 10,
            })
            .await
            .unwrap();
        let texts: Vec<&str> = history.iter().map(|h| h.text.as_str()).collect();
        assert_eq!(texts, ["the deploy is at five"]);

        let first = to_bot("alpha", 2, "room", "bob", "@alpha one");
        assert_eq!(
            d.process(first, Arrival::Fresh, None).await,
            Handled::Replied("one".into())
        );
        let second = to_bot("alpha", 3, "room", "bob", "@alpha two");
        assert_eq!(
            d.process(second, Arrival::Fresh, None).await,
            Handled::Dropped(DropReason::RateLimited)
        );
        let posted: Vec<String> = gw
            .hub
            .messages("room", None)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.text)
            .collect();
        assert_eq!(posted.len(), 2, "{posted:?}");
        assert!(
            posted[1].starts_with("You're sending messages faster"),
            "{posted:?}"
        );
    }
}
