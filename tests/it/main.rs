//! Every integration test, in one binary: a module per area, all sharing the fakes in
//! `tests/support/`. One binary compiles the fakes once and links the crate once, where a binary
//! per file did both thirty times over.
//!
//! The tests run in parallel threads of this one process, so none may change what the process
//! shares: no `std::env::set_var`, no `set_current_dir`, no signal handler, no fixed port, no
//! file at a fixed path. A test that starts `baton` gives the child its own environment and
//! working directory ([`support::process::baton`]); each test has its own temporary directory,
//! store and PostgreSQL database.
//!
//! No test here needs a process of its own. The measurements (`idle_rss::`, the ignored
//! `backend_agents::` overhead figures) read a child `baton`'s `/proc/<pid>`, never this
//! process's; the fault tests send signals and file size limits to their children only. A test
//! that must own the process (one that sets the environment, installs a signal handler or
//! measures its own memory) goes in a file of its own directly under `tests/`, saying why.
//!
//! One area: `cargo test --test it slack::`; tests whose names start alike: `cargo test --test it
//! failover::a_kill_9`. The platform modules need their adapter built in (the crate's features of
//! the same names, on by default).

#[path = "../support/mod.rs"]
mod support;

mod a2a;
mod access;
mod admin;
mod artifacts;
mod backend_agents;
mod backend_openai;
mod bot_to_bot;
mod budgets;
mod chains;
mod chat_completions;
mod cli;
mod cluster;
mod cluster_faults;
mod cluster_flows;
mod connections;
mod dashboard;
#[cfg(feature = "discord")]
mod discord;
mod disk;
mod escalation;
mod export;
mod failover;
mod faults;
mod feedback;
#[cfg(feature = "feishu")]
mod feishu;
mod files_in;
mod files_out;
mod handoff;
mod idle_rss;
mod mcp;
mod memory_bounds;
mod pipeline;
mod postgres_lost;
mod readme;
mod schedule;
#[cfg(feature = "slack")]
mod slack;
#[cfg(feature = "telegram")]
mod telegram;
mod traces;
mod why;
