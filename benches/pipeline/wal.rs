//! The database file under sustained load (`wal`): events at a fixed rate for a while, with a
//! reader reading transcripts all along (as the dashboard, `/api` or `baton transcript --follow`
//! do), sampling the WAL and database sizes once a second. Run once with the default bound and
//! once with the bound out of reach, which is how the log behaved before it had one.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use baton::store::TranscriptQuery;

use super::rig::{Rig, Setup, group_message, kind_of};
use super::scenarios::BOT;

/// One sample of the files' sizes.
pub(crate) struct Sample {
    /// Since the load started.
    pub(crate) at: Duration,
    /// Events injected so far.
    pub(crate) events: usize,
    /// `<db>-wal`, bytes.
    pub(crate) wal: u64,
    /// The database file, bytes.
    pub(crate) db: u64,
}

/// What a soak saw.
pub(crate) struct Soak {
    /// One a second, and one after the load.
    pub(crate) samples: Vec<Sample>,
    /// The WAL after a clean stop, bytes.
    pub(crate) wal_after_stop: u64,
    /// The database after a clean stop, bytes.
    pub(crate) db_after_stop: u64,
    /// Events injected.
    pub(crate) events: usize,
    /// Transcript reads the reader made.
    pub(crate) reads: u64,
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// `rate` events/s over `chats` chats (one in `mention_every` a mention) for `seconds`, with
/// `store.wal_limit_mb = wal_limit_mb`.
pub(crate) async fn soak(
    rate: u64,
    seconds: u64,
    chats: usize,
    mention_every: usize,
    wal_limit_mb: u64,
) -> Soak {
    let events = (rate * seconds) as usize;
    let extra = format!("\n[store]\nwal_limit_mb = {wal_limit_mb}\n");
    let rig = Rig::start(&Setup {
        bots: &[BOT],
        lanes: 4,
        bot_keys: "",
        capacity: events,
        extra_toml: &extra,
        gateway_keys: "",
        port: 0,
    })
    .await;
    let db = rig.database.clone();
    let wal = db.with_file_name(format!(
        "{}-wal",
        db.file_name().expect("a file").to_string_lossy()
    ));
    let done = Arc::new(AtomicBool::new(false));
    let reader = tokio::spawn({
        let store = rig.gateway.store().clone();
        let done = Arc::clone(&done);
        async move {
            let mut reads = 0u64;
            while !done.load(Ordering::Relaxed) {
                let session = format!("bot:{BOT}:slack:{BOT}:C{:05}", reads as usize % chats)
                    .parse()
                    .expect("a session key");
                let query = TranscriptQuery {
                    last: Some(50),
                    ..TranscriptQuery::session(session)
                };
                store.transcript(query).await.expect("read");
                reads += 1;
            }
            reads
        }
    });
    let injector = rig.injector(BOT).clone();
    let mut tick = tokio::time::interval(Duration::from_nanos(1_000_000_000 / rate));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut next_sample = Duration::ZERO;
    for n in 0..events {
        tick.tick().await;
        let chat = n % chats;
        let sender = chat * 8 + (n / chats) % 8;
        injector.inject(group_message(
            n,
            chat,
            sender,
            BOT,
            kind_of(n, mention_every),
        ));
        let at = started.elapsed();
        if at >= next_sample {
            samples.push(Sample {
                at,
                events: n,
                wal: size(&wal),
                db: size(&db),
            });
            next_sample += Duration::from_secs(1);
        }
    }
    assert!(
        rig.wait_done(events as u64, Duration::from_secs(600)).await,
        "soak stalled"
    );
    samples.push(Sample {
        at: started.elapsed(),
        events,
        wal: size(&wal),
        db: size(&db),
    });
    done.store(true, Ordering::Relaxed);
    let reads = reader.await.expect("reader");
    let _files = rig.stop().await;
    Soak {
        wal_after_stop: size(&wal),
        db_after_stop: size(&db),
        samples,
        events,
        reads,
    }
}
