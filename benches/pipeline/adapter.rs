//! The in-memory adapter: a platform account whose "connection" is a channel the benchmark
//! fills with normalized events, and whose "posts" are counted and timed.
//!
//! It hands events to the pipeline the way a webhook-mode adapter does (Slack Events API,
//! Feishu webhook): every event is accepted concurrently with the others, up to
//! [`MAX_IN_FLIGHT`] at once, as concurrent HTTP requests would be. Each event's message id is
//! `m<n>`, so a reply (which answers `m<n>`) and an acknowledgement can be matched to the time
//! its event was injected.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use baton::local::LOCAL_MAX_MESSAGE_CHARS;
use baton_contract::{
    AccountId, Adapter, AdapterError, Capabilities, ConnectionCell, ConnectionState, EventSink,
    InboundEvent, MessageId, OutboundMessage, Platform, SendError, SentMessage, UserId,
};
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Most events being accepted at once (concurrent webhook requests).
pub(crate) const MAX_IN_FLIGHT: usize = 4096;

/// Not yet recorded.
const UNSET: u64 = u64::MAX;

/// When each event was injected, acknowledged and answered, in ns since [`Recorder::base`].
pub(crate) struct Recorder {
    base: Instant,
    injected: Vec<AtomicU64>,
    acked: Vec<AtomicU64>,
    replied: Vec<AtomicU64>,
    acks: AtomicU64,
    sends: AtomicU64,
}

impl Recorder {
    /// Room for events `m0` to `m<capacity - 1>`.
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        let slots = || (0..capacity).map(|_| AtomicU64::new(UNSET)).collect();
        Arc::new(Self {
            base: Instant::now(),
            injected: slots(),
            acked: slots(),
            replied: slots(),
            acks: AtomicU64::new(0),
            sends: AtomicU64::new(0),
        })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(UNSET - 1)
    }

    fn mark(slots: &[AtomicU64], n: Option<usize>, at: u64) {
        if let Some(slot) = n.and_then(|n| slots.get(n)) {
            // The first time counts (a reply split in chunks is answered by its first).
            let _ = slot.compare_exchange(UNSET, at, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Events acknowledged (accepted by the pipeline) so far.
    pub(crate) fn acks(&self) -> u64 {
        self.acks.load(Ordering::Relaxed)
    }

    /// Chunks posted so far.
    pub(crate) fn sends(&self) -> u64 {
        self.sends.load(Ordering::Relaxed)
    }

    /// Nanoseconds from injection to acknowledgement, for every acknowledged event in `range`.
    pub(crate) fn ack_latencies(&self, range: std::ops::Range<usize>) -> Vec<u64> {
        self.latencies(&self.acked, range)
    }

    /// Nanoseconds from injection to the first chunk of the reply, for every answered event.
    pub(crate) fn reply_latencies(&self, range: std::ops::Range<usize>) -> Vec<u64> {
        self.latencies(&self.replied, range)
    }

    fn latencies(&self, done: &[AtomicU64], range: std::ops::Range<usize>) -> Vec<u64> {
        range
            .filter_map(|n| {
                let start = self.injected[n].load(Ordering::Relaxed);
                let end = done[n].load(Ordering::Relaxed);
                (start != UNSET && end != UNSET).then(|| end.saturating_sub(start))
            })
            .collect()
    }
}

/// The index `n` of a message id `m<n>`.
fn index_of(message_id: &str) -> Option<usize> {
    message_id.strip_prefix('m')?.parse().ok()
}

/// Where the benchmark puts events for one account.
#[derive(Clone)]
pub(crate) struct Injector {
    tx: mpsc::UnboundedSender<InboundEvent>,
    recorder: Arc<Recorder>,
}

impl Injector {
    /// Hand `event` (message id `m<n>`) to the account, as its platform would.
    pub(crate) fn inject(&self, event: InboundEvent) {
        let n = index_of(event.message_id.as_str());
        Recorder::mark(&self.recorder.injected, n, self.recorder.now());
        // The adapter lives as long as the gateway; a send after shutdown is simply dropped.
        let _ = self.tx.send(event);
    }
}

/// One account, in memory.
pub(crate) struct BenchAdapter {
    platform: Platform,
    account: AccountId,
    me: UserId,
    inbox: Mutex<Option<mpsc::UnboundedReceiver<InboundEvent>>>,
    state: ConnectionCell,
    recorder: Arc<Recorder>,
}

impl BenchAdapter {
    /// An account `account` on `platform` whose own user id is `me`; returns it and the handle
    /// that injects its events.
    pub(crate) fn new(
        platform: Platform,
        account: &str,
        me: &str,
        recorder: Arc<Recorder>,
    ) -> (Arc<Self>, Injector) {
        let (tx, rx) = mpsc::unbounded_channel();
        let adapter = Arc::new(Self {
            platform,
            account: AccountId::from(account),
            me: UserId::from(me),
            inbox: Mutex::new(Some(rx)),
            state: ConnectionCell::default(),
            recorder: Arc::clone(&recorder),
        });
        (adapter, Injector { tx, recorder })
    }

    fn set_state(&self, state: ConnectionState) {
        self.state.set(state);
    }
}

#[async_trait]
impl Adapter for BenchAdapter {
    fn platform(&self) -> Platform {
        self.platform
    }

    fn account(&self) -> &AccountId {
        &self.account
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_chars: LOCAL_MAX_MESSAGE_CHARS,
            threads: true,
            ephemeral_replies: false,
            bot_posts_reach_bots: true,
        }
    }

    fn self_id(&self) -> Option<UserId> {
        Some(self.me.clone())
    }

    fn connection(&self) -> &ConnectionCell {
        &self.state
    }

    async fn run(
        &self,
        sink: &dyn EventSink,
        shutdown: CancellationToken,
    ) -> Result<(), AdapterError> {
        let Some(mut inbox) = self.inbox.lock().expect("inbox poisoned").take() else {
            return Err(AdapterError::Fatal("bench account already running".into()));
        };
        self.set_state(ConnectionState::Connected);
        let recorder = &self.recorder;
        let mut accepting = FuturesUnordered::new();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                Some(closed) = accepting.next(), if !accepting.is_empty() => {
                    if closed {
                        break;
                    }
                }
                event = inbox.recv(), if accepting.len() < MAX_IN_FLIGHT => {
                    let Some(event) = event else { break };
                    accepting.push(async move {
                        let n = index_of(event.message_id.as_str());
                        let closed = sink.accept(event).await.is_err();
                        Recorder::mark(&recorder.acked, n, recorder.now());
                        recorder.acks.fetch_add(1, Ordering::Relaxed);
                        closed
                    });
                }
            }
        }
        self.set_state(ConnectionState::Stopped);
        Ok(())
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, SendError> {
        let recorder = &self.recorder;
        let n = message
            .reply_to
            .as_ref()
            .and_then(|id| index_of(id.as_str()));
        Recorder::mark(&recorder.replied, n, recorder.now());
        let sent = recorder.sends.fetch_add(1, Ordering::Relaxed);
        Ok(SentMessage {
            message_id: MessageId(format!("out{sent}")),
        })
    }
}
