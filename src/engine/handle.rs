//! The engine handle every flow that takes turns stands on: the resolved config, the roster,
//! the store, the budgets, the lanes, the counters and the task tracker, built once by the
//! gateway. What only one flow changes or reads is that flow's own (the pipeline's guards and
//! notices in the `Dispatcher`, the `sessions_send` guard and waiters in the `Relay`, the chain
//! turn limit in `Chains`, the schedule's board in the `Scheduler`). Cheap to clone (one `Arc`
//! inside, like mini-redis's `Db`); its parts are reached through accessors, so what it holds
//! can change without touching its users.

use std::sync::{Arc, Weak};
use std::time::Duration;

use baton_contract::ChatKey;
use tokio_util::task::TaskTracker;

use super::Caller;
use super::own_notices::OwnNotices;
use super::taps::Taps;
use crate::backend::ToolExecutor;
use crate::bot_id::BotId;
use crate::budget::Budgets;
use crate::config::Config;
use crate::events::{Event, Events};
use crate::lanes::Lanes;
use crate::metrics::Metrics;
use crate::post::{Handover, RunHandedOver};
use crate::roster::{Account, ChatRules, Roster};
use crate::store::Store;

/// Gives a turn its agent tools, bound to the turn's caller. The one place a turn reaches up:
/// a tool may run turns of its own (`sessions_send`, chains), so the tools stand above the
/// engine, and the gateway hands the engine this function when it builds it (`tools::bind`).
pub type BindTools = Arc<dyn Fn(Engine, Caller) -> Box<dyn ToolExecutor> + Send + Sync>;

/// The turn kernel's handle. Built once by [`crate::gateway`]; every clone is the same engine.
#[derive(Clone)]
pub struct Engine {
    kernel: Arc<Kernel>,
}

/// An engine held without keeping it alive: what the engine's own parts hold of it.
#[derive(Clone)]
pub struct WeakEngine {
    kernel: Weak<Kernel>,
}

impl WeakEngine {
    /// The engine, while it is still running.
    pub fn upgrade(&self) -> Option<Engine> {
        self.kernel.upgrade().map(|kernel| Engine { kernel })
    }
}

/// What the engine holds.
struct Kernel {
    config: Arc<Config>,
    roster: Roster,
    chat_rules: ChatRules,
    store: Store,
    budgets: Budgets,
    lanes: Arc<Lanes>,
    own_notices: OwnNotices,
    taps: Taps,
    metrics: Metrics,
    events: Events,
    tasks: TaskTracker,
    bind_tools: BindTools,
    turn_limit: Duration,
    /// Runs a sibling post handed over to another bot through the pipeline (built by the
    /// gateway with the engine, over a weak handle to it: the pipeline stands above the
    /// engine).
    run_handed_over: RunHandedOver,
    running: super::Running,
}

impl Engine {
    /// Assemble the engine. `bind_tools` gives each turn its tools; `hand_over` builds, from
    /// a weak handle to the engine being made, how a sibling post handed over to another bot
    /// reaches the pipeline.
    pub fn new(
        config: Arc<Config>,
        roster: Roster,
        chat_rules: ChatRules,
        store: Store,
        bind_tools: BindTools,
        hand_over: impl FnOnce(WeakEngine) -> RunHandedOver,
    ) -> Engine {
        let instance = config.cluster.instance_id.as_deref().unwrap_or("local");
        let budgets = Budgets::new(&config, store.clone(), instance);
        let kernel = Arc::new_cyclic(|kernel: &Weak<Kernel>| Kernel {
            budgets,
            lanes: Lanes::new(&config.lanes),
            own_notices: OwnNotices::default(),
            taps: Taps::default(),
            metrics: Metrics::default(),
            events: Events::default(),
            tasks: TaskTracker::new(),
            bind_tools,
            run_handed_over: hand_over(WeakEngine {
                kernel: kernel.clone(),
            }),
            turn_limit: Duration::from_secs(config.gateway.turn_timeout_seconds),
            running: super::Running::default(),
            config,
            roster,
            chat_rules,
            store,
        });
        Engine { kernel }
    }

    /// The validated config.
    pub fn config(&self) -> &Arc<Config> {
        &self.kernel.config
    }

    /// Bots and accounts.
    pub fn roster(&self) -> &Roster {
        &self.kernel.roster
    }

    /// Per-chat policy.
    pub fn chat_rules(&self) -> &ChatRules {
        &self.kernel.chat_rules
    }

    /// The turns running here: `/baton stop`, a shutdown's cancel, the agents' MCP tokens.
    pub fn running(&self) -> &super::Running {
        &self.kernel.running
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.kernel.store
    }

    /// The budgets every model call is checked against and charged to.
    pub fn budgets(&self) -> &Budgets {
        &self.kernel.budgets
    }

    /// This instance's `cluster.instance_id` (set at start; `local` for a gateway assembled
    /// without starting, as unit tests do).
    pub(crate) fn instance(&self) -> &str {
        self.kernel
            .config
            .cluster
            .instance_id
            .as_deref()
            .unwrap_or("local")
    }

    /// `cluster.lease_seconds`: how long a lease or session lock outlives its last renewal.
    pub(crate) fn lease(&self) -> Duration {
        Duration::from_secs(self.kernel.config.cluster.lease_seconds)
    }

    /// The lanes.
    pub fn lanes(&self) -> &Arc<Lanes> {
        &self.kernel.lanes
    }

    /// Lines the gateway posted through bot accounts, which must not wake other bots.
    pub(crate) fn own_notices(&self) -> &OwnNotices {
        &self.kernel.own_notices
    }

    /// Listeners on replies while they are written (`/v1/chat/completions` streams).
    pub fn taps(&self) -> &Taps {
        &self.kernel.taps
    }

    /// Counters for `/metrics`.
    pub fn metrics(&self) -> &Metrics {
        &self.kernel.metrics
    }

    /// The live event stream (`/api/events`).
    pub fn events(&self) -> &Events {
        &self.kernel.events
    }

    /// A guard (`bot_messages`, `inbound_rate`, `lanes`, `sessions_send`, `chain`) refused
    /// something `bot` asked for, for `reason`, in `chat` (`<platform>:<chat>`) when there is
    /// one: kept an hour for `/baton status` and announced on the event stream.
    pub fn refused(
        &self,
        guard: &'static str,
        reason: &'static str,
        chat: Option<ChatKey>,
        bot: &BotId,
    ) {
        self.kernel.events.emit(Event::GuardRefused {
            guard: guard.to_owned(),
            reason: reason.to_owned(),
            bot: bot.clone(),
            chat: chat.clone(),
        });
        self.kernel.metrics.refused(guard, reason, chat);
    }

    /// Every pipeline run and background turn, so a shutdown can drain them.
    pub fn tasks(&self) -> &TaskTracker {
        &self.kernel.tasks
    }

    /// The longest `bot`'s backend may take for a turn: its own `turn_timeout_seconds`, else
    /// `gateway.turn_timeout_seconds`.
    pub fn turn_limit(&self, bot: &crate::roster::Bot) -> Duration {
        bot.config
            .turn_timeout_seconds
            .map_or(self.kernel.turn_limit, Duration::from_secs)
    }

    /// Who must be handed `account`'s posts, where its platform does not deliver them to the
    /// other bots (`src/post/handover.rs`).
    pub(crate) fn handover(&self, account: &Account) -> Handover {
        let accounts = self.kernel.roster.accounts().iter().map(|a| &a.adapter);
        Handover::of(
            &*account.adapter,
            account.bot.id(),
            accounts,
            Arc::clone(&self.kernel.run_handed_over),
        )
    }

    /// The agent tools for a turn taken as `caller`.
    pub(crate) fn tools_for(&self, caller: Caller) -> Box<dyn ToolExecutor> {
        (self.kernel.bind_tools)(self.clone(), caller)
    }
}

#[cfg(test)]
mod tests {
    use crate::gateway::testing::{echo_config, parts};

    /// A bot's own `turn_timeout_seconds` wins over `[gateway] turn_timeout_seconds`.
    #[tokio::test]
    async fn a_bot_s_own_turn_limit_wins_over_the_gateway_s() {
        let gw = parts(&echo_config(
            &["alpha", "beta"],
            "turn_timeout_seconds = 5\n",
        ))
        .await;
        let roster = gw.engine.roster();
        let (alpha, beta) = (&roster.bots()[0], &roster.bots()[1]);
        let gateway = gw.engine.config().gateway.turn_timeout_seconds;
        assert_eq!(gw.engine.turn_limit(alpha).as_secs(), gateway);
        assert_eq!(gw.engine.turn_limit(beta).as_secs(), 5);
    }

    /// Every clone is the same engine: a drain begun through one is seen by all.
    #[tokio::test]
    async fn clones_are_one_engine() {
        let gw = parts(&echo_config(&["alpha"], "")).await;
        let clone = gw.engine.clone();
        assert!(!gw.engine.tasks().is_closed());
        clone.tasks().close();
        assert!(gw.engine.tasks().is_closed());
    }
}
