//! Time as the config states it: cron expressions, `every` intervals, the gateway's zone, quiet
//! hours, where a scheduled turn happens, and the board of next due times.
//!
//! Plain values with no I/O, below the config: validation parses them to report problems with
//! their keys, the gateway's build parses them once into the scheduler's jobs, and the
//! scheduler (`crate::schedule`) only reads them.

mod board;
mod clock;
mod cron;
mod every;
mod quiet_hours;
mod span;
mod target;
mod zone;

pub use board::{Board, NextDue};
pub use clock::now_ms;
pub use cron::Schedule;
pub use every::parse_every;
pub use quiet_hours::QuietHours;
pub use span::{parse_age, parse_span};
pub use target::Place;
pub use zone::Zone;
