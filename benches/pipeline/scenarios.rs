//! The in-process measurements: throughput, latency under a fixed load, bot-to-bot round
//! trips, and memory per session. Each starts its own gateway on a new database.

use std::time::{Duration, Instant};

use super::rig::{
    API_TOKEN_VAR, Kind, Rig, Setup, free_port, group_message, is_port_taken, kind_of,
};
use super::watchers::Watchers;

/// The one bot of the single-bot scenarios.
pub(crate) const BOT: &str = "snark";

/// How long any one phase may take before the benchmark gives up on it.
const PHASE_LIMIT: Duration = Duration::from_secs(600);

/// One throughput run.
pub(crate) struct Throughput {
    /// Events measured (after the warm-up).
    pub(crate) events: usize,
    /// Of which mentioned the bot (and were answered).
    pub(crate) mentions: usize,
    /// Wall-clock time for all of them to go through the pipeline.
    pub(crate) elapsed: Duration,
    /// Writer commits during the run (with the event count: how well writes were batched).
    pub(crate) commits: u64,
    /// Writer jobs committed during the run.
    pub(crate) jobs: u64,
    /// Events the `/api/events` readers received during the run, between them.
    pub(crate) streamed: u64,
    /// Readers dropped for falling behind during the run.
    pub(crate) readers_dropped: u64,
}

impl Throughput {
    /// Events per second.
    pub(crate) fn rate(&self) -> f64 {
        self.events as f64 / self.elapsed.as_secs_f64()
    }
}

/// The message at index `n` of a load spread over `chats` channels with 8 people in each.
fn message(n: usize, chats: usize, mention_every: usize) -> baton_contract::InboundEvent {
    let chat = n % chats;
    let sender = chat * 8 + (n / chats) % 8;
    group_message(n, chat, sender, BOT, kind_of(n, mention_every))
}

fn mentions_in(range: std::ops::Range<usize>, mention_every: usize) -> usize {
    range
        .filter(|n| kind_of(*n, mention_every) == Kind::Mention)
        .count()
}

/// A one-bot rig through `warmup` events of the mix, and the rest up to `total`, built before
/// any clock starts: making events is the platform's work, not the gateway's.
async fn warmed_up(
    lanes: usize,
    warmup: usize,
    total: usize,
    chats: usize,
    mention_every: usize,
) -> (Rig, Vec<baton_contract::InboundEvent>) {
    let rig = Rig::start(&Setup {
        bots: &[BOT],
        lanes,
        bot_keys: "",
        capacity: total,
        extra_toml: "",
        gateway_keys: "",
        port: 0,
    })
    .await;
    let injector = rig.injector(BOT);
    for n in 0..warmup {
        injector.inject(message(n, chats, mention_every));
    }
    assert!(
        rig.wait_done(warmup as u64, PHASE_LIMIT).await,
        "warm-up stalled"
    );
    let batch = (warmup..total)
        .map(|n| message(n, chats, mention_every))
        .collect();
    (rig, batch)
}

/// `events` events over `chats` chats, one in `mention_every` a mention, injected at once
/// (after `warmup` events that are not timed); timed until every one went through the pipeline.
/// `watchers` clients read `/api/events` meanwhile.
pub(crate) async fn throughput(
    chats: usize,
    warmup: usize,
    events: usize,
    mention_every: usize,
    lanes: usize,
    watchers: usize,
) -> Throughput {
    let total = warmup + events;
    let (rig, batch) = warmed_up(lanes, warmup, total, chats, mention_every).await;
    let base = format!("http://{}", rig.gateway.addr().expect("listening"));
    let watchers = Watchers::attach(&base, watchers).await;
    let injector = rig.injector(BOT).clone();
    let commits = rig.gateway.store().commits();
    let jobs = rig.gateway.store().jobs();
    let started = Instant::now();
    for event in batch {
        injector.inject(event);
    }
    assert!(
        rig.wait_done(total as u64, PHASE_LIMIT).await,
        "run stalled"
    );
    let elapsed = started.elapsed();
    let commits = rig.gateway.store().commits() - commits;
    let jobs = rig.gateway.store().jobs() - jobs;
    let counts = watchers.stop().await;
    let mentions = mentions_in(warmup..total, mention_every);
    let answered = rig.recorder.reply_latencies(warmup..total).len();
    assert_eq!(answered, mentions, "every mention answered, nothing else");
    rig.stop().await;
    Throughput {
        events,
        mentions,
        elapsed,
        commits,
        jobs,
        streamed: counts.received,
        readers_dropped: counts.dropped,
    }
}

/// [`throughput`] over 1000 chats split among `instances` gateways on one PostgreSQL
/// database, each an instance of its own with a bot of its own: event `n` goes to gateway
/// `n % instances`. Timed until every one went through its gateway's pipeline.
pub(crate) async fn throughput_instances(
    instances: usize,
    chats: usize,
    warmup: usize,
    events: usize,
    mention_every: usize,
    lanes: usize,
) -> Throughput {
    let total = warmup + events;
    let url = super::rig::new_database().await;
    let bots: Vec<String> = (0..instances).map(|i| format!("snark{i}")).collect();
    let mut rigs = Vec::new();
    for (i, bot) in bots.iter().enumerate() {
        let cluster = format!("\n[cluster]\ninstance_id = \"bench-{i}\"\n");
        let setup = Setup {
            bots: &[bot.as_str()],
            lanes,
            bot_keys: "",
            capacity: total,
            extra_toml: &cluster,
            gateway_keys: "",
            port: 0,
        };
        rigs.push(Rig::start_on(&setup, url.clone()).await);
    }
    let event = |n: usize| {
        let chat = n % chats;
        let sender = chat * 8 + (n / chats) % 8;
        group_message(
            n,
            chat,
            sender,
            &bots[n % instances],
            kind_of(n, mention_every),
        )
    };
    let ours = |i: usize, range: std::ops::Range<usize>| range.filter(move |n| n % instances == i);
    for (i, rig) in rigs.iter().enumerate() {
        for n in ours(i, 0..warmup) {
            rig.injector(&bots[i]).inject(event(n));
        }
    }
    for (i, rig) in rigs.iter().enumerate() {
        let warm = ours(i, 0..warmup).count() as u64;
        assert!(rig.wait_done(warm, PHASE_LIMIT).await, "warm-up stalled");
    }
    let batches: Vec<Vec<_>> = (0..instances)
        .map(|i| ours(i, warmup..total).map(event).collect())
        .collect();
    let store = |rig: &Rig| (rig.gateway.store().commits(), rig.gateway.store().jobs());
    let before: Vec<_> = rigs.iter().map(store).collect();
    let started = Instant::now();
    for ((i, rig), batch) in rigs.iter().enumerate().zip(batches) {
        let injector = rig.injector(&bots[i]);
        for event in batch {
            injector.inject(event);
        }
    }
    for (i, rig) in rigs.iter().enumerate() {
        let all = ours(i, 0..total).count() as u64;
        assert!(rig.wait_done(all, PHASE_LIMIT).await, "run stalled");
    }
    let elapsed = started.elapsed();
    let (mut commits, mut jobs, mut mentions) = (0, 0, 0);
    for ((i, rig), (c, j)) in rigs.iter().enumerate().zip(before) {
        let (c2, j2) = store(rig);
        commits += c2 - c;
        jobs += j2 - j;
        let theirs: Vec<usize> = ours(i, warmup..total)
            .filter(|n| kind_of(*n, mention_every) == Kind::Mention)
            .collect();
        let answered = theirs
            .iter()
            .filter(|n| !rig.recorder.reply_latencies(**n..**n + 1).is_empty())
            .count();
        assert_eq!(answered, theirs.len(), "every mention answered");
        mentions += answered;
    }
    for rig in rigs {
        rig.stop().await;
    }
    Throughput {
        events,
        mentions,
        elapsed,
        commits,
        jobs,
        streamed: 0,
        readers_dropped: 0,
    }
}

/// Percentiles of a latency sample.
pub(crate) struct Latency {
    /// Sample size.
    pub(crate) count: usize,
    /// Median.
    pub(crate) p50: Duration,
    /// 95th percentile: how far the tail is from the 99th.
    pub(crate) p95: Duration,
    /// 99th percentile.
    pub(crate) p99: Duration,
    /// Largest.
    pub(crate) max: Duration,
}

impl Latency {
    fn of(mut ns: Vec<u64>) -> Latency {
        assert!(!ns.is_empty(), "no latencies recorded");
        ns.sort_unstable();
        let at = |q: usize| Duration::from_nanos(ns[(ns.len() * q / 100).min(ns.len() - 1)]);
        Latency {
            count: ns.len(),
            p50: at(50),
            p95: at(95),
            p99: at(99),
            max: Duration::from_nanos(*ns.last().expect("not empty")),
        }
    }
}

/// Added latency at a fixed offered load.
pub(crate) struct Loaded {
    /// The rate actually offered.
    pub(crate) offered: f64,
    /// Injection to acknowledgement (the event is durably claimed; what the platform waits for).
    pub(crate) ack: Latency,
    /// Injection to the reply's first chunk being posted, for mentions (the whole pipeline).
    pub(crate) reply: Latency,
}

/// `events` events at `rate` per second over `chats` chats.
pub(crate) async fn latency(
    chats: usize,
    events: usize,
    rate: u64,
    mention_every: usize,
) -> Loaded {
    let warmup = 1000.min(events);
    let total = warmup + events;
    let (rig, batch) = warmed_up(4, warmup, total, chats, mention_every).await;
    let injector = rig.injector(BOT).clone();
    let period = Duration::from_nanos(1_000_000_000 / rate);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    tick.tick().await;
    let started = Instant::now();
    for event in batch {
        tick.tick().await;
        injector.inject(event);
    }
    let offered = events as f64 / started.elapsed().as_secs_f64();
    assert!(
        rig.wait_done(total as u64, PHASE_LIMIT).await,
        "run stalled"
    );
    let loaded = Loaded {
        offered,
        ack: Latency::of(rig.recorder.ack_latencies(warmup..total)),
        reply: Latency::of(rig.recorder.reply_latencies(warmup..total)),
    };
    rig.stop().await;
    loaded
}

/// Bot-to-bot round trips.
pub(crate) struct RoundTrips {
    /// Completed `ask`s (a `sessions_send` that waited for the other bot's reply).
    pub(crate) count: usize,
    /// Wall-clock time.
    pub(crate) elapsed: Duration,
    /// Writer jobs committed meanwhile.
    pub(crate) jobs: u64,
    /// The batches they were committed in.
    pub(crate) commits: u64,
}

impl RoundTrips {
    /// Round trips per second.
    pub(crate) fn rate(&self) -> f64 {
        self.count as f64 / self.elapsed.as_secs_f64()
    }
}

/// Where snark's `sessions_send` goes in [`round_trips`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// To caid, a bot of the same gateway (`b2b`).
    Local,
    /// To `a2a:caid-a2a`, a `[[a2a.peers]]` that is the same gateway's own inbound A2A endpoint
    /// for caid (`/a2a/caid`) over loopback HTTP, with the API token it requires (`a2a`): baton's
    /// outbound A2A client, its inbound A2A server, caid's turn and the answer back.
    A2a,
}

/// The `[[a2a.peers]]` id of caid's own A2A endpoint.
const LOOPBACK_PEER: &str = "caid-a2a";

impl Via {
    /// The `sessions_send` target snark is asked to call.
    fn target(self) -> String {
        match self {
            Via::Local => "caid".to_owned(),
            Via::A2a => format!("a2a:{LOOPBACK_PEER}"),
        }
    }

    /// The HTTP port the gateway listens on: fixed for [`Via::A2a`], whose peer's URL names it
    /// before the gateway starts.
    fn port(self) -> u16 {
        match self {
            Via::Local => 0,
            Via::A2a => free_port(),
        }
    }

    /// `[gateway]` keys: the API token the inbound A2A side requires.
    fn gateway_keys(self) -> String {
        match self {
            Via::Local => String::new(),
            Via::A2a => format!("api_token_env = \"{API_TOKEN_VAR}\""),
        }
    }

    /// The config's `[a2a]`: caid exposed, and its own endpoint at `port` as a peer.
    fn a2a_toml(self, port: u16) -> String {
        match self {
            Via::Local => String::new(),
            Via::A2a => format!(
                "\n[a2a]\nenabled = true\nexpose = [\"caid\"]\n\n[[a2a.peers]]\n\
                 id = \"{LOOPBACK_PEER}\"\nurl = \"http://127.0.0.1:{port}/a2a/caid\"\n\
                 token_env = \"{API_TOKEN_VAR}\"\n"
            ),
        }
    }

    /// The deliveries `count` round trips leave, by kind (bot to bot, to an A2A peer, from an
    /// A2A caller): one bot-to-bot each, or one out and one in.
    fn deliveries(self, count: usize) -> Legs {
        match self {
            Via::Local => Legs {
                local: count,
                a2a_out: 0,
                a2a_in: 0,
            },
            Via::A2a => Legs {
                local: 0,
                a2a_out: count,
                a2a_in: count,
            },
        }
    }
}

/// Delivered deliveries by kind.
#[derive(Debug, Default, PartialEq, Eq)]
struct Legs {
    /// From a bot to a bot of this gateway.
    local: usize,
    /// From a bot to an A2A peer (`a2a-out:`).
    a2a_out: usize,
    /// From an A2A caller to a bot (`a2a-in:`).
    a2a_in: usize,
}

impl Legs {
    fn count(&mut self, d: &baton::store::Delivery) {
        let leg = if d.target_session.a2a_out_peer().is_some() {
            &mut self.a2a_out
        } else if d.target_session.a2a_peer().is_some() {
            &mut self.a2a_in
        } else {
            &mut self.local
        };
        *leg += 1;
    }
}

/// `count` times, a person asks snark to `ask @caid: ...` (or `ask @a2a:caid-a2a: ...`, `via`):
/// snark's turn calls `sessions_send`, caid's turn answers on the nested lane, snark posts
/// caid's answer. Spread over `chats` chats.
pub(crate) async fn round_trips(chats: usize, count: usize, lanes: usize, via: Via) -> RoundTrips {
    let mut tries = 0;
    let rig = loop {
        let port = via.port();
        let started = Rig::try_start(&Setup {
            bots: &[BOT, "caid"],
            lanes,
            bot_keys: "tools = [\"sessions_send\"]",
            capacity: count,
            extra_toml: &via.a2a_toml(port),
            gateway_keys: &via.gateway_keys(),
            port,
        })
        .await;
        tries += 1;
        match started {
            Ok(rig) => break rig,
            // Taken between choosing it and binding it: choose again.
            Err(err) if is_port_taken(&err) && tries < 5 => continue,
            Err(err) => panic!("bench gateway starts: {err}"),
        }
    };
    let injector = rig.injector(BOT).clone();
    let target = via.target();
    let batch: Vec<_> = (0..count)
        .map(|n| {
            let chat = n % chats;
            let mut event = group_message(n, chat, chat, BOT, Kind::Mention);
            event.text = format!("@{BOT} ask @{target}: ping {n}");
            event
        })
        .collect();
    let (jobs, commits) = (rig.gateway.store().jobs(), rig.gateway.store().commits());
    let started = Instant::now();
    for event in batch {
        injector.inject(event);
    }
    assert!(
        rig.wait_sends(count as u64, PHASE_LIMIT).await,
        "round trips stalled"
    );
    let elapsed = started.elapsed();
    let jobs = rig.gateway.store().jobs() - jobs;
    let commits = rig.gateway.store().commits() - commits;
    // Each reply must be caid's answer, not a refusal, and have gone the way asked.
    let want = via.deliveries(count);
    let deliveries = rig
        .gateway
        .store()
        .deliveries(baton::store::DeliveryQuery {
            session: None,
            open_only: false,
            limit: want.local + want.a2a_out + want.a2a_in + 1,
        })
        .await
        .expect("deliveries");
    let mut delivered = Legs::default();
    deliveries
        .iter()
        .filter(|d| d.state == baton::store::DeliveryState::Delivered)
        .for_each(|d| delivered.count(d));
    assert_eq!(
        delivered, want,
        "every ask went through sessions_send {via:?}"
    );
    rig.stop().await;
    RoundTrips {
        count,
        elapsed,
        jobs,
        commits,
    }
}

/// How many new sessions are opened at once by [`session_memory`].
const SESSION_WAVE: usize = 100;

/// Resident memory as sessions accumulate.
pub(crate) struct SessionMemory {
    /// After start and a warm-up in one chat, in KiB.
    pub(crate) baseline: u64,
    /// After each step of `per_step` new sessions, in KiB.
    pub(crate) steps: Vec<u64>,
    /// Sessions added per step.
    pub(crate) per_step: usize,
}

/// Drive `per_step` new sessions (one mention in each of as many new chats) `steps` times and
/// read this process's RSS after each step, once the pipeline is at rest. Sessions are opened
/// [`SESSION_WAVE`] at a time, so what is measured is what idle sessions keep, not the peak of
/// thousands of events in flight at once (which the allocator keeps afterwards).
pub(crate) async fn session_memory(per_step: usize, steps: usize) -> SessionMemory {
    let warmup = 2000;
    let total = warmup + per_step * steps;
    let rig = Rig::start(&Setup {
        bots: &[BOT],
        lanes: 4,
        bot_keys: "",
        capacity: total,
        extra_toml: "",
        gateway_keys: "",
        port: 0,
    })
    .await;
    let injector = rig.injector(BOT).clone();
    for n in 0..warmup {
        injector.inject(group_message(n, 0, n % 8, BOT, kind_of(n, 5)));
    }
    assert!(
        rig.wait_done(warmup as u64, PHASE_LIMIT).await,
        "warm-up stalled"
    );
    let pid = std::process::id();
    let baseline = super::process::rss_kib(pid);
    let mut rss = Vec::new();
    for step in 0..steps {
        let first = warmup + step * per_step;
        let last = first + per_step;
        for wave in (first..last).step_by(SESSION_WAVE) {
            let end = (wave + SESSION_WAVE).min(last);
            for n in wave..end {
                // Chat 1 + n: every message opens a new session (chat 0 was the warm-up's).
                injector.inject(group_message(n, 1 + n, n, BOT, Kind::Mention));
            }
            assert!(
                rig.wait_done(end as u64, PHASE_LIMIT).await,
                "sessions stalled"
            );
        }
        rss.push(super::process::rss_kib(pid));
    }
    let sessions = rig
        .gateway
        .store()
        .sessions()
        .await
        .expect("sessions")
        .len();
    assert_eq!(sessions, 1 + per_step * steps, "one session per chat");
    rig.stop().await;
    SessionMemory {
        baseline,
        steps: rss,
        per_step,
    }
}

/// Bytes of one pipeline run's future ([`baton::dispatcher::Dispatcher::handle`]): what every
/// event in flight holds, and what is copied each time the runtime moves the task.
pub(crate) async fn pipeline_future_size() -> usize {
    let rig = Rig::start(&Setup {
        bots: &[BOT],
        lanes: 4,
        bot_keys: "",
        capacity: 1,
        extra_toml: "",
        gateway_keys: "",
        port: 0,
    })
    .await;
    let event = group_message(0, 0, 0, BOT, Kind::Mention);
    let run = rig.gateway.dispatcher().handle(event);
    let size = std::mem::size_of_val(&run);
    drop(run);
    rig.stop().await;
    size
}
