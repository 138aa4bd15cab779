//! The service handle every flow that takes turns stands on: the resolved config, the roster,
//! the store, the guards, the lanes, the counters and the task tracker, built once by the
//! gateway. Cheap to share (`Arc<Services>`); its parts are reached through accessors, so what
//! it holds can change without touching its users.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use baton_contract::{AccountId, ChatKey, UserId};
use tokio_util::task::TaskTracker;

use super::Caller;
use super::own_notices::OwnNotices;
use super::taps::Taps;
use super::waiters::Waiters;
use crate::backend::ToolExecutor;
use crate::bot_id::BotId;
use crate::budget::Budgets;
use crate::config::Config;
use crate::events::{Event, Events};
use crate::guards::{Guards, KeyedLimiter};
use crate::lanes::Lanes;
use crate::metrics::Metrics;
use crate::post::{Handover, RunHandedOver};
use crate::roster::{Account, ChatRules, Roster, glob_set};
use crate::store::Store;
use crate::timing::{Board, Zone};

/// Gives a turn its agent tools, bound to the turn's caller. The one place a turn reaches up:
/// a tool may run turns of its own (`sessions_send`, chains), so the tools stand above the
/// engine, and the gateway hands the engine this function when it builds it (`tools::bind`).
pub type BindTools = fn(Arc<Services>, Caller) -> Box<dyn ToolExecutor>;

/// Everything the turn-taking flows share. Built once by [`crate::gateway`].
pub struct Services {
    config: Arc<Config>,
    roster: Roster,
    chat_rules: ChatRules,
    store: Store,
    budgets: Budgets,
    guards: Guards,
    lanes: Arc<Lanes>,
    /// Policy refusal notices: at most one per sender per account every 10 minutes.
    notices: KeyedLimiter<(AccountId, UserId)>,
    /// "Busy" notices when a turn's queue is full: at most one per chat a minute.
    busy_notices: KeyedLimiter<ChatKey>,
    own_notices: OwnNotices,
    waiters: Waiters,
    taps: Taps,
    metrics: Metrics,
    events: Events,
    board: Board,
    tasks: TaskTracker,
    bind_tools: BindTools,
    turn_limit: Duration,
    /// Runs a sibling post handed over to another bot through the pipeline (wired by the
    /// gateway once its dispatcher exists: the pipeline stands above the engine).
    run_handed_over: OnceLock<RunHandedOver>,
    chain_turn_limit: Duration,
    running: super::Running,
}

impl Services {
    /// Assemble the services. `zone` is the gateway's clock (`gateway.timezone`), parsed once
    /// by the gateway's build; `bind_tools` gives each turn its tools. Fails only on an `[agent_to_agent] allow` glob that does not
    /// compile (validation reports those first).
    pub fn new(
        config: Arc<Config>,
        roster: Roster,
        chat_rules: ChatRules,
        store: Store,
        zone: Zone,
        bind_tools: BindTools,
    ) -> Result<Services, globset::Error> {
        let clock = governor::clock::DefaultClock::default();
        let a2a_allow = glob_set(&config.agent_to_agent.allow)?;
        let instance = config.cluster.instance_id.as_deref().unwrap_or("local");
        let budgets = Budgets::new(&config, store.clone(), instance);
        Ok(Services {
            budgets,
            guards: Guards::new(
                &config.limits,
                &config.agent_to_agent,
                a2a_allow,
                clock.clone(),
            ),
            lanes: Lanes::new(&config.lanes),
            notices: KeyedLimiter::per_window(1, Duration::from_secs(600), clock.clone()),
            busy_notices: KeyedLimiter::per_window(1, Duration::from_secs(60), clock),
            own_notices: OwnNotices::default(),
            waiters: Waiters::default(),
            taps: Taps::default(),
            metrics: Metrics::default(),
            events: Events::default(),
            board: Board::new(zone),
            tasks: TaskTracker::new(),
            bind_tools,
            run_handed_over: OnceLock::new(),
            turn_limit: Duration::from_secs(config.gateway.turn_timeout_seconds),
            chain_turn_limit: Duration::from_secs(config.chains.turn_timeout_seconds),
            running: super::Running::default(),
            config,
            roster,
            chat_rules,
            store,
        })
    }

    /// The validated config.
    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    /// Bots and accounts.
    pub fn roster(&self) -> &Roster {
        &self.roster
    }

    /// Per-chat policy.
    pub fn chat_rules(&self) -> &ChatRules {
        &self.chat_rules
    }

    /// The turns running here: `/baton stop`, a shutdown's cancel, the agents' MCP tokens.
    pub fn running(&self) -> &super::Running {
        &self.running
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The budgets every model call is checked against and charged to.
    pub fn budgets(&self) -> &Budgets {
        &self.budgets
    }

    /// Inbound and send guards.
    pub fn guards(&self) -> &Guards {
        &self.guards
    }

    /// This instance's `cluster.instance_id` (set at start; `local` for a gateway assembled
    /// without starting, as unit tests do).
    pub(crate) fn instance(&self) -> &str {
        self.config
            .cluster
            .instance_id
            .as_deref()
            .unwrap_or("local")
    }

    /// `cluster.lease_seconds`: how long a lease or session lock outlives its last renewal.
    pub(crate) fn lease(&self) -> Duration {
        Duration::from_secs(self.config.cluster.lease_seconds)
    }

    /// The lanes.
    pub fn lanes(&self) -> &Arc<Lanes> {
        &self.lanes
    }

    /// Policy refusal notices: at most one per sender per account every 10 minutes.
    pub(crate) fn notices(&self) -> &KeyedLimiter<(AccountId, UserId)> {
        &self.notices
    }

    /// "Busy" notices when a turn's queue is full: at most one per chat a minute.
    pub(crate) fn busy_notices(&self) -> &KeyedLimiter<ChatKey> {
        &self.busy_notices
    }

    /// Lines the gateway posted through bot accounts, which must not wake other bots.
    pub(crate) fn own_notices(&self) -> &OwnNotices {
        &self.own_notices
    }

    /// `sessions_send` runs whose senders may be waiting for the reply.
    pub fn waiters(&self) -> &Waiters {
        &self.waiters
    }

    /// Listeners on replies while they are written (`/v1/chat/completions` streams).
    pub fn taps(&self) -> &Taps {
        &self.taps
    }

    /// Counters for `/metrics`.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The live event stream (`/api/events`).
    pub fn events(&self) -> &Events {
        &self.events
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
        self.events.emit(Event::GuardRefused {
            guard: guard.to_owned(),
            reason: reason.to_owned(),
            bot: bot.clone(),
            chat: chat.clone(),
        });
        self.metrics.refused(guard, reason, chat);
    }

    /// When each bot's heartbeat and cron entries fall due next (written by the scheduler).
    pub fn board(&self) -> &Board {
        &self.board
    }

    /// Every pipeline run and background turn, so a shutdown can drain them.
    pub fn tasks(&self) -> &TaskTracker {
        &self.tasks
    }

    /// The longest `bot`'s backend may take for a turn: its own `turn_timeout_seconds`, else
    /// `gateway.turn_timeout_seconds`.
    pub fn turn_limit(&self, bot: &crate::roster::Bot) -> Duration {
        bot.config
            .turn_timeout_seconds
            .map_or(self.turn_limit, Duration::from_secs)
    }

    /// Wire how handed-over sibling posts reach the pipeline (once; later calls are ignored).
    pub fn wire_handover(&self, run: RunHandedOver) {
        let _ = self.run_handed_over.set(run);
    }

    /// Who must be handed `account`'s posts, where its platform does not deliver them to the
    /// other bots (`src/post/handover.rs`).
    pub(crate) fn handover(&self, account: &Account) -> Handover {
        let Some(run) = self.run_handed_over.get() else {
            return Handover::none();
        };
        let accounts = self.roster.accounts().iter().map(|a| &a.adapter);
        Handover::of(
            &*account.adapter,
            account.bot.id(),
            accounts,
            Arc::clone(run),
        )
    }

    /// The longest a chain participant's turn may take (`chains.turn_timeout_seconds`).
    pub fn chain_turn_limit(&self) -> Duration {
        self.chain_turn_limit
    }

    /// The agent tools for a turn taken as `caller`.
    pub(crate) fn tools_for(self: &Arc<Self>, caller: Caller) -> Box<dyn ToolExecutor> {
        (self.bind_tools)(Arc::clone(self), caller)
    }
}
