//! The async runtime a gateway runs on: one tokio worker per core but one.
//!
//! The store's writer is a thread of its own (`store/writer.rs`), and under load it is busy
//! as much as a worker is. With tokio's default of a worker per core, a busy gateway had one
//! more busy thread than cores: the kernel switched them in and out of the cores at every
//! store commit and every wake-up, and a third of the CPU went to the kernel. With a core left
//! for the writer, the same load went through 10-20% faster on 2 cores, and the latency from
//! a message to its reply fell (BENCHMARKS.md, "Speed work, eighteenth session").
//!
//! `TOKIO_WORKER_THREADS=N` still sets the number of workers (tokio reads it), for a machine
//! whose cores are shared with other work, or a gateway on PostgreSQL whose writer mostly
//! waits on the server.

use std::num::NonZeroUsize;

use tokio::runtime::{Builder, Runtime};

/// The environment variable tokio takes its worker count from when it is set.
const WORKERS_ENV: &str = "TOKIO_WORKER_THREADS";

/// The multi-threaded runtime `baton` runs every command on, with [`workers_for`] the
/// machine's cores (unless `TOKIO_WORKER_THREADS` says otherwise).
pub fn runtime() -> std::io::Result<Runtime> {
    let mut builder = Builder::new_multi_thread();
    builder.enable_all();
    if std::env::var_os(WORKERS_ENV).is_none() {
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        builder.worker_threads(workers_for(cores));
    }
    builder.build()
}

/// How many tokio workers a machine with `cores` cores runs: one per core, less the one the
/// store writer keeps busy, and never none.
fn workers_for(cores: usize) -> usize {
    cores.saturating_sub(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_core_is_left_for_the_store_writer_but_there_is_always_a_worker() {
        assert_eq!(workers_for(1), 1);
        assert_eq!(workers_for(2), 1);
        assert_eq!(workers_for(4), 3);
        assert_eq!(workers_for(16), 15);
    }
}
