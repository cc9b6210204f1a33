//! `Outbox`: the App's event transport (the outbox write, in the request's transaction), its
//! relay to the broker, and this instance's subscription, as one hosted service.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use tegu_core::futures::UnitFuture;
use tegu_core::{
    DiError, ProtoDef,
    error::BoxError,
    events::{DeliverTo, Deliveries, EventBus, EventTransport, Once},
    health::HealthCheck,
    hosted::{HostedService, OnFailure, Stop},
    lineage::Lineage,
    registry::{Dependency, InjectKind},
};
use tokio::sync::Notify;

use crate::broker::{Broker, Outgoing, Received, Refused};
use crate::clock::now_ms;
use crate::dead::{DeadLetter, Why};
use crate::event_id::handling;
use crate::external::{ExternalEvent, encode_key, lineage_from_headers};
use crate::recent::Recent;
use crate::store::{OutboxStore, Recorded};

/// The `[outbox]` section of the configuration; every key has a default.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Settings {
    /// How many events the relay publishes per round.
    batch: u32,
    /// How often the relay looks for events that no instance relayed (one that died between
    /// the commit and the relay), in milliseconds.
    poll_ms: u64,
    /// How many ids of handled events an instance remembers in memory: a repeat it saw lately
    /// is recognised without reading the inbox.
    remember: usize,
    /// After a commit wakes the relay, how long it waits for more before publishing, in
    /// milliseconds: larger rounds under load, at the cost of that much latency (0).
    linger_ms: u64,
    /// How long the oldest event may wait in the outbox before readiness says the outbox
    /// is stalled, in milliseconds; 0 (the default): never. Every instance relays every row,
    /// so a stall fails every instance's readiness at once.
    stall_ms: u64,
    /// How long a published event is kept, in milliseconds, to be published again should the
    /// broker lose it (a server restarted without its store) before every instance had it;
    /// 0: deleted once published.
    keep_ms: u64,
    /// How many times a handler is tried with an event before the event becomes a dead letter
    /// for it (1: no retry).
    attempts: u32,
    /// The wait before a handler's second try, in milliseconds; doubled before each next one,
    /// at most [`MAX_BACKOFF`].
    backoff_ms: u64,
    /// The tries and waits of handlers of their own, by name (`"my_app::Mailer::on_shipped"`).
    handlers: HashMap<String, HandlerSettings>,
    /// How long a dead letter is kept, in milliseconds (7 days; 0: for ever).
    dead_letters_keep_ms: u64,
    /// Whether readiness fails while a dead letter is kept (`false`: a dead letter is a failed
    /// piece of business, not an outage).
    unready_on_dead_letters: bool,
    /// How long the inbox keeps the record that a handler handled an event, in milliseconds (7
    /// days, as long as JetStream's stream keeps an event by default; 0: for ever): an event
    /// brought again within it is not handled again. At least `keep_ms`.
    inbox_keep_ms: u64,
    /// How long, at most, an event of a key waits for the one before it to be handled by a
    /// once-per-cluster handler, as one instance sees it, in milliseconds: then it goes on (the
    /// handler never had the one before: it was deployed after it, or its record was purged).
    order_wait_ms: u64,
}

/// `[outbox.handlers."name"]`: one handler's tries and wait, each defaulting to the outbox's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HandlerSettings {
    attempts: Option<u32>,
    backoff_ms: Option<u64>,
}

/// The longest wait between two tries of a handler.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

impl Default for Settings {
    fn default() -> Self {
        Settings {
            batch: 100,
            poll_ms: 500,
            remember: 100_000,
            linger_ms: 0,
            stall_ms: 0,
            keep_ms: 300_000,
            attempts: 3,
            backoff_ms: 100,
            handlers: HashMap::new(),
            dead_letters_keep_ms: 7 * 24 * 3_600_000,
            unready_on_dead_letters: false,
            inbox_keep_ms: 7 * 24 * 3_600_000,
            order_wait_ms: 60_000,
        }
    }
}

impl Settings {
    /// How many tries `handler` gets, and the wait before its second.
    fn policy(&self, handler: &str) -> (u32, Duration) {
        let own = self.handlers.get(of_type(handler));
        let attempts = own.and_then(|h| h.attempts).unwrap_or(self.attempts).max(1);
        let backoff = own.and_then(|h| h.backoff_ms).unwrap_or(self.backoff_ms);
        (attempts, Duration::from_millis(backoff))
    }
}

/// A handler's name without the `#2`, `#3` of a second or third object of its type
/// (`tegu_core::events::HandlerRun::handler`): what its settings and the program know it by.
fn of_type(handler: &str) -> &str {
    handler.split_once('#').map_or(handler, |(name, _)| name)
}

/// The names of the program's handlers of events after their commit (`my_app::Mailer::mail`):
/// what `outbox.handlers` may name.
fn handler_names() -> impl Iterator<Item = String> {
    inventory::iter::<tegu_core::__private::HandlerDescriptor>
        .into_iter()
        .filter(|d| d.phase == tegu_core::__private::EventPhase::AfterCommit)
        .map(|d| format!("{}::{}", (d.proto_name)(), d.method))
}

/// The program's once-per-cluster handlers of events after their commit: their event's type
/// and their name.
fn cluster_handlers() -> impl Iterator<Item = (TypeId, String)> {
    inventory::iter::<tegu_core::__private::HandlerDescriptor>
        .into_iter()
        .filter(|d| d.phase == tegu_core::__private::EventPhase::AfterCommit && d.once == Once::PerCluster)
        .map(|d| ((d.event)(), format!("{}::{}", (d.proto_name)(), d.method)))
}

/// What the inbox records a once-per-cluster handler's events under, before its name: one
/// receiver for the whole cluster, which no broker's own receiver name (a JetStream consumer's
/// has no `:`) can be.
const CLUSTER: &str = "cluster:";

/// One of this instance's subscriptions: its own to every event, for the handlers every
/// instance runs, or the one it shares with the cluster for a once-per-cluster handler.
struct Lane {
    /// The once-per-cluster handler, and the name of its event; `None`: this instance's own.
    shared: Option<(String, &'static str)>,
    /// What the inbox records its handlers' events under.
    receiver: String,
    /// The ids of the events it handled lately.
    recent: Mutex<Recent>,
    /// The events of a key it gave back to wait for the one before, by id: when it first did,
    /// and how many times.
    waiting: Mutex<HashMap<String, (Instant, u32)>>,
}

impl Lane {
    /// The handlers it delivers to, less those in `handled`.
    fn to<'a>(&'a self, handled: &'a [String]) -> DeliverTo<'a> {
        match &self.shared {
            Some((handler, _)) => DeliverTo::only(handler).except(handled),
            None => DeliverTo::all().once(Once::PerInstance).except(handled),
        }
    }
}

/// What becomes of a received event once [`Outbox::handle`] is done with it.
enum Take {
    /// Acknowledged: handled, a duplicate, or a dead letter.
    Ack,
    /// Left unacknowledged, for the broker to bring again (the App refused it, a dead letter
    /// could not be kept).
    Leave,
    /// Given back for this long ([`Ack::nak`](crate::Ack::nak)): an earlier event of its key
    /// is still being handled.
    Later(Duration),
}

/// How long an event of a key that is not its turn yet is given back for, the first time.
const NOT_YET: Duration = Duration::from_millis(25);

/// The headers that carry an event's key and its number among the key's events.
const KEY_HEADER: &str = "tegu-event-key";
const SEQ_HEADER: &str = "tegu-event-seq";

/// The key and number `headers` carry, if both.
fn order_of(headers: &[(String, String)]) -> Option<(String, u64)> {
    let get = |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str());
    Some((get(KEY_HEADER)?.to_owned(), get(SEQ_HEADER)?.parse().ok()?))
}

/// Runs `futures` together until each is done.
async fn join_all(mut futures: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>>) {
    std::future::poll_fn(|cx| {
        futures.retain_mut(|future| future.as_mut().poll(cx).is_pending());
        if futures.is_empty() { std::task::Poll::Ready(()) } else { std::task::Poll::Pending }
    })
    .await;
}

/// The wait before try `n + 1` of a handler (`n` tries done): `first · 2ⁿ⁻¹`, at most
/// [`MAX_BACKOFF`].
fn backoff(first: Duration, n: u32) -> Duration {
    first.saturating_mul(1 << n.saturating_sub(1).min(16)).min(MAX_BACKOFF)
}

/// How a relay round ended.
enum Round {
    /// The outbox is empty.
    Drained,
    /// The event of this row could not be published (the broker failed): it waits for the
    /// next round, and so do those after it.
    Waiting(i64),
    /// The outbox could not be read.
    Unread,
}

/// What an [`Outbox`] has done since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OutboxCounts {
    /// Events written to the outbox in a transaction.
    pub written: u64,
    /// Events this instance's relay published (and deleted from the outbox).
    pub relayed: u64,
    /// Events this instance received and handed to its handlers.
    pub delivered: u64,
    /// Events this instance received again and did not hand over twice.
    pub duplicates: u64,
    /// Events this instance's relay set aside: the broker refused them for good.
    pub set_aside: u64,
    /// How many times this instance subscribed to the broker: more than once if a
    /// subscription ended (the broker lost this instance's consumer, or the connection).
    pub subscriptions: u64,
    /// Events this instance's relay made pending again to publish them once more, after its
    /// subscription ended (the broker may have lost them).
    pub republished: u64,
    /// Events this instance received while its App was gone (dropped without `shutdown()`) or
    /// shutting down: left unacknowledged, so that the broker brings them again, never taken
    /// as handled.
    pub refused: u64,
    /// Tries of a handler after its first, with an event it failed.
    pub retries: u64,
    /// Dead letters this instance set aside: an event a handler failed on every try, one
    /// undecodable or of an unknown type, one the broker refused (also in `set_aside`).
    pub dead_letters: u64,
}

/// What [`Outbox::replay`] did with a dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Replayed {
    /// Written to the outbox again (a [`Why::Refused`] one): the relay publishes it to every
    /// instance. The dead letter is removed.
    Republished,
    /// Its handler (or, for an undecodable event or one of an unknown type, every handler of
    /// this instance) took it. The dead letter is removed.
    Handled,
    /// Its handler failed again: the dead letter is replaced by these, with the new error and
    /// one more try.
    FailedAgain(Vec<i64>),
    /// It cannot be replayed here, and is kept: why (its type unknown to this instance, its
    /// JSON still not its type's, its handler not in this program, the App shutting down).
    Refused(String),
    /// No dead letter has this number (replayed or discarded already, or being replayed).
    NotFound,
}

/// The transactional outbox of an App: its `dyn EventTransport` (see the crate's
/// documentation) and a hosted service that relays the outbox to the broker and delivers what
/// the broker brings to this instance's handlers.
///
/// An event is stored and published with the emitting scope's lineage as headers
/// (`tegu_core::lineage::Lineage::current`), and each handler that receives it runs in a scope
/// seeded with the lineage those headers carry, checked by the App's lineage types.
///
/// Register it with [`Outbox::proto`], beside a singleton that provides `dyn OutboxStore`
/// (tegu-sqlx's `OutboxTable`) and one that provides `dyn Broker` (tegu-nats' `JetStream`). Its
/// settings are the optional section `[outbox]`: `batch` (100), `poll_ms` (500), `remember`
/// (100000 ids), `linger_ms` (0), `stall_ms` (0: readiness never fails on a stall), `keep_ms`
/// (300000; 0: not kept), the handlers' `attempts` (3) and `backoff_ms` (100),
/// `dead_letters_keep_ms` and `inbox_keep_ms` (7 days), `unready_on_dead_letters` (false).
pub struct Outbox {
    store: Arc<dyn OutboxStore>,
    broker: Arc<dyn Broker>,
    bus: Arc<EventBus>,
    by_type: HashMap<TypeId, &'static ExternalEvent>,
    by_name: HashMap<&'static str, &'static ExternalEvent>,
    settings: Settings,
    /// The name this instance receives events under ([`Broker::receiver`]): its records in the
    /// inbox.
    receiver: String,
    /// Wakes the relay: a scope that wrote to the outbox committed.
    wake: Notify,
    /// How many of this instance's subscriptions are open, of how many it has ([`Lane`]; 0
    /// before it runs): the relay waits for all of them, and readiness reports them.
    subscribed: tokio::sync::watch::Sender<(usize, usize)>,
    /// Since when the relay has found the outbox's oldest event (`None`: it could not read
    /// the outbox) still waiting, if it has.
    waiting: Mutex<Option<(Option<i64>, Instant)>>,
    written: Arc<AtomicU64>,
    relayed: AtomicU64,
    delivered: AtomicU64,
    duplicates: AtomicU64,
    set_aside: AtomicU64,
    subscriptions: AtomicU64,
    republished: AtomicU64,
    refused: AtomicU64,
    retries: AtomicU64,
    dead_letters: AtomicU64,
    /// When the oldest dead letter was set aside (ms since the epoch), as the relay last saw it.
    oldest_dead: Mutex<Option<i64>>,
    /// This instance's subscription ended since the relay last published again what the
    /// outbox keeps.
    lost: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&str> = self.by_name.keys().copied().collect();
        names.sort_unstable();
        f.debug_struct("Outbox").field("events", &names).field("counts", &self.counts()).finish_non_exhaustive()
    }
}

impl Outbox {
    /// The proto to register: `App::builder().register(Outbox::proto())`. It injects the App's
    /// `dyn OutboxStore`, `dyn Broker` and `EventBus`, reads `[outbox]`, and provides
    /// `dyn EventTransport`, `dyn HostedService` and `dyn HealthCheck` (ready once subscribed). `build()` fails, naming the type, if an
    /// external event's name is not a valid name or two types share one.
    pub fn proto() -> ProtoDef {
        ProtoDef::singleton::<Outbox>(|r| {
            let settings = if r.config().contains("outbox") { r.config().get("outbox")? } else { Settings::default() };
            Outbox::new(r.arc(0)?, r.arc(1)?, r.arc(2)?, settings)
        })
        .dep(Dependency::new::<dyn OutboxStore>(InjectKind::Arc, None))
        .dep(Dependency::new::<dyn Broker>(InjectKind::Arc, None))
        .dep(Dependency::new::<EventBus>(InjectKind::Arc, None))
        .provides::<Outbox, dyn EventTransport>(|outbox| outbox)
        .provides::<Outbox, dyn HostedService>(|outbox| outbox)
        .provides::<Outbox, dyn HealthCheck>(|outbox| outbox)
        .reads_config::<Settings>("outbox")
    }

    fn new(
        store: Arc<dyn OutboxStore>,
        broker: Arc<dyn Broker>,
        bus: Arc<EventBus>,
        settings: Settings,
    ) -> Result<Outbox, DiError> {
        let mut by_type = HashMap::new();
        let mut by_name: HashMap<&'static str, &'static ExternalEvent> = HashMap::new();
        let refused = |reason: String| DiError::Construction {
            type_name: std::any::type_name::<Outbox>(),
            name: "outbox".to_owned(),
            source: Arc::from(Box::<dyn std::error::Error + Send + Sync>::from(reason)),
        };
        if settings.batch == 0 {
            return Err(refused("`outbox.batch` is 0, which would relay nothing; give at least 1".to_owned()));
        }
        if settings.inbox_keep_ms != 0 && settings.inbox_keep_ms < settings.keep_ms {
            return Err(refused(format!(
                "`outbox.inbox_keep_ms` ({}) is shorter than `outbox.keep_ms` ({}): an event published again after a lost subscription would be handled twice; keep the inbox at least as long",
                settings.inbox_keep_ms, settings.keep_ms
            )));
        }
        for event in inventory::iter::<ExternalEvent> {
            if !crate::valid_name(event.name) {
                return Err(refused(format!(
                    "external event `{}` is named \"{}\"; a name is dot-separated words of letters, digits, `-` and `_`",
                    (event.type_name)(),
                    event.name
                )));
            }
            if let Some(other) = by_name.insert(event.name, event) {
                return Err(refused(format!(
                    "external events `{}` and `{}` are both named \"{}\"",
                    (other.type_name)(),
                    (event.type_name)(),
                    event.name
                )));
            }
            if let Some(other) = by_type.insert((event.ty)(), event) {
                return Err(refused(format!(
                    "`{}` is marked external twice, as \"{}\" and \"{}\"",
                    (event.type_name)(),
                    other.name,
                    event.name
                )));
            }
        }

        if let Some(unknown) = settings.handlers.keys().find(|name| !handler_names().any(|known| &known == *name)) {
            let mut known: Vec<String> = handler_names().collect();
            known.sort_unstable();
            return Err(refused(format!(
                "`outbox.handlers` names \"{unknown}\", which is no `#[event_handler]` of this program (its handlers of events after their commit: {})",
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            )));
        }
        if !broker.shares()
            && let Some(handler) = cluster_handlers().find(|(event, _)| by_type.contains_key(event))
        {
            return Err(refused(format!(
                "`{}` is `once_per_cluster`, and the broker has no shared subscriptions to give each event to one instance",
                handler.1
            )));
        }
        if !store.keeps_order()
            && let Some(event) = by_type.values().find(|event| event.key.is_some())
        {
            return Err(refused(format!(
                "external event `{}` has a key, and the outbox store does not number the events of a key",
                (event.type_name)()
            )));
        }
        let receiver = broker.receiver();
        Ok(Outbox {
            store,
            broker,
            bus,
            by_type,
            by_name,
            settings,
            receiver,
            wake: Notify::new(),
            subscribed: tokio::sync::watch::Sender::new((0, 0)),
            waiting: Mutex::new(None),
            written: Arc::default(),
            relayed: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            set_aside: AtomicU64::new(0),
            subscriptions: AtomicU64::new(0),
            republished: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            dead_letters: AtomicU64::new(0),
            oldest_dead: Mutex::new(None),
            lost: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// What it has done since it started.
    pub fn counts(&self) -> OutboxCounts {
        OutboxCounts {
            written: self.written.load(Ordering::Relaxed),
            relayed: self.relayed.load(Ordering::Relaxed),
            delivered: self.delivered.load(Ordering::Relaxed),
            duplicates: self.duplicates.load(Ordering::Relaxed),
            set_aside: self.set_aside.load(Ordering::Relaxed),
            subscriptions: self.subscriptions.load(Ordering::Relaxed),
            republished: self.republished.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            dead_letters: self.dead_letters.load(Ordering::Relaxed),
        }
    }

    /// Publishes what the outbox holds, a batch at a time, until it is empty or the broker
    /// fails (logged; the next round tries again). Each event is deleted once the broker has
    /// it; one the broker refuses for good ([`Refused`]) is set aside, and the events after it
    /// go on.
    async fn relay_all(&self) -> Round {
        loop {
            let batch = match self.store.pending(self.settings.batch).await {
                Ok(batch) => batch,
                Err(error) => {
                    tracing::error!(%error, "reading the outbox failed; the relay tries again");
                    return Round::Unread;
                }
            };
            let Some(first) = batch.first() else { return Round::Drained };
            let first = first.row;
            let events: Vec<Outgoing<'_>> = batch
                .iter()
                .map(|stored| Outgoing {
                    id: &stored.id,
                    name: &stored.name,
                    payload: &stored.payload,
                    headers: &stored.headers,
                })
                .collect();
            let (done, result) = self.broker.publish_all(&events).await;
            let done = done.min(batch.len());
            let published: Vec<i64> = batch[..done].iter().map(|stored| stored.row).collect();
            if !published.is_empty() {
                if let Err(error) = self.store.published(&published, now_ms()).await {
                    // Published, still pending: the next round publishes them again, and the
                    // broker keeps one of each.
                    tracing::error!(%error, "marking relayed events published failed");
                    return Round::Waiting(first);
                }
                self.relayed.fetch_add(published.len() as u64, Ordering::Relaxed);
            }
            match result {
                Ok(()) if done == batch.len() => {}
                Ok(()) => return Round::Waiting(batch[done].row),
                Err(error) => {
                    let Some(failed) = batch.get(done) else { return Round::Waiting(first) };
                    let ty = self.by_name.get(failed.name.as_str()).map_or("?", |e| (e.type_name)());
                    if !error.is::<Refused>() {
                        tracing::error!(%error, event = ty, id = ?failed.id, "publishing an event failed; the relay tries again");
                        return Round::Waiting(failed.row);
                    }
                    let reason = error.to_string();
                    // Its number will reach no handler: the key's next events do not wait for it.
                    if let Some((key, seq)) = order_of(&failed.headers)
                        && let Err(error) = self.store.skip(&key, seq).await
                    {
                        tracing::error!(%error, event = ty, id = ?failed.id, "recording the number of an event the broker refused failed; the relay tries again");
                        return Round::Waiting(failed.row);
                    }
                    if let Err(error) = self.store.set_aside(failed.row, &reason).await {
                        tracing::error!(%error, event = ty, id = ?failed.id, "setting aside an event the broker refused failed; the relay tries again");
                        return Round::Waiting(failed.row);
                    }
                    self.set_aside.fetch_add(1, Ordering::Relaxed);
                    self.dead_letters.fetch_add(1, Ordering::Relaxed);
                    set_aside_metric(&failed.name);
                    dead_letter_metric("refused");
                    tracing::error!(
                        event = ty,
                        id = ?failed.id,
                        %reason,
                        "the broker refused an event for good; it is a dead letter now, and the events after it go on"
                    );
                }
            }
        }
    }

    /// Notes how a relay round ended, for readiness: since when the oldest event waits.
    fn note(&self, round: Round) {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        match round {
            Round::Drained => *waiting = None,
            Round::Waiting(row) => {
                if !matches!(*waiting, Some((Some(r), _)) if r == row) {
                    *waiting = Some((Some(row), now));
                }
            }
            Round::Unread => {
                if waiting.is_none() {
                    *waiting = Some((None, now));
                }
            }
        }
    }

    /// How long the outbox's oldest event has waited for the broker, as this instance's relay
    /// last saw it (from the round that first found it waiting); `None` when the outbox was
    /// empty at the relay's last round. What to alert on (with the feature `metrics`, the gauge
    /// `di_outbox_oldest_waiting_seconds`); readiness fails on it only with `outbox.stall_ms`.
    pub fn oldest_waiting(&self) -> Option<Duration> {
        let waiting = *self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        waiting.map(|(_, since)| since.elapsed())
    }

    /// Why readiness fails, if the oldest event has waited longer than `stall_ms`.
    fn stalled(&self) -> Option<String> {
        let limit = Duration::from_millis(self.settings.stall_ms);
        if limit.is_zero() {
            return None;
        }
        let waiting = *self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let (row, since) = waiting?;
        let waited = since.elapsed();
        (waited >= limit).then(|| match row {
            Some(row) => format!(
                "the outbox's oldest event (row {row}) has waited {} s for the broker (`outbox.stall_ms` is {} ms)",
                waited.as_secs(),
                limit.as_millis()
            ),
            None => format!("the outbox could not be read for {} s", waited.as_secs()),
        })
    }

    /// Relays after each commit that wrote to the outbox, and every `poll_ms` what no instance
    /// relayed; once more when told to stop. Begins once this instance has subscribed (its own
    /// subscription and the shared ones): a new subscription starts with the events published
    /// from then on, so that this instance's own handlers get what its first round publishes.
    async fn relay(&self, stop: &Stop) {
        let mut subscribed = self.subscribed.subscribe();
        tokio::select! {
            () = stop.stopped() => return,
            _ = subscribed.wait_for(|&(open, lanes)| lanes > 0 && open >= lanes) => {}
        }
        let poll = Duration::from_millis(self.settings.poll_ms.max(1));
        let linger = Duration::from_millis(self.settings.linger_ms);
        let mut purged = Instant::now();
        loop {
            self.republish_if_lost().await;
            let round = self.relay_all().await;
            self.note(round);
            waiting_metric(self.oldest_waiting());
            self.purge(&mut purged).await;
            tokio::select! {
                () = stop.stopped() => break,
                () = self.wake.notified() => {
                    if !linger.is_zero() {
                        tokio::select! {
                            () = stop.stopped() => break,
                            () = tokio::time::sleep(linger) => {}
                        }
                    }
                }
                () = tokio::time::sleep(poll) => {}
            }
        }
        self.relay_all().await;
    }

    /// After this instance's subscription ended (the broker lost its consumer, perhaps all of
    /// its state) and it subscribed again: the events published within `keep_ms` are made
    /// pending again, so that the relay publishes them once more. Every instance recognises
    /// those it handled (by id), and the broker stores one of each within its window.
    async fn republish_if_lost(&self) {
        if self.settings.keep_ms == 0 || !self.all_subscribed() || !self.lost.swap(false, Ordering::AcqRel) {
            return;
        }
        let since = now_ms().saturating_sub(i64::try_from(self.settings.keep_ms).unwrap_or(i64::MAX));
        match self.store.republish(since).await {
            Ok(count) => {
                self.republished.fetch_add(count, Ordering::Relaxed);
                tracing::warn!(
                    events = count,
                    "the subscription ended: the events published lately are published again"
                );
            }
            Err(error) => {
                self.lost.store(true, Ordering::Release);
                tracing::error!(%error, "making the events published lately pending again failed; the relay tries again");
            }
        }
    }

    /// Deletes the events published more than `keep_ms` ago, every quarter of it (at most
    /// every second); at once with `keep_ms` 0.
    async fn purge(&self, last: &mut Instant) {
        let keep = Duration::from_millis(self.settings.keep_ms);
        if !keep.is_zero() && last.elapsed() < (keep / 4).max(Duration::from_secs(1)) {
            return;
        }
        *last = Instant::now();
        let before = now_ms().saturating_sub(i64::try_from(self.settings.keep_ms).unwrap_or(i64::MAX));
        let before = if keep.is_zero() { i64::MAX } else { before };
        if let Err(error) = self.store.purge(before).await {
            tracing::warn!(%error, "deleting the events published long ago failed; the relay tries again");
        }
        self.purge_dead_letters_by_age().await;
        if self.settings.inbox_keep_ms > 0 {
            let before = now_ms().saturating_sub(i64::try_from(self.settings.inbox_keep_ms).unwrap_or(i64::MAX));
            if let Err(error) = self.store.purge_handled(before).await {
                tracing::warn!(%error, "deleting the inbox's old records failed; the relay tries again");
            }
        }
    }

    /// Deletes the dead letters older than `dead_letters_keep_ms` (unless 0), and notes when
    /// the oldest left was set aside.
    async fn purge_dead_letters_by_age(&self) {
        let keep = self.settings.dead_letters_keep_ms;
        if keep > 0 {
            let before = now_ms().saturating_sub(i64::try_from(keep).unwrap_or(i64::MAX));
            if let Err(error) = self.store.purge_dead_letters(before).await {
                tracing::warn!(%error, "deleting old dead letters failed; the relay tries again");
            }
        }
        match self.store.dead_letters(0, 1).await {
            Ok(oldest) => {
                let at = oldest.first().map(|letter| letter.at);
                *self.oldest_dead.lock().unwrap_or_else(|e| e.into_inner()) = at;
                oldest_dead_letter_metric(at);
            }
            Err(error) => tracing::warn!(%error, "reading the oldest dead letter failed"),
        }
    }

    /// Whether each of this instance's subscriptions is open.
    fn all_subscribed(&self) -> bool {
        let (open, lanes) = *self.subscribed.borrow();
        lanes > 0 && open >= lanes
    }

    /// This instance's subscriptions: its own, and one shared with the cluster for each
    /// once-per-cluster handler of an external event in the App.
    fn lanes(&self) -> Vec<Lane> {
        let recent = || Mutex::new(Recent::new(self.settings.remember));
        let own = Lane { shared: None, receiver: self.receiver.clone(), recent: recent(), waiting: Mutex::default() };
        let shared = self.bus.handlers().into_iter().filter(|h| h.once == Once::PerCluster).filter_map(|handler| {
            let event = self.by_type.get(&handler.event)?;
            Some(Lane {
                receiver: format!("{CLUSTER}{}", handler.name),
                shared: Some((handler.name, event.name)),
                recent: recent(),
                waiting: Mutex::default(),
            })
        });
        std::iter::once(own).chain(shared).collect()
    }

    /// Hands each event `lane`'s subscription brings to its handlers, once, and acknowledges
    /// it; subscribes again (after a second) when the subscription ends or fails.
    async fn receive(&self, lane: &Lane, stop: &Stop) {
        loop {
            let subscription = tokio::select! {
                () = stop.stopped() => return,
                subscription = async {
                    match &lane.shared {
                        None => self.broker.subscribe().await,
                        Some((handler, event)) => self.broker.subscribe_shared(handler, event).await,
                    }
                } => subscription,
            };
            let mut subscription = match subscription {
                Ok(subscription) => {
                    self.subscriptions.fetch_add(1, Ordering::Relaxed);
                    self.subscribed.send_modify(|(open, _)| *open += 1);
                    subscription
                }
                Err(error) => {
                    tracing::error!(%error, group = lane.shared.as_ref().map(|(h, _)| h.as_str()), "subscribing to the broker failed; trying again in a second");
                    tokio::select! {
                        () = stop.stopped() => return,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            };
            loop {
                let next = tokio::select! {
                    () = stop.stopped() => return,
                    next = subscription.next() => next,
                };
                match next {
                    Some(Ok(received)) => self.take(lane, received).await,
                    Some(Err(error)) => tracing::error!(%error, "receiving from the broker failed"),
                    None => {
                        tracing::warn!(
                            group = lane.shared.as_ref().map(|(h, _)| h.as_str()),
                            "the broker ended the subscription; subscribing again"
                        );
                        self.lost.store(true, Ordering::Release);
                        self.subscribed.send_modify(|(open, _)| *open = open.saturating_sub(1));
                        break;
                    }
                }
            }
        }
    }

    /// One received event: handled, telling the broker every [`Broker::progress_every`] that
    /// it still is; then acknowledged, unless [`handle`](Self::handle) leaves it.
    async fn take(&self, lane: &Lane, received: Received) {
        let Received { id, name, payload, headers, ack } = received;
        let handling = self.handle(lane, &id, &name, &payload, &headers);
        let take = match self.broker.progress_every() {
            None => handling.await,
            Some(every) => {
                tokio::pin!(handling);
                loop {
                    tokio::select! {
                        take = &mut handling => break take,
                        () = tokio::time::sleep(every) => {
                            if let Err(error) = ack.progress().await {
                                tracing::warn!(event = ?name, id = ?id, %error, "telling the broker an event is still being handled failed");
                            }
                        }
                    }
                }
            }
        };
        let acked = match take {
            Take::Ack => ack.ack().await,
            Take::Leave => return,
            Take::Later(wait) => ack.nak(wait).await,
        };
        if let Err(error) = acked {
            tracing::warn!(event = ?name, id = ?id, %error, "acknowledging an event failed; it will come again, and be recognised");
        }
    }

    /// One received event: delivered to `lane`'s handlers unless handled lately, each
    /// handler's scope seeded with the lineage its headers carry (the emitting request's
    /// tenant, trace, id); a handler that fails is tried again (its attempts, with back-off),
    /// then the event is a dead letter for it; an event undecodable or of no type this instance
    /// knows is a dead letter too. Whether to acknowledge it: not if the App refused it (gone,
    /// or shutting down) or a dead letter could not be kept, so that the broker brings it
    /// again.
    async fn handle(&self, lane: &Lane, id: &str, name: &str, payload: &[u8], headers: &[(String, String)]) -> Take {
        // An event without an id (published by something else) cannot be recognised again.
        let seen = !id.is_empty() && lane.recent.lock().unwrap_or_else(|e| e.into_inner()).contains(id);
        if seen {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
            return Take::Ack;
        }
        // Of a key, for a once-per-cluster handler: in the key's order.
        let order = lane.shared.as_ref().and_then(|_| order_of(headers));
        let incoming = Incoming { id, name, payload, headers, receiver: &lane.receiver };
        // The handlers the inbox says handled it (a delivery before a restart, or by another
        // instance of the cluster).
        let inbox = Inbox::new(self, &lane.receiver, id, order.clone());
        // A once-per-cluster handler done with the event (handled, a dead letter) lets the
        // key's next one go on, also when the event could not be decoded or handled again.
        let done_with = async |inbox: &Inbox<'_>| match &lane.shared {
            Some((handler, _)) => inbox.advance(handler).await,
            None => true,
        };
        let done = match self.by_name.get(name) {
            Some(event) => {
                let handled = inbox.handled().await;
                if let (Some((handler, _)), Some((key, seq))) = (&lane.shared, &order)
                    && handled.is_empty()
                    && let Some(wait) = self.not_yet(lane, handler, id, key, *seq).await
                {
                    return Take::Later(wait);
                }
                let lineage = lineage_from_headers(&self.bus, headers);
                let mark = |handler: &str| inbox.mark(handler);
                let to = inbox.first(lane.to(&handled), &mark);
                match handling(id, (event.deliver)(&self.bus, payload, &lineage, to)).await {
                    // No handler ran: neither remembered nor acknowledged, it comes again.
                    Ok(each) if each.refused => {
                        self.refused.fetch_add(1, Ordering::Relaxed);
                        return Take::Leave;
                    }
                    Ok(each) if each.runs.is_empty() && !handled.is_empty() => {
                        self.duplicates.fetch_add(1, Ordering::Relaxed);
                        done_with(&inbox).await
                    }
                    Ok(each) => {
                        self.delivered.fetch_add(1, Ordering::Relaxed);
                        inbox.settle(&each).await && self.retry_failed(event, &lineage, &each, incoming, &inbox).await
                    }
                    Err(error) => {
                        let mut dead = incoming.letter(Why::Undecodable);
                        dead.error = error.to_string();
                        self.set_dead(&dead).await && done_with(&inbox).await
                    }
                }
            }
            None => {
                let mut dead = incoming.letter(Why::Unknown);
                dead.error = format!("no event type of this instance is named \"{name}\"");
                self.set_dead(&dead).await && done_with(&inbox).await
            }
        };
        if !done {
            return Take::Leave;
        }
        if !id.is_empty() {
            lane.recent.lock().unwrap_or_else(|e| e.into_inner()).insert(id.to_owned());
        }
        Take::Ack
    }

    /// How long event `id`, number `seq` of `key`, is to be given back for, if it is not
    /// `handler`'s to handle now: the one before it is not handled (nor a dead letter) yet.
    /// Given back again and again, it waits longer each time (25 ms, doubled, at most 250 ms). A key
    /// whose beginning the handler never had (no record of it: the handler deployed after the
    /// key's first events, or its records purged) waits `outbox.order_wait_ms` from the first
    /// time this instance gave the event back, then goes on. An order that cannot be read is
    /// waited for.
    async fn not_yet(&self, lane: &Lane, handler: &str, id: &str, key: &str, seq: u64) -> Option<Duration> {
        if seq <= 1 {
            return None;
        }
        let done = match self.store.done_upto(&lane.receiver, handler, key).await {
            Ok(done) => done,
            Err(error) => {
                tracing::warn!(id, %error, "reading how far a handler is with its key's events failed; the event waits");
                Some(0)
            }
        };
        let mut waiting = lane.waiting.lock().unwrap_or_else(|e| e.into_inner());
        if done.is_some_and(|done| done + 1 >= seq) {
            waiting.remove(id);
            return None;
        }
        let limit = Duration::from_millis(self.settings.order_wait_ms);
        if waiting.len() >= 10_000 {
            // Given back to another instance since: forgotten after a while.
            waiting.retain(|_, (since, _)| since.elapsed() < limit.max(Duration::from_secs(60)).saturating_mul(10));
        }
        let (since, times) = waiting.entry(id.to_owned()).or_insert_with(|| (Instant::now(), 0));
        if done.is_none() && since.elapsed() >= limit {
            waiting.remove(id);
            tracing::warn!(
                id,
                handler,
                seq,
                "an event of a key waited `outbox.order_wait_ms` for the ones before it, of which this handler has no record (deployed after them, or its records purged): handled now"
            );
            return None;
        }
        *times = times.saturating_add(1);
        Some(NOT_YET.saturating_mul(1 << (*times - 1).min(6)).min(Duration::from_millis(250)))
    }

    /// Tries each handler that failed `each` again, alone, as its settings say; one still
    /// failing after its last try makes the event a dead letter for it. `false` if a dead
    /// letter could not be kept, or the App refused a try (shutting down): the event is then
    /// left unacknowledged.
    async fn retry_failed(
        &self,
        event: &ExternalEvent,
        lineage: &Lineage,
        each: &Deliveries,
        incoming: Incoming<'_>,
        inbox: &Inbox<'_>,
    ) -> bool {
        let (mut done, payload) = (true, incoming.payload);
        let mark = |handler: &str| inbox.mark(handler);
        for run in each.failed() {
            let (attempts, first) = self.settings.policy(&run.handler);
            let (mut tried, mut error) = (1, run.error.clone());
            while let Some(failed) = error.clone()
                && tried < attempts
            {
                tokio::time::sleep(backoff(first, tried)).await;
                // Another delivery of the event handled it meanwhile (its record is why this
                // try failed), or the try's commit succeeded though its answer was lost.
                if inbox.has(&run.handler).await == Some(true) {
                    error = None;
                    break;
                }
                tried += 1;
                self.retries.fetch_add(1, Ordering::Relaxed);
                retry_metric();
                let to = inbox.first(DeliverTo::only(&run.handler), &mark);
                let again = handling(incoming.id, (event.deliver)(&self.bus, payload, lineage, to)).await;
                error = match again {
                    Ok(again) if again.refused => return false,
                    Ok(again) => {
                        if !inbox.settle(&again).await {
                            return false;
                        }
                        again.failed().next().and_then(|run| run.error.clone())
                    }
                    Err(decode) => Some(format!("{failed}; then: {decode}")),
                };
            }
            // The last try too: handled after all if its record is there; unknown (the
            // database restarting), the event is left unacknowledged, to be read again.
            if error.is_some() {
                match inbox.has(&run.handler).await {
                    Some(true) => error = None,
                    Some(false) => {}
                    None => return false,
                }
            }
            if let Some(error) = error {
                let mut dead = incoming.letter(Why::Failed { handler: run.handler.clone() });
                (dead.error, dead.attempts) = (error, tried);
                let kept = self.set_dead(&dead).await;
                // The key's next event goes on: this one waits as a dead letter.
                done &= kept && inbox.advance(&run.handler).await;
            }
        }
        done
    }

    /// Keeps `letter` among the dead letters, logged with its event's name, id and reason
    /// (never its payload nor its error, which may carry a client's data); a store that fails
    /// (a database busy or restarting) is tried again for about 2.5 s. `false` if it still
    /// fails: the event is then left unacknowledged, to come again.
    async fn set_dead(&self, letter: &DeadLetter) -> bool {
        let mut wait = Duration::from_millis(10);
        let kept = loop {
            match self.store.dead_letter(letter).await {
                Ok(number) => break Ok(number),
                Err(error) if wait < Duration::from_secs(2) => {
                    tracing::warn!(event = ?letter.name, id = ?letter.event_id, %error, "keeping a dead letter failed; trying again");
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                Err(error) => break Err(error),
            }
        };
        match kept {
            Ok(number) => {
                self.dead_letters.fetch_add(1, Ordering::Relaxed);
                dead_letter_metric(letter.why.kind());
                tracing::error!(
                    event = ?letter.name,
                    id = ?letter.event_id,
                    why = letter.why.kind(),
                    handler = letter.why.handler(),
                    attempts = letter.attempts,
                    dead_letter = number,
                    "an event is a dead letter; list, replay or discard it through the outbox's dead letters"
                );
                true
            }
            Err(error) => {
                tracing::error!(event = ?letter.name, id = ?letter.event_id, %error, "keeping a dead letter failed; the event is left unacknowledged, to come again");
                false
            }
        }
    }

    /// Up to `limit` dead letters numbered above `after`, oldest first: a page of them (the
    /// next page after the last number of this one).
    ///
    /// # Errors
    ///
    /// The store's, if it could not be read.
    pub async fn dead_letters(&self, after: i64, limit: u32) -> Result<Vec<DeadLetter>, BoxError> {
        self.store.dead_letters(after, limit).await
    }

    /// The dead letter numbered `id`, if it is kept.
    ///
    /// # Errors
    ///
    /// The store's, if it could not be read.
    pub async fn dead_letter(&self, id: i64) -> Result<Option<DeadLetter>, BoxError> {
        self.store.dead_letter_by_id(id).await
    }

    /// Removes the dead letter numbered `id` without replaying it; whether it was kept.
    ///
    /// # Errors
    ///
    /// The store's.
    pub async fn discard(&self, id: i64) -> Result<bool, BoxError> {
        self.store.remove_dead_letter(id).await
    }

    /// Deletes the dead letters set aside before `before`; how many.
    ///
    /// # Errors
    ///
    /// The store's.
    pub async fn purge_dead_letters(&self, before: std::time::SystemTime) -> Result<u64, BoxError> {
        let since = before.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        self.store.purge_dead_letters(i64::try_from(since.as_millis()).unwrap_or(i64::MAX)).await
    }

    /// Replays the dead letter numbered `id`, as its [`Why`] says: a refused event is written to
    /// the outbox again (for every instance); a handler's is handed to that handler, on this
    /// instance; an undecodable one or one of an unknown type to every handler of this
    /// instance that each instance runs (or, received by a once-per-cluster handler's shared
    /// subscription, to that handler), decoded by the code now running. Each handler runs in a scope seeded with the
    /// event's lineage: the tenant and trace of the request that emitted it.
    ///
    /// What can be told first is: a type this instance does not know, JSON it does not decode,
    /// a handler not in this program answer [`Replayed::Refused`], and the dead letter stays as
    /// it is. Then the dead letter is taken (removed) before the event goes anywhere, so that
    /// two replays of it at once (two operators) hand it over once: the other finds none
    /// ([`Replayed::NotFound`]). A handler that fails again leaves a new dead letter in its
    /// place; a replay that cannot go on once it took it (the App shutting down, the outbox
    /// unwritable) keeps it again, under a new number.
    ///
    /// # Errors
    ///
    /// The store's.
    pub async fn replay(&self, id: i64) -> Result<Replayed, BoxError> {
        let Some(letter) = self.store.dead_letter_by_id(id).await? else { return Ok(Replayed::NotFound) };
        if let Some(why) = self.cannot_replay(&letter) {
            return Ok(Replayed::Refused(why));
        }
        // Taken: a replay of it beside this one finds none.
        if !self.store.remove_dead_letter(id).await? {
            return Ok(Replayed::NotFound);
        }
        if letter.why == Why::Refused {
            if let Err(error) =
                self.store.insert(&letter.event_id, &letter.name, &letter.payload, &letter.headers).await
            {
                self.keep_again(&letter).await;
                return Err(error);
            }
            self.wake.notify_one();
            return Ok(Replayed::Republished);
        }
        let Some(event) = self.by_name.get(letter.name.as_str()) else { unreachable!("checked above") };
        let lineage = lineage_from_headers(&self.bus, &letter.headers);
        // A once-per-cluster handler's letter names it, or its receiver does (an event its
        // shared subscription could not decode).
        let only = letter.why.handler().or_else(|| letter.receiver.strip_prefix(CLUSTER));
        // The inbox of the receiver that had the event; a dead letter that names none (kept by
        // a store that does not keep it) is replayed without one: at least once.
        let id = if letter.receiver.is_empty() { "" } else { letter.event_id.as_str() };
        let inbox = Inbox::new(self, &letter.receiver, id, None);
        let recorded = match only {
            Some(handler) => inbox.has(handler).await,
            None => Some(false),
        };
        let Some(recorded) = recorded else {
            let number = self.keep_again(&letter).await;
            return Ok(Replayed::Refused(format!(
                "the inbox could not be read; the dead letter is kept as number {number:?}"
            )));
        };
        if let Some(handler) = only
            && recorded
        {
            tracing::warn!(event = ?letter.name, id = ?letter.event_id, handler, "a dead letter's handler has its record in the inbox (its last try committed after all): replayed as handled, without running it again");
            return Ok(Replayed::Handled);
        }
        let handled = inbox.handled().await;
        let mark = |handler: &str| inbox.mark(handler);
        let to = match only {
            Some(handler) => DeliverTo::only(handler),
            None => DeliverTo::all().once(Once::PerInstance).except(&handled),
        };
        let to = inbox.first(to, &mark);
        let each = match handling(&letter.event_id, (event.deliver)(&self.bus, &letter.payload, &lineage, to)).await {
            // The handler the dead letter names is not in this App (another deploy's objects).
            Ok(each) if !each.refused && only.is_some() && each.runs.is_empty() => {
                let number = self.keep_again(&letter).await;
                let why = format!("this App has no handler `{}`", only.unwrap_or_default());
                return Ok(Replayed::Refused(format!("{why}; the dead letter is kept as number {number:?}")));
            }
            Ok(each) if !each.refused => {
                // Without the event's key (a replay): nothing to advance.
                inbox.settle(&each).await;
                each
            }
            refused => {
                let number = self.keep_again(&letter).await;
                let why = match refused {
                    Err(error) => format!("the event is still undecodable: {error}"),
                    Ok(_) => "the App is shutting down".to_owned(),
                };
                return Ok(Replayed::Refused(format!("{why}; the dead letter is kept as number {number:?}")));
            }
        };
        let mut again = Vec::new();
        for run in each.failed() {
            let mut dead = letter.clone();
            dead.why = Why::Failed { handler: run.handler.clone() };
            dead.error = run.error.clone().unwrap_or_default();
            dead.attempts = if only.is_some() { letter.attempts + 1 } else { 1 };
            dead.at = now_ms();
            again.push(self.store.dead_letter(&dead).await?);
            self.dead_letters.fetch_add(1, Ordering::Relaxed);
        }
        Ok(if again.is_empty() { Replayed::Handled } else { Replayed::FailedAgain(again) })
    }

    /// Why `letter` cannot be replayed on this instance, if that can be told before it is
    /// taken.
    fn cannot_replay(&self, letter: &DeadLetter) -> Option<String> {
        if letter.why == Why::Refused {
            return None;
        }
        let Some(event) = self.by_name.get(letter.name.as_str()) else {
            return Some(format!("no event type of this instance is named \"{}\"", letter.name));
        };
        if let Err(error) = (event.decodes)(&letter.payload) {
            return Some(format!("the event is still undecodable: {error}"));
        }
        match letter.why.handler() {
            Some(handler) if !handler_names().any(|name| name == of_type(handler)) => {
                Some(format!("this program has no handler `{handler}` of \"{}\"", letter.name))
            }
            _ => None,
        }
    }

    /// Keeps `letter` again, taken for a replay that could not go on; its new number (`None`
    /// if the store failed, logged).
    async fn keep_again(&self, letter: &DeadLetter) -> Option<i64> {
        match self.store.dead_letter(letter).await {
            Ok(number) => Some(number),
            Err(error) => {
                tracing::error!(event = ?letter.name, id = ?letter.event_id, %error, "keeping again a dead letter whose replay could not go on failed; it is lost");
                None
            }
        }
    }

    /// When the oldest dead letter was set aside, as the relay last looked (every quarter of
    /// `keep_ms`, at most every second); `None` if there was none. With the feature `metrics`,
    /// the gauge `di_outbox_oldest_dead_letter_seconds`.
    pub fn oldest_dead_letter(&self) -> Option<std::time::SystemTime> {
        let at = (*self.oldest_dead.lock().unwrap_or_else(|e| e.into_inner()))?;
        Some(std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(at).unwrap_or(0)))
    }
}

/// A received event, borrowed while it is handled.
#[derive(Clone, Copy)]
struct Incoming<'a> {
    id: &'a str,
    name: &'a str,
    payload: &'a [u8],
    headers: &'a [(String, String)],
    /// The subscription that received it.
    receiver: &'a str,
}

impl Incoming<'_> {
    /// A dead letter of it, for `why`.
    fn letter(self, why: Why) -> DeadLetter {
        let mut letter = DeadLetter::new(why, self.id, self.name, self.payload.to_vec(), self.headers.to_vec());
        letter.receiver = self.receiver.to_owned();
        letter
    }
}

/// The inbox's side of one delivery of the event `id` under `receiver`: what the inbox says
/// handled it, the record each handler's scope emits, and the records a handler could not
/// write in its transaction (a read-only one), written once it has succeeded.
struct Inbox<'a> {
    outbox: &'a Outbox,
    receiver: &'a str,
    id: &'a str,
    /// The event's key and number, for a once-per-cluster handler's: recorded with the record.
    order: Option<(String, u64)>,
    /// Each record emitted, by handler, and whether its scope wrote it.
    emitted: Mutex<Vec<(String, Arc<AtomicBool>)>>,
}

impl<'a> Inbox<'a> {
    fn new(outbox: &'a Outbox, receiver: &'a str, id: &'a str, order: Option<(String, u64)>) -> Inbox<'a> {
        Inbox { outbox, receiver, id, order, emitted: Mutex::new(Vec::new()) }
    }

    /// Records that `handler` is done with the event among its key's, on its own (a dead
    /// letter, or a record written after the handler); nothing for an event of no key. A store
    /// that fails is tried again for about 2.5 s; `false` if it still fails (logged): the
    /// event is then left unacknowledged, to come again.
    async fn advance(&self, handler: &str) -> bool {
        let Some((key, seq)) = &self.order else { return true };
        let mut wait = Duration::from_millis(10);
        loop {
            match self.outbox.store.advance(self.receiver, handler, key, *seq, now_ms()).await {
                Ok(()) => return true,
                Err(error) if wait < Duration::from_secs(2) => {
                    tracing::warn!(id = ?self.id, handler, %error, "recording how far a handler is with its key's events failed; trying again");
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                Err(error) => {
                    tracing::error!(id = ?self.id, handler, %error, "recording how far a handler is with its key's events failed; the event is left unacknowledged");
                    return false;
                }
            }
        }
    }

    /// The handlers the inbox records as having handled the event (none for an event without
    /// an id, which cannot be recognised). A store that cannot be read (the database
    /// restarting) is taken as having none, logged: the handlers run, a transactional one's
    /// record still refused if there (its transaction rolled back), another's at least once;
    /// the events do not wait for the database.
    async fn handled(&self) -> Vec<String> {
        self.read().await.unwrap_or_default()
    }

    /// Whether the inbox records `handler` as having handled the event; `None` if the store
    /// failed (logged).
    async fn has(&self, handler: &str) -> Option<bool> {
        self.read().await.map(|handled| handled.iter().any(|h| h == handler))
    }

    /// The inbox's records of the event (none without an id); `None` if the store failed,
    /// logged.
    async fn read(&self) -> Option<Vec<String>> {
        if self.id.is_empty() {
            return Some(Vec::new());
        }
        match self.outbox.store.handled(self.receiver, self.id).await {
            Ok(handled) => Some(handled),
            Err(error) => {
                tracing::warn!(id = ?self.id, %error, "reading the inbox failed");
                None
            }
        }
    }

    /// `to`, each handler's scope emitting its record first (none for an event without an id).
    fn first(&self, to: DeliverTo<'a>, mark: &'a (dyn Fn(&str) + Sync)) -> DeliverTo<'a> {
        if self.id.is_empty() { to } else { to.first(mark) }
    }

    /// Emits, in a handler's scope, the record that `handler` handled the event: sent
    /// ([`EventTransport::send`]) in the scope's completion phase, in the handler's transaction
    /// when it has one, if the handler succeeded.
    fn mark(&self, handler: &str) {
        let written = Arc::new(AtomicBool::new(false));
        self.emitted.lock().unwrap_or_else(|e| e.into_inner()).push((handler.to_owned(), written.clone()));
        self.outbox.bus.emit(Handled {
            receiver: self.receiver.to_owned(),
            event_id: self.id.to_owned(),
            handler: handler.to_owned(),
            order: self.order.clone(),
            written,
        });
    }

    /// Writes, on its own, the record of each handler of `each` that succeeded without its
    /// scope writing it (its transaction was read-only). A failure is logged: that handler
    /// runs again if the event comes again (at least once). Then, for an event of a key, how
    /// far that handler is with the key's: `false` if that could not be written, so that the
    /// event is left unacknowledged and comes again (its record there, it then only writes
    /// how far).
    async fn settle(&self, each: &Deliveries) -> bool {
        let mut advanced = true;
        for run in each.runs.iter().filter(|run| run.error.is_none()) {
            let unwritten = {
                let emitted = self.emitted.lock().unwrap_or_else(|e| e.into_inner());
                emitted.iter().rev().find(|(h, _)| *h == run.handler).is_some_and(|(_, w)| !w.load(Ordering::Acquire))
            };
            if unwritten {
                if let Err(error) =
                    self.outbox.store.record_handled(self.receiver, self.id, &run.handler, now_ms()).await
                {
                    tracing::warn!(id = ?self.id, handler = %run.handler, %error, "recording a handled event in the inbox failed; the handler runs again if the event comes again");
                }
                advanced &= self.advance(&run.handler).await;
            }
        }
        advanced
    }
}

/// 128 random bits as 32 hex digits: an event's id, unique across services and databases
/// (std's `RandomState` is seeded by the OS and differs per call).
fn new_event_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let half = |salt: u64| {
        let mut hasher = std::hash::RandomState::new().build_hasher();
        hasher.write_u64(count);
        hasher.write_u128(nanos);
        hasher.write_u64(salt);
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}

/// The record that a handler handled a received event, emitted in the handler's scope
/// ([`Outbox::mark`]) and written to the inbox when the scope commits.
struct Handled {
    receiver: String,
    event_id: String,
    handler: String,
    /// The event's key and number, recorded with it (a once-per-cluster handler's).
    order: Option<(String, u64)>,
    /// Set once written in the handler's scope.
    written: Arc<AtomicBool>,
}

/// A handler's scope found the inbox's record of its event written: another delivery of the
/// event (redelivered while this one ran) handled it first.
#[derive(Debug, thiserror::Error)]
#[error("handler `{handler}` handled this event already, in another delivery of it")]
struct HandledAlready {
    handler: String,
}

impl EventTransport for Outbox {
    fn carries(&self, event: TypeId) -> bool {
        self.by_type.contains_key(&event) || event == TypeId::of::<Handled>()
    }

    fn send(&self, event: Arc<dyn Any + Send + Sync>, lineage: &Lineage) -> UnitFuture {
        if let Some(handled) = event.downcast_ref::<Handled>() {
            let store = self.store.clone();
            let (receiver, event_id) = (handled.receiver.clone(), handled.event_id.clone());
            let (handler, written) = (handled.handler.clone(), handled.written.clone());
            let order = handled.order.clone();
            // Outside a writable transaction of the store's data source (none, a read-only one,
            // one on another source), a record written now would commit before the handler's
            // work does: written by the outbox once the handler has succeeded.
            if !store.in_writable_transaction() {
                return Box::pin(async { Ok(()) });
            }
            return Box::pin(async move {
                match store.record_handled(&receiver, &event_id, &handler, now_ms()).await {
                    Ok(Recorded::Written) => {
                        // With the record, how far the handler is with the key's events: a
                        // failure fails the scope (its transaction rolls back, the handler is
                        // tried again), lest the key's next events wait for it.
                        if let Some((key, seq)) = order {
                            store.advance(&receiver, &handler, &key, seq, now_ms()).await?;
                        }
                        written.store(true, Ordering::Release);
                        Ok(())
                    }
                    Ok(Recorded::Already) => Err(HandledAlready { handler }.into()),
                    // Bookkeeping, not the handler's work: it does not fail the handler (whose
                    // transaction, if the database is gone, fails on its own). The outbox
                    // tries again once the handler succeeded.
                    Err(error) => {
                        tracing::warn!(id = ?event_id, handler = %handler, %error, "recording a handled event in the handler's scope failed; the outbox tries again after the handler");
                        Ok(())
                    }
                }
            });
        }
        let Some(&external) = self.by_type.get(&(*event).type_id()) else {
            return Box::pin(async { Err("the outbox was given an event type it does not carry".into()) });
        };
        let (store, broker, written) = (self.store.clone(), self.broker.clone(), self.written.clone());
        // The emitting request's lineage (its tenant, trace, id), as it was when it emitted the
        // event: stored and published with it, for its handlers' scopes in every instance.
        let mut headers: Vec<(String, String)> =
            lineage.headers().map(|(name, value)| (name.to_owned(), value)).collect();
        Box::pin(async move {
            let payload = (external.encode)(&*event)
                .map_err(|e| format!("encoding event `{}` for the outbox: {e}", external.name))?;
            // Of a key: numbered among its events, in the transaction it commits in.
            if let Some(key) = external.key {
                // Numbered per event type: a handler takes one type, and waits for its own.
                let key = format!("{}:{}", external.name, encode_key(&key(&*event)));
                let seq = store.sequence(&key).await.map_err(|source| Failed { event: external.name, source })?;
                headers.push((KEY_HEADER.to_owned(), key));
                headers.push((SEQ_HEADER.to_owned(), seq.to_string()));
            }
            let id = new_event_id();
            // An event the broker would never take fails the request now, rather than being
            // acknowledged and set aside by the relay.
            let outgoing = Outgoing { id: &id, name: external.name, payload: &payload, headers: &headers };
            if let Some(why) = broker.refuses(outgoing) {
                return Err(
                    format!("event `{}` ({}) cannot be sent: {why}", external.name, (external.type_name)()).into()
                );
            }
            store
                .insert(&id, external.name, &payload, &headers)
                .await
                .map_err(|source| Failed { event: external.name, source })?;
            written.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
    }

    /// Wakes the relay for a committed event (not for an inbox record, which it does not
    /// relay).
    fn released(&self, event: TypeId, committed: bool) {
        if committed && event != TypeId::of::<Handled>() {
            self.wake.notify_one();
        }
    }
}

/// Readiness (`outbox`): ready once this instance is subscribed to the broker, so that a load
/// balancer sends it requests only when it will also receive the events, and, with
/// `outbox.stall_ms` set, while the outbox's oldest event has waited no longer than that for
/// the broker.
impl HealthCheck for Outbox {
    fn check(self: Arc<Self>) -> UnitFuture {
        Box::pin(async move {
            if !self.all_subscribed() {
                return Err("not subscribed to the broker (yet)".into());
            }
            if self.settings.unready_on_dead_letters && self.oldest_dead_letter().is_some() {
                return Err("the outbox keeps dead letters (`outbox.unready_on_dead_letters` is on)".into());
            }
            match self.stalled() {
                Some(why) => Err(why.into()),
                None => Ok(()),
            }
        })
    }
}

/// Writing an event to the outbox failed: keeps the store's error as its source, so that
/// `DiError::is_busy` finds a busy database through it (tegu-http answers 503).
#[derive(Debug)]
struct Failed {
    event: &'static str,
    source: BoxError,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "writing event `{}` to the outbox: {}", self.event, self.source)
    }
}

impl std::error::Error for Failed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// Sets the gauge `di_outbox_oldest_waiting_seconds`, with the feature `metrics`.
fn waiting_metric(waiting: Option<Duration>) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("di_outbox_oldest_waiting_seconds").set(waiting.map_or(0.0, |w| w.as_secs_f64()));
    #[cfg(not(feature = "metrics"))]
    let _ = waiting;
}

/// Counts a handler's try after its first (`di_outbox_retries_total`), with the feature
/// `metrics`.
fn retry_metric() {
    #[cfg(feature = "metrics")]
    metrics::counter!("di_outbox_retries_total").increment(1);
}

/// Counts a dead letter (`di_outbox_dead_letters_total`, label `why`), with the feature
/// `metrics`.
fn dead_letter_metric(why: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("di_outbox_dead_letters_total", "why" => why).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = why;
}

/// Sets the gauge `di_outbox_oldest_dead_letter_seconds` (0 without one), with the feature
/// `metrics`.
fn oldest_dead_letter_metric(at: Option<i64>) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("di_outbox_oldest_dead_letter_seconds")
        .set(at.map_or(0.0, |at| now_ms().saturating_sub(at).max(0) as f64 / 1000.0));
    #[cfg(not(feature = "metrics"))]
    let _ = at;
}

/// Counts an event set aside (`di_outbox_set_aside_total`, label `event`), with the feature
/// `metrics`.
fn set_aside_metric(event: &str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("di_outbox_set_aside_total", "event" => event.to_owned()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = event;
}

impl HostedService for Outbox {
    fn run(self: Arc<Self>, stop: Stop) -> UnitFuture {
        Box::pin(async move {
            let lanes = self.lanes();
            self.subscribed.send_modify(|(open, count)| (*open, *count) = (0, lanes.len()));
            let receiving = join_all(lanes.iter().map(|lane| Box::pin(self.receive(lane, &stop)) as _).collect());
            tokio::join!(self.relay(&stop), receiving);
            Ok(())
        })
    }

    fn on_failure(&self) -> OnFailure {
        OnFailure::Restart { first: Duration::from_millis(100), max: Duration::from_secs(10) }
    }
}
