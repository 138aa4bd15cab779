//! Helpers shared by the integration tests: fakes of the services baton talks to, on loopback.
//!
//! Compiled once, into the one integration-test binary (`tests/it/`). Some helpers serve only the
//! platform modules, which a build without their feature leaves out, hence `dead_code`.
#![allow(dead_code, unreachable_pub)]

pub mod browser;
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
pub mod otlp;
pub mod postgres;
pub mod process;
pub mod raw_http;
pub mod seen;
pub mod shelf;
pub mod spans;
pub mod turns;
pub mod uploads;
pub mod world;
