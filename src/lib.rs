//! baton: a gateway that puts many AI bots into group chats and keeps them well-behaved.
//!
//! Modules follow the pipeline (`docs/behaviour.md`): an adapter normalizes an event, the
//! [`dispatcher`] runs it through dedupe, self-drop, [`admin`], policy, activation, the
//! [`guards`], the [`lanes`] and a [`backend`]; the [`outcome`] decides reply or silence;
//! [`post`] posts it; [`mirror`] records it all in the [`store`]. Chains (ordered turn-taking
//! among bots) live in `chains`.

pub mod admin;
pub mod backend;
pub mod bot_id;
pub mod budget;
pub(crate) mod chains;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod dispatcher;
pub mod display_name;
pub mod engine;
pub(crate) mod escalation;
pub mod events;
pub mod field_bound;
pub mod gateway;
pub mod guards;
pub mod http;
pub mod lanes;
pub mod local;
pub mod media_type;
pub mod metrics;
pub mod mirror;
pub mod outcome;
pub mod post;
pub mod relay;
pub mod roster;
pub mod schedule;
pub mod session;
pub mod store;
pub mod timing;
pub mod tools;
