//! A2A 1.0 inbound (SPEC 14): every exposed bot is an Agent2Agent agent, over both bindings the
//! official SDK clients speak, JSON-RPC (`POST /a2a/<bot>`) and HTTP+JSON
//! (`/a2a/<bot>/message:send`, `/a2a/<bot>/tasks/<id>`, ...).
//!
//! A task is a durable delivery (`relay::send`) from the external agent to the bot, not a
//! second delivery system: the task id is the delivery's run id, the context id its target
//! session, a repeated `messageId` is the delivery's idempotency key (so it finds the same
//! task), and the task's state is the delivery's row's (read, or as a run that ended here
//! handed its committed outcome over). A restart therefore loses no task, and on PostgreSQL any
//! instance answers for any task. A question the bot asks in a task makes it `input-required`
//! until the caller answers on it (`relay/task_resume.rs`).
//!
//! Each operation is one core (`tasks.rs`, `stream.rs`) taking the protocol's request JSON and
//! giving its response JSON or an [`error::A2aError`]; `jsonrpc.rs` and `rest.rs` only say where
//! a request's parts are and how an answer or an error is framed.

mod addressed;
mod card;
mod error;
mod jsonrpc;
mod message;
mod pages;
mod rest;
mod stream;
mod tasks;
mod version;
mod wire;

pub(super) use card::{Agents, bot_card, cards, is_card};
pub(super) use jsonrpc::rpc;
pub(super) use rest::{list_tasks, send_message, stream_message, task_call};
