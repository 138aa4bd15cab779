//! baton: a gateway that puts many AI bots into group chats and keeps them well-behaved.
//!
//! Modules follow the pipeline (`docs/behaviour.md`): an adapter normalizes an event, the
//! [`dispatcher`] runs it through dedupe, self-drop, [`admin`], policy, activation, the
//! [`guards`], the [`lanes`] and a [`backend`]; the [`outcome`] decides reply or silence;
//! [`post`] posts it; the [`engine`]'s journal records it all in the [`store`] through the
//! run's [`pen`]. Chains (ordered turn-taking among bots) live in `chains`.
//!
//! The modules are listed by layer, top down, as `docs/design.md` ("Layers") draws them:
//! arrows point down only.

// The composition root and its front doors: `baton`, the gateway that builds every component
// once, HTTP (routes, dashboard, webhooks, MCP).
pub mod cli;
pub mod gateway;
pub mod http;

// The inbound pipeline: one list of typed steps.
pub mod dispatcher;

// Commands, and what a turn may call: `/baton` commands, agent tools, escalations.
pub mod admin;
pub(crate) mod escalation;
pub mod tools;

// The flows that take turns: `sessions_send`, chains, heartbeats and cron.
pub(crate) mod chains;
pub mod relay;
pub mod schedule;

// The turn kernel: the one session turn, `say`, the `Engine` handle.
pub mod engine;

// Below the engine: backends, posting, the run's pen on the transcript, budgets, guards, lanes, the local
// channel, the roster, time, the store, the config, counters and the live event stream.
pub mod backend;
pub mod budget;
pub mod cluster;
pub mod config;
pub mod events;
pub mod export;
pub mod field_bound;
pub mod guards;
pub mod lanes;
pub mod local;
pub mod metrics;
pub mod outcome;
pub mod pen;
pub mod post;
pub mod roster;
pub mod store;
pub mod timing;
pub mod trace;
pub mod why;

// Values every layer shares.
pub mod bot_id;
pub mod display_name;
pub mod media_type;
pub mod session;
