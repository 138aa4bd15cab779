//! The pipeline benchmark (issue 9): the real gateway in-process, fed by an in-memory adapter,
//! on the echo backend and a real SQLite file; plus the `baton` binary itself for startup time
//! and idle memory. Run it with
//!
//! ```text
//! cargo bench --bench pipeline                # everything (a few minutes on 2 cores)
//! cargo bench --bench pipeline -- throughput  # only the sections named
//! cargo bench --bench pipeline -- --postgres throughput latency b2b a2a  # on PostgreSQL
//! cargo bench --bench pipeline -- --postgres --durable throughput   # syncing every commit
//! cargo bench --bench pipeline -- --postgres instances    # 1, 2 and 3 gateways on one database
//! ```
//!
//! `--postgres` runs the in-process gateways on a new database each of the throwaway PostgreSQL
//! cluster the store's tests start (Debian's server binaries, a Unix socket, `fsync=off` and
//! `synchronous_commit=off`: see BENCHMARKS.md for what that means for the figures); with
//! `--durable`, of a cluster that syncs every commit (its files under `TMPDIR`, the local disk by
//! default). `wal`, `startup`, `rss` and `events` are SQLite-only and skipped there; `instances`
//! is PostgreSQL-only: the 80/20 mix over 1000 chats split among N in-process gateways, each
//! an instance of its own (`[cluster] instance_id`) with a bot of its own, all on one database
//! (`BATON_BENCH_INSTANCES=N` for one N instead of 1, 2 and 3).
//!
//! Sections: `throughput` (the 80/20 mix over 1, 10 and 1000 chats), `kinds` (only chatter,
//! only mentions), `sizes` (bytes of one pipeline run's future), `latency`, `b2b` (a person
//! writes `@snark ask @caid: ping N`: snark's `sessions_send` to caid, caid's answer on the
//! nested lane, snark's post), `a2a` (the same round trip with snark's `sessions_send` to
//! `a2a:caid-a2a`, an `[[a2a.peers]]` that is this gateway's own `/a2a/caid` over loopback HTTP
//! with the API token: baton's outbound A2A client, its inbound A2A server, caid's turn and the
//! answer back; every round trip checked to have gone out and come in over A2A), `sessions`,
//! `wal` (WAL and database size under sustained load), `startup`, `rss`, `events` (throughput
//! with 10 `/api/events` readers attached, each a process of its own, and with none,
//! alternating). `BATON_BENCH_EVENTS=N` sets the number of events per throughput run (for
//! profiling under callgrind),
//! `BATON_BENCH_ROUND_TRIPS=N` the number of `b2b` and `a2a` round trips (for profiles),
//! `BATON_BENCH_LATENCY_EVENTS=N` the events of the `latency` run (10,000 by default: 2,000
//! replies, so its p99 is the 20th slowest; a longer run steadies it),
//! `BATON_BENCH_BUDGETS=N` adds N `[[budgets]]` that count every call,
//! `BATON_BENCH_LANES=N` the `[lanes] main` and `nested` slots (default 4, the config default),
//! `BATON_BENCH_READERS=N` one `events` run with N readers instead of the rounds, and
//! `BATON_BENCH_SOAK_RATE=N` / `BATON_BENCH_SOAK_SECONDS=N` the `wal` soak's load;
//! `OTEL_EXPORTER_OTLP_ENDPOINT` exports every run's traces to that collector.
//! BENCHMARKS.md at the repository root explains each figure and records the last run.
//!
//! Built as a test (`cargo test --all-targets`), cargo runs it without `--bench`: it then runs
//! every section once at a tiny size, as a smoke test that the harness still works, and exits.

mod adapter;
mod process;
mod rig;
mod scenarios;
mod wal;
mod watchers;

use std::time::Duration;

use process::Accounts;
use scenarios::Via;

/// How big each section is.
struct Sizes {
    warmup: usize,
    events: usize,
    latency_events: usize,
    round_trips: usize,
    sessions: usize,
    startup_runs: usize,
    idle: Duration,
    soak_seconds: u64,
}

const FULL: Sizes = Sizes {
    warmup: 5_000,
    events: 100_000,
    latency_events: 10_000,
    round_trips: 5_000,
    sessions: 10_000,
    startup_runs: 9,
    idle: Duration::from_secs(3),
    soak_seconds: 60,
};

const SMOKE: Sizes = Sizes {
    warmup: 20,
    events: 200,
    latency_events: 50,
    round_trips: 20,
    sessions: 50,
    startup_runs: 1,
    idle: Duration::from_millis(10),
    soak_seconds: 1,
};

/// Events per second offered in the `wal` soak (`BATON_BENCH_SOAK_RATE=N` to change).
const SOAK_RATE: u64 = 1000;

/// One mention in five messages: see BENCHMARKS.md for why.
const MENTION_EVERY: usize = 5;

/// The allocator `baton` runs with (`src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, url] = args.as_slice()
        && flag == watchers::READER_FLAG
    {
        watchers::read_stream(url);
        return;
    }
    let bench = args.iter().any(|a| a == "--bench");
    let postgres = args.iter().any(|a| a == "--postgres");
    if postgres {
        rig::use_postgres(args.iter().any(|a| a == "--durable"));
    }
    let sections: Vec<&str> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(String::as_str)
        .collect();
    let sqlite_only = ["wal", "startup", "rss", "events"];
    let wanted = |name: &str| {
        (sections.is_empty() || sections.contains(&name))
            && !(postgres && sqlite_only.contains(&name))
            && (postgres || name != "instances")
    };
    println!("# store: {}", rig::engine());
    // `OTEL_EXPORTER_OTLP_ENDPOINT` set: every gateway exports its traces there, as `baton run`
    // does (the traces' cost, BENCHMARKS.md). Flushed when the run ends.
    let traces = baton::trace::start(None, "bench").expect("the OTEL_* variables are valid");
    println!(
        "# traces: {}",
        if traces.is_some() { "exported" } else { "off" }
    );
    let mut sizes = if bench { FULL } else { SMOKE };
    if let Some(events) = env_number("BATON_BENCH_EVENTS") {
        sizes.events = events;
        sizes.warmup = sizes.warmup.min(events);
    }
    if let Some(events) = env_number("BATON_BENCH_LATENCY_EVENTS") {
        sizes.latency_events = events;
    }
    if let Some(trips) = env_number("BATON_BENCH_ROUND_TRIPS") {
        sizes.round_trips = trips;
    }
    let lanes = env_number("BATON_BENCH_LANES").unwrap_or(4);
    if let Some(seconds) = env_number("BATON_BENCH_SOAK_SECONDS") {
        sizes.soak_seconds = seconds as u64;
    }
    let soak_rate = env_number("BATON_BENCH_SOAK_RATE").map_or(SOAK_RATE, |r| r as u64);

    // The same runtime `baton run` uses: multi-threaded, a worker per core but the writer's.
    let runtime = baton::gateway::runtime().expect("tokio runtime");
    if wanted("sizes") {
        let size = runtime.block_on(scenarios::pipeline_future_size());
        println!("## the future of one pipeline run (Dispatcher::handle): {size} bytes");
    }
    if wanted("throughput") {
        println!("## throughput ({lanes} main-lane slots, 1 mention in {MENTION_EVERY})");
        for chats in [1, 10, 1000] {
            let run = runtime.block_on(scenarios::throughput(
                chats,
                sizes.warmup,
                sizes.events,
                MENTION_EVERY,
                lanes,
                0,
            ));
            println!(
                "chats {chats:>4}: {:>8.0} events/s ({} events, {} answered, {:.2} s, {} commits, {:.1} writes/commit, {:.2} writes/event)",
                run.rate(),
                run.events,
                run.mentions,
                run.elapsed.as_secs_f64(),
                run.commits,
                run.jobs as f64 / run.commits.max(1) as f64,
                run.jobs as f64 / run.events as f64,
            );
        }
    }
    if wanted("instances") {
        println!(
            "## instances on one database (1000 chats, {lanes} main-lane slots each, 1 mention in {MENTION_EVERY})"
        );
        let counts = env_number("BATON_BENCH_INSTANCES").map_or(vec![1, 2, 3], |n| vec![n]);
        for instances in counts {
            let run = runtime.block_on(scenarios::throughput_instances(
                instances,
                1000,
                sizes.warmup,
                sizes.events,
                MENTION_EVERY,
                lanes,
            ));
            println!(
                "instances {instances}: {:>8.0} events/s together ({} events, {} answered, {:.2} s, {} commits, {:.1} writes/commit)",
                run.rate(),
                run.events,
                run.mentions,
                run.elapsed.as_secs_f64(),
                run.commits,
                run.jobs as f64 / run.commits.max(1) as f64,
            );
        }
    }
    if wanted("kinds") {
        for (label, every) in [("only chatter", 0), ("only mentions", 1)] {
            let run = runtime.block_on(scenarios::throughput(
                1000,
                sizes.warmup,
                sizes.events,
                every,
                lanes,
                0,
            ));
            println!(
                "chats 1000, {label}: {:>8.0} events/s ({} events, {:.2} s, {} commits, {:.2} writes/event)",
                run.rate(),
                run.events,
                run.elapsed.as_secs_f64(),
                run.commits,
                run.jobs as f64 / run.events as f64,
            );
        }
    }
    if wanted("events") {
        println!(
            "## throughput with /api/events readers (1000 chats, 1 mention in {MENTION_EVERY})"
        );
        // `BATON_BENCH_READERS=N`: one run with N readers (to profile one case alone).
        let (rounds, cases) = match env_number("BATON_BENCH_READERS") {
            Some(n) => (1, vec![n]),
            None => (3, vec![0, 10]),
        };
        for round in 1..=rounds {
            for &watchers in &cases {
                let run = runtime.block_on(scenarios::throughput(
                    1000,
                    sizes.warmup,
                    sizes.events,
                    MENTION_EVERY,
                    lanes,
                    watchers,
                ));
                println!(
                    "round {round}, {watchers:>2} readers: {:>8.0} events/s ({} events, {:.2} s; readers got {} stream events, {} dropped for falling behind)",
                    run.rate(),
                    run.events,
                    run.elapsed.as_secs_f64(),
                    run.streamed,
                    run.readers_dropped,
                );
            }
        }
    }
    if wanted("latency") {
        let loaded = runtime.block_on(scenarios::latency(
            1000,
            sizes.latency_events,
            1000,
            MENTION_EVERY,
        ));
        println!(
            "## latency at {:.0} events/s offered, 1000 chats",
            loaded.offered
        );
        for (what, l) in [("ack  ", &loaded.ack), ("reply", &loaded.reply)] {
            println!(
                "{what}: p50 {:>8.3} ms  p95 {:>8.3} ms  p99 {:>8.3} ms  max {:>8.3} ms  (n = {})",
                ms(l.p50),
                ms(l.p95),
                ms(l.p99),
                ms(l.max),
                l.count
            );
        }
    }
    for (section, via, title, to) in [
        ("b2b", Via::Local, "bot-to-bot", ""),
        ("a2a", Via::A2a, "A2A", " to this gateway's own /a2a/caid"),
    ] {
        if !wanted(section) {
            continue;
        }
        let trips = runtime.block_on(scenarios::round_trips(100, sizes.round_trips, lanes, via));
        println!(
            "## {title}: {:.0} sessions_send round trips/s{to} ({} in {:.2} s, 100 chats, {:.1} writes and {:.2} commits/round trip)",
            trips.rate(),
            trips.count,
            trips.elapsed.as_secs_f64(),
            trips.jobs as f64 / trips.count as f64,
            trips.commits as f64 / trips.count as f64,
        );
    }
    if wanted("sessions") {
        let memory = runtime.block_on(scenarios::session_memory(sizes.sessions, 2));
        let per = memory.per_step as f64;
        let mut before = memory.baseline;
        println!("## sessions: RSS {} KiB after warm-up", memory.baseline);
        for (step, rss) in memory.steps.iter().enumerate() {
            let delta = rss.saturating_sub(before);
            println!(
                "+{} sessions: RSS {rss} KiB (+{delta} KiB, {:.0} bytes/session)",
                memory.per_step * (step + 1),
                delta as f64 * 1024.0 / per
            );
            before = *rss;
        }
    }
    if wanted("wal") {
        // The default bound, then one out of reach: the log as it grew before it had a bound.
        for limit_mb in [64, 1024 * 1024] {
            let soak = runtime.block_on(wal::soak(
                soak_rate,
                sizes.soak_seconds,
                1000,
                MENTION_EVERY,
                limit_mb,
            ));
            print_soak(&soak, soak_rate, limit_mb);
        }
    }
    drop(runtime);
    for accounts in [Accounts::Local, Accounts::Platforms] {
        if wanted("startup") {
            let startup = process::startup(accounts, sizes.startup_runs);
            println!(
                "## startup to /readyz, {}: new database median {:.1} ms (min {:.1}, max {:.1}); existing database median {:.1} ms (min {:.1}, max {:.1}); {} runs each",
                accounts.describe(),
                ms(median(&startup.fresh)),
                ms(*startup.fresh.iter().min().expect("runs")),
                ms(*startup.fresh.iter().max().expect("runs")),
                ms(median(&startup.existing)),
                ms(*startup.existing.iter().min().expect("runs")),
                ms(*startup.existing.iter().max().expect("runs")),
                sizes.startup_runs,
            );
        }
        if wanted("rss") {
            let kib = process::idle_rss(accounts, sizes.idle);
            println!(
                "## idle RSS, {}: {kib} KiB ({:.1} MiB) after {:?} idle",
                accounts.describe(),
                kib as f64 / 1024.0,
                sizes.idle
            );
        }
    }
}

fn print_soak(soak: &wal::Soak, rate: u64, limit_mb: u64) {
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    println!(
        "## wal: store.wal_limit_mb = {limit_mb}; {rate} events/s offered for {} events, \
         1000 chats, 1 mention in {MENTION_EVERY}, one reader ({} transcript reads)",
        soak.events, soak.reads
    );
    for s in &soak.samples {
        println!(
            "t {:>5.1} s  events {:>6}  wal {:>8.2} MiB  db {:>8.2} MiB",
            s.at.as_secs_f64(),
            s.events,
            mib(s.wal),
            mib(s.db)
        );
    }
    let largest = soak.samples.iter().map(|s| s.wal).max().unwrap_or(0);
    let empty = soak.samples.first().map_or(0, |s| s.db);
    let grown = soak.db_after_stop.saturating_sub(empty);
    println!(
        "largest WAL sampled {:.2} MiB; after a clean stop: wal {} bytes, db {:.2} MiB, \
         {:.1} KiB of database per 1,000 messages",
        mib(largest),
        soak.wal_after_stop,
        mib(soak.db_after_stop),
        grown as f64 / 1024.0 / (soak.events as f64 / 1000.0)
    );
}

fn env_number(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(runs: &[Duration]) -> Duration {
    let mut sorted = runs.to_vec();
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
}
