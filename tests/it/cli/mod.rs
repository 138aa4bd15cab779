//! The real `baton` binary, end to end, on loopback and in temporary directories:
//! `check` (good and broken configs), `run` (HTTP, a local room, SIGTERM), `transcript`,
//! `sessions`, `chat`, `setup`, `doctor`, what a missing config file gets, and the deployment
//! files of deploy/.
//!
//! Nothing here sleeps to synchronise: every wait polls for the awaited state with a deadline.

mod check;
mod deploy;
mod docs;
mod doctor;
mod run;
mod setup;
mod store_commands;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::process::{
    EXIT_DEADLINE, Running, START_DEADLINE, STEP_DEADLINE, baton, demo_config, eventually, output,
    show,
};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stdout and stderr together, for "the output mentions X" checks.
fn all_output(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
