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
