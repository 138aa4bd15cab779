//! The pipeline: every inbound event, whatever its platform, goes through
//! the same steps in the same order. `Dispatcher::pipeline` (`pipeline.rs`) lists them; each
//! returns a `Step`: what the next steps need, or a `Stop` saying what became of
//! the event, whether the sender is owed a line and whether the message is kept as history.
//! One function (`Dispatcher::stopped`, `handled.rs`) performs those side effects.
//!
//! ```text
//!  adapter ──accept──▶ 2 dedupe (durable) ──ack──▶ platform
//!                           │ chatter (asked steps 3 to 6): kept as history in the same write
//!                           │ spawn
//!                           ▼
//!  account ▶ 3 own message ▶ 3 gateway line ▶ size ▶ 4 admin ▶ 5 policy ▶ 5½ answer
//!      ▶ 6 activation (not woken, paused: kept as history) ▶ 7 bot guards ▶ 8 rate limit
//!      ▶ 9 to 13: the session turn (engine: lane, files fetched, turn, outcome), delivered,
//!        mirrored
//! ```
//!
//! The pipeline stands on top of the flows it calls (admin, escalation); the turn itself is the
//! engine's ([`crate::engine`]), shared with every other flow that takes turns.
//!
//! This file is the pipeline's entry: the handle every adapter feeds, the durable intake (step 2;
//! chatter's in `chatter.rs`) and the drain at shutdown. Each step is a free function taking
//! only what it uses, in the file of its rule: 3 in `self_drop.rs`, the size in `pipeline.rs`, 4
//! `admin_step.rs`, 5 `policy.rs`, 5½ `answer_step.rs`, 6 `activation.rs`, 7 and 8
//! `guard_steps.rs`, 9 to 13 `turn_step.rs`. What the steps made of the event, and why, is one
//! typed record per event per bot (`decision.rs`), kept in the write that ends the run.

mod activation;
mod admin_step;
mod answer_step;
mod busy;
mod chatter;
mod decision;
mod dedupe;
mod files_in;
mod gateway_line;
mod guard_steps;
mod handled;
mod inbound;
mod inbox;
mod pipeline;
mod policy;
mod self_drop;
mod speaker;
mod stop;
#[cfg(test)]
mod testing;
mod turn_step;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use baton_contract::{AccountId, ChatKey, EventSink, InboundEvent, NotTaken, UserId};

pub use activation::Wake;
pub use pipeline::MAX_TEXT_BYTES;
pub use stop::{DropReason, Handled, Refusal};

pub(crate) use self::inbound::Inbound;
use crate::admin::Admin;
use crate::chains::Chains;
use crate::config::Config;
use crate::engine::{Engine, WeakEngine};
use crate::guards::{Guards, KeyedLimiter};
use crate::metrics;
use crate::pen::Arrival;
use crate::post::RunHandedOver;
use crate::store::{InboxId, StoreError};
use crate::timing::{Board, now_ms};
use crate::trace::Handoff;

/// What step 2 made of an event.
#[expect(
    clippy::large_enum_variant,
    reason = "returned once per event and matched at once: a box would allocate for every filed event to save one move"
)]
enum Intake {
    /// Filed in the inbox, to be run.
    Filed(InboxId, InboundEvent),
    /// Chatter, kept as history: nothing is left to run (`chatter.rs`).
    Kept,
    /// Claimed before.
    Duplicate,
}

/// The pipeline. Cheap to clone; every adapter feeds the same one.
#[derive(Clone)]
pub struct Dispatcher {
    engine: Engine,
    /// Step 4's commands.
    admin: Admin,
    own: Arc<DispatcherState>,
}

/// What only the pipeline changes, built once by the gateway; [`Dispatcher::new`] puts it over
/// an engine.
pub struct DispatcherState {
    /// Steps 7 and 8.
    guards: Guards,
    /// Policy refusal notices: at most one per sender per account every 10 minutes.
    notices: KeyedLimiter<(AccountId, UserId)>,
    /// "Busy" notices when a turn's queue is full: at most one per chat a minute.
    busy_notices: KeyedLimiter<ChatKey>,
    /// Inbox rows whose run ended while the store could not write (`inbox.rs`), to hand back.
    unfinished: std::sync::Mutex<Vec<InboxId>>,
}

impl DispatcherState {
    /// The pipeline's guards (`[limits]`) and notice limits, on the real clock.
    pub fn new(config: &Config) -> Arc<DispatcherState> {
        let clock = governor::clock::DefaultClock::default();
        Arc::new(DispatcherState {
            guards: Guards::new(&config.limits, clock.clone()),
            notices: KeyedLimiter::per_window(1, Duration::from_secs(600), clock.clone()),
            busy_notices: KeyedLimiter::per_window(1, Duration::from_secs(60), clock),
            unfinished: std::sync::Mutex::default(),
        })
    }

    /// Forget guard and notice state for keys that are idle again.
    pub fn retain_recent(&self) {
        self.guards.retain_recent();
        self.notices.retain_recent();
        self.busy_notices.retain_recent();
    }
}

impl Dispatcher {
    /// A dispatcher over `engine`, answering commands with `admin`, with `own` state.
    pub(crate) fn new(engine: Engine, admin: Admin, own: Arc<DispatcherState>) -> Self {
        Self { engine, admin, own }
    }

    /// The turn kernel it runs events through.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Forget guard and notice state for keys that are idle again (the gateway's maintenance).
    pub fn retain_recent(&self) {
        self.own.retain_recent();
    }

    /// Steps 7 and 8's guards, for a test to spend a sender's budget.
    #[cfg(test)]
    pub(crate) fn guards(&self) -> &Guards {
        &self.own.guards
    }

    /// Step 4's commands, for a test to run one.
    #[cfg(test)]
    pub(crate) fn admin(&self) -> &Admin {
        &self.admin
    }

    /// Deduplicate and run the whole pipeline, waiting for the outcome. The local chat uses
    /// this; platform adapters go through [`EventSink::accept`], which does not wait.
    pub async fn handle(&self, event: InboundEvent) -> Handled {
        if self.engine.tasks().is_closed() {
            return Handled::Dropped(DropReason::ShuttingDown);
        }
        // Tracked like a spawned run, so a shutdown waits for it too.
        self.engine
            .tasks()
            .track_future(async {
                match self.intake(event).await {
                    Ok(Intake::Filed(filed, event)) => {
                        self.run_filed(filed, event, Arrival::Fresh).await
                    }
                    Ok(Intake::Kept) => Handled::Buffered,
                    Ok(Intake::Duplicate) => Handled::Duplicate,
                    Err(_) => Handled::Dropped(DropReason::StoreFailing),
                }
            })
            .await
    }

    /// How a sibling post handed over by delivery (`src/post/handover.rs`) is run: counted
    /// and run in the background, like an accepted event. It is already filed in its account's
    /// inbox; one that arrives while the gateway drains stays there, and the next start runs it.
    /// Built with the engine it runs over ([`Engine::new`]), so it holds it weakly; the runs
    /// share the dispatcher's `own` state, and their commands show the scheduler's `schedule`.
    pub fn handover_runner(
        engine: WeakEngine,
        own: Arc<DispatcherState>,
        schedule: Arc<Board>,
    ) -> RunHandedOver {
        Arc::new(move |filed, event| {
            let Some(engine) = engine.upgrade() else {
                return;
            };
            let platform = event.platform.as_str();
            let Some(filed) = filed else {
                engine.metrics().add(&metrics::DUPLICATES, platform);
                return;
            };
            engine.metrics().add(&metrics::EVENTS_IN, platform);
            if engine.tasks().is_closed() {
                return;
            }
            let admin = Admin::new(Chains::new(engine.clone()), Arc::clone(&schedule));
            // A post handed over is a trigger of its own: a trace of its own.
            Dispatcher::new(engine, admin, Arc::clone(&own)).spawn_run(
                filed,
                event,
                Handoff::default(),
            );
        })
    }

    /// Events accepted whose pipeline run has not finished.
    pub fn in_flight(&self) -> usize {
        self.engine.tasks().len()
    }

    /// Stop taking events and wait (at most `grace`) for the turns in flight to finish.
    /// Returns whether everything finished.
    pub async fn drain(&self, grace: Duration) -> bool {
        self.engine.tasks().close();
        tokio::time::timeout(grace, self.engine.tasks().wait())
            .await
            .is_ok()
    }

    /// Step 2: claim the event and file it in the inbox, durably, before it is acknowledged;
    /// chatter is claimed and kept as history instead, with nothing left to run (`chatter.rs`).
    /// A store that cannot record it refuses it, loudly: answering without a transcript is
    /// worse than the platform's redelivery a little later.
    async fn intake(&self, mut event: InboundEvent) -> Result<Intake, NotTaken> {
        let engine = &self.engine;
        let mut duplicate = None;
        if let Some(account) = engine.roster().account(event.platform, &event.account) {
            let inbound = self.inbound(event, account, Arrival::Fresh, None);
            if let Some(stop) = self.is_chatter(&inbound).await {
                return self.keep_chatter(&inbound, stop).await;
            }
            duplicate = Some(decision::duplicate(&inbound));
            event = inbound.event;
        }
        let filed = inbox::file(engine.store(), &event, now_ms(), duplicate).await;
        Ok(match self.counted(&event, filed)? {
            Some(filed) => Intake::Filed(filed, event),
            None => Intake::Duplicate,
        })
    }

    /// Counts what step 2 made of `event`: fresh (`Some`), a duplicate (`None`), or refused
    /// because the store could not record it.
    fn counted<T>(
        &self,
        event: &InboundEvent,
        taken: Result<Option<T>, StoreError>,
    ) -> Result<Option<T>, NotTaken> {
        let platform = event.platform.as_str();
        let counters = self.engine.metrics();
        match taken {
            Ok(Some(fresh)) => {
                counters.add(&metrics::EVENTS_IN, platform);
                Ok(Some(fresh))
            }
            Ok(None) => {
                counters.add(&metrics::DUPLICATES, platform);
                tracing::debug!(message = %event.message_id, "duplicate event ignored");
                Ok(None)
            }
            Err(err) => {
                counters.add(&metrics::EVENTS_REFUSED, platform);
                tracing::error!(
                    %err, platform, account = %event.account, message = %event.message_id,
                    "event refused: the store cannot record it; readiness is false until the \
                     store takes writes again, and the platform will redeliver"
                );
                Err(NotTaken::StoreFailing)
            }
        }
    }

    /// Run a fresh filed event in the background, tracked so a shutdown waits for it.
    ///
    /// Boxed: the run's state is kilobytes, and a task holding it inline is copied whole when
    /// spawned and again at each change of the task's stage (BENCHMARKS.md, issue 23).
    /// The run is in the trace `trace` names, if any: that of a local room's post. The run is
    /// boxed, not the wrapper: a wrapper's future holding the run inline copied it twice more
    /// (into the wrapper, and into its await), ~10 k instructions a mention.
    fn spawn_run(self, filed: InboxId, event: InboundEvent, trace: Handoff) {
        let tasks = self.engine.tasks().clone();
        tasks.spawn(trace.run(Box::pin(async move {
            let handled = self.run_filed(filed, event, Arrival::Fresh).await;
            tracing::debug!(?handled, "event handled");
        })));
    }

    /// Steps 3 to 13 for a filed event, which end by taking it out of the inbox.
    async fn run_filed(&self, filed: InboxId, event: InboundEvent, arrival: Arrival) -> Handled {
        self.process(event, arrival, Some(filed)).await
    }
}

#[async_trait]
impl EventSink for Dispatcher {
    /// Claim and file the event durably, then run the rest of the pipeline in the background so
    /// the adapter can acknowledge the platform at once.
    async fn accept(&self, event: InboundEvent) -> Result<(), NotTaken> {
        if self.engine.tasks().is_closed() {
            return Err(NotTaken::ShuttingDown);
        }
        if let Intake::Filed(filed, event) = self.intake(event).await? {
            // Under the span the adapter accepts it in: a local room's post's.
            self.clone().spawn_run(filed, event, Handoff::here());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{refuse, to_bot};
    use super::*;
    use crate::gateway::testing::{echo_config, parts, room_texts};

    /// A draining dispatcher takes no new event: the local chat's is dropped, a platform's is
    /// refused for the platform to redeliver to the next process, and neither is filed.
    #[tokio::test]
    async fn a_draining_dispatcher_takes_no_new_event() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let d = &gw.dispatcher;
        assert!(d.drain(Duration::from_secs(10)).await, "nothing in flight");
        let event = || to_bot("alpha", 1, "room", "ann", "@alpha hi");
        assert_eq!(
            d.handle(event()).await,
            Handled::Dropped(DropReason::ShuttingDown)
        );
        assert_eq!(d.accept(event()).await, Err(NotTaken::ShuttingDown));
        let left = gw.engine.store().inbox_left("local:alpha").await.unwrap();
        assert!(left.is_empty(), "nothing filed");
    }

    /// A redelivered event is a duplicate: counted as one, answered once.
    #[tokio::test]
    async fn a_redelivery_is_counted_as_a_duplicate_and_answered_once() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let d = &gw.dispatcher;
        let event = || to_bot("alpha", 1, "room", "ann", "@alpha hi");
        assert_eq!(d.handle(event()).await, Handled::Replied("hi".into()));
        assert_eq!(d.handle(event()).await, Handled::Duplicate);
        let counters = gw.engine.metrics();
        assert_eq!(counters.get(&metrics::EVENTS_IN, "local"), 1);
        assert_eq!(counters.get(&metrics::DUPLICATES, "local"), 1);
        assert_eq!(room_texts(&gw, "room").await, ["hi"]);
    }

    /// An event the store cannot record is refused, loudly and counted, not answered without
    /// a record: a platform's is not acknowledged, so the platform redelivers it.
    #[tokio::test]
    async fn an_event_the_store_cannot_record_is_refused_not_answered() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let (d, store) = (&gw.dispatcher, gw.engine.store());
        refuse(store, "INSERT", "inbox").await;
        let event = |n| to_bot("alpha", n, "room", "ann", "@alpha hi");
        assert_eq!(d.accept(event(1)).await, Err(NotTaken::StoreFailing));
        assert_eq!(
            d.handle(event(2)).await,
            Handled::Dropped(DropReason::StoreFailing)
        );
        let refused = gw.engine.metrics().get(&metrics::EVENTS_REFUSED, "local");
        assert_eq!(refused, 2);
        assert!(room_texts(&gw, "room").await.is_empty(), "not answered");
    }

    /// An accepted event is answered in the background; a drain waits for its run.
    #[tokio::test]
    async fn an_accepted_event_runs_in_the_background_and_a_drain_waits_for_it() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let d = &gw.dispatcher;
        d.accept(to_bot("alpha", 1, "room", "ann", "@alpha hi"))
            .await
            .expect("taken");
        assert!(d.drain(Duration::from_secs(10)).await, "finished in time");
        assert_eq!(d.in_flight(), 0);
        assert_eq!(room_texts(&gw, "room").await, ["hi"]);
        let left = gw.engine.store().inbox_left("local:alpha").await.unwrap();
        assert!(left.is_empty(), "taken out of the inbox");
    }

    /// An event for an account the config does not have is claimed, dropped and taken out.
    #[tokio::test]
    async fn an_event_for_an_unknown_account_is_dropped_and_taken_out() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let stray = to_bot("nobody", 1, "room", "ann", "@nobody hi");
        assert_eq!(
            gw.dispatcher.handle(stray).await,
            Handled::Dropped(DropReason::UnknownAccount)
        );
        let left = gw.engine.store().inbox_left("local:nobody").await.unwrap();
        assert!(left.is_empty());
    }
}
