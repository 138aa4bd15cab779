//! Helpers shared by the integration tests: fakes of the services baton talks to, on loopback.
//!
//! Each test binary compiles this module and uses only part of it, hence the allowances.
#![allow(dead_code, unreachable_pub)]

pub mod chain_steps;
pub mod fake_discord;
pub mod fake_feishu;
pub mod fake_openai;
pub mod fake_slack;
pub mod fake_telegram;
pub mod gateway;
pub mod instances;
pub mod left_over;
pub mod multipart;
pub mod postgres;
pub mod process;
pub mod raw_http;
pub mod seen;
pub mod shelf;
pub mod turns;
pub mod uploads;
pub mod world;
