//! NATS JetStream as tegu-outbox's [`Broker`]: [`JetStream`].
//!
//! - **Publishing**: each event goes to the subject `{subjects}.{name}` (`events.todos.completed`)
//!   of one stream, with its id as `Nats-Msg-Id`: JetStream stores one message per id within
//!   the stream's duplicate window (two minutes), so two relays of the same outbox row store
//!   it once. The relay deletes the row once the server has acknowledged it. The event's
//!   headers (the emitting request's lineage: `tegu-tenant`, `traceparent`, ...) are message
//!   headers of the same names beside it; a subscription gives them back, NATS' own (`Nats-*`)
//!   left out.
//! - **Subscribing**: each instance has a durable pull consumer of its own (`consumer` in the
//!   settings, a stable name per instance), on every subject of the stream, with explicit
//!   acknowledgements: it receives every event, resumes where it left off after a restart,
//!   and gets again what it did not acknowledge. A consumer made anew starts with the events
//!   published from then on.
//! - **Shared subscriptions** (`Broker::subscribe_shared`, for the outbox's once-per-cluster
//!   handlers): the instances share one durable pull consumer per group, `cluster-<group>-<hash>`,
//!   on the subject of the group's event, pulled one message at a time. The server gives each
//!   message to one of them and, unacknowledged after `ack_wait_ms` (an instance died), to
//!   another; a subscriber still handling one says so every third of that wait (`+WPI`).
//! - **The server's state lost**: a NATS server restarted without its JetStream store (or a
//!   stream deleted) no longer has the stream or the consumer. A publish that finds no stream
//!   creates it again (the relay publishes in its next round); a subscription whose consumer
//!   is gone (missed heartbeats, then the server says it does not know it) ends, and the
//!   instance subscribes again, creating the stream and the consumer, which starts with what
//!   was published since a minute before this instance last heard from its old one (the
//!   outbox recognises what it handled already).
//! - **Refusals**: an event larger than the server's `max_payload` or the stream's
//!   `max_msg_size` (headers included, the smaller of the two) is [`Refused`]: the outbox
//!   refuses it when it is emitted, and sets it aside if a limit was lowered since. The
//!   stream's limit is read from its info when the broker starts, when it subscribes, when a
//!   publish is refused for its size, and again in the background when the outbox asks about
//!   an event and it was read more than 5 s ago: an operator's change to the stream is seen
//!   within seconds.
//!
//! Register it with `App::builder().register(JetStream::proto())`; settings in `[nats]`: `url`
//! (required), `stream` (`"DI_EVENTS"`), `subjects` (`"events"`), `consumer` (this instance's
//! name; by default one made up at start, which a restart does not resume and the server removes
//! an hour after the instance is gone), `max_age_hours` (how long the stream keeps an event when
//! this instance creates it: a week), `ack_wait_ms` (how long the server waits for an
//! acknowledgement before delivering the event again: 30 s).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use async_nats::HeaderMap;
use async_nats::header::{HeaderName, HeaderValue};
use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::{self, consumer};
use futures_util::StreamExt;
use serde::Deserialize;
use tegu_core::futures::BoxFuture;
use tegu_core::{ProtoDef, error::BoxError, registry::Lifetime};
use tegu_outbox::{Ack, Broker, Outgoing, Received, Refused, Subscription};

/// The `[nats]` section of the configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    /// The server: `nats://127.0.0.1:4222`.
    url: String,
    /// The stream's name.
    #[serde(default = "default_stream")]
    stream: String,
    /// The first token of the events' subjects.
    #[serde(default = "default_subjects")]
    subjects: String,
    /// This instance's durable consumer.
    #[serde(default)]
    consumer: Option<String>,
    /// How long the stream keeps an event, in hours (when creating it).
    #[serde(default = "default_max_age_hours")]
    max_age_hours: u64,
    /// How long the server waits for a subscriber's acknowledgement before it delivers the
    /// event again (to another instance, for a shared consumer), in milliseconds; a
    /// subscriber still handling it says so every third of it.
    #[serde(default = "default_ack_wait_ms")]
    ack_wait_ms: u64,
}

fn default_ack_wait_ms() -> u64 {
    30_000
}

fn default_max_age_hours() -> u64 {
    7 * 24
}

fn default_stream() -> String {
    "DI_EVENTS".to_owned()
}

fn default_subjects() -> String {
    "events".to_owned()
}

/// How long JetStream remembers a message id to store it once.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// How often the server tells an idle subscription it is still there: after two missed, the
/// subscription asks whether its consumer still exists.
const HEARTBEAT: Duration = Duration::from_secs(5);

/// How far before this instance last heard from its consumer a consumer made again starts.
const RESUME_MARGIN: Duration = Duration::from_secs(60);

/// How long the stream's `max_msg_size`, read from its info, is taken as it is: `refuses`,
/// asked later than that, has it read again in the background (and answers with the last one).
const STREAM_LIMIT_FRESH: Duration = Duration::from_secs(5);

/// The stream's largest message (its `max_msg_size`, headers included), as last read from the
/// stream's info: what `refuses` compares an event with beside the server's `max_payload`.
/// Atomics, so that asking costs an emit no lock.
struct StreamLimit {
    /// In bytes; negative when the stream sets none.
    max: AtomicI64,
    /// When it was last read, in milliseconds since `since`.
    read_at: AtomicU64,
    since: Instant,
    /// A read in the background is under way.
    reading: AtomicBool,
}

impl StreamLimit {
    fn new(max: i64) -> StreamLimit {
        StreamLimit {
            max: AtomicI64::new(max),
            read_at: AtomicU64::new(0),
            since: Instant::now(),
            reading: AtomicBool::new(false),
        }
    }

    /// Records `max`, read from the stream's info now.
    fn set(&self, max: i64) {
        self.max.store(max, Ordering::Relaxed);
        let now = u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.read_at.store(now, Ordering::Relaxed);
    }

    /// The limit, if the stream has one.
    fn get(&self) -> Option<usize> {
        usize::try_from(self.max.load(Ordering::Relaxed)).ok()
    }

    /// Whether the limit was read longer than [`STREAM_LIMIT_FRESH`] ago.
    fn stale(&self) -> bool {
        let read_at = Duration::from_millis(self.read_at.load(Ordering::Relaxed));
        self.since.elapsed().saturating_sub(read_at) > STREAM_LIMIT_FRESH
    }
}

/// NATS JetStream, as the [`Broker`] of tegu-outbox's `Outbox`. See the crate's documentation.
pub struct JetStream {
    context: jetstream::Context,
    /// The stream, as it is created (again).
    stream: jetstream::stream::Config,
    subjects: String,
    consumer: String,
    /// Whether `consumer` was made up at start: the server removes it an hour after its
    /// instance is gone, since no restart will resume it.
    made_up: bool,
    /// When this instance last heard from its consumer (a message, or the consumer's info):
    /// `None` before its first subscription.
    heard: Heard,
    /// The same, for each shared consumer this instance subscribed to, by name.
    heard_shared: Mutex<std::collections::HashMap<String, Heard>>,
    /// `nats.ack_wait_ms`.
    ack_wait: Duration,
    /// A publish found no stream: the subscription checks its consumer at once.
    stream_lost: Arc<tokio::sync::Notify>,
    /// The stream's `max_msg_size`, which `refuses` checks beside the server's `max_payload`.
    limit: Arc<StreamLimit>,
}

impl std::fmt::Debug for JetStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStream").field("subjects", &self.subjects).field("consumer", &self.consumer).finish()
    }
}

impl JetStream {
    /// The proto to register: `App::builder().register(JetStream::proto())`. It connects when
    /// the App is built (a server that does not answer fails `build()`, naming `JetStream`),
    /// creates the stream if it does not exist, and provides `dyn Broker`.
    pub fn proto() -> ProtoDef {
        ProtoDef::new_async::<JetStream, _, _>(Lifetime::Singleton, |r| {
            let settings: Settings = r.config().get("nats")?;
            Ok(JetStream::connect(settings))
        })
        .provides::<JetStream, dyn Broker>(|js| js)
        .reads_config::<Settings>("nats")
    }

    async fn connect(settings: Settings) -> Result<JetStream, BoxError> {
        if !tegu_outbox::valid_name(&settings.subjects) {
            return Err(format!("`nats.subjects` is \"{}\", which is no subject prefix", settings.subjects).into());
        }
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(5))
            .connect(settings.url.as_str())
            .await
            .map_err(|e| format!("connecting to NATS: {e}"))?;
        let context = jetstream::new(client);
        let stream = jetstream::stream::Config {
            name: settings.stream.clone(),
            subjects: vec![format!("{}.>", settings.subjects)],
            duplicate_window: DUPLICATE_WINDOW,
            max_age: Duration::from_secs(settings.max_age_hours.saturating_mul(3600)),
            ..Default::default()
        };
        let created = context
            .get_or_create_stream(stream.clone())
            .await
            .map_err(|e| format!("creating the JetStream stream `{}`: {e}", settings.stream))?;
        let limit = Arc::new(StreamLimit::new(-1));
        limit.set(created.cached_info().config.max_message_size.into());
        let made_up = settings.consumer.is_none();
        let consumer = settings.consumer.unwrap_or_else(|| {
            let made_up = format!("instance-{}-{}", std::process::id(), made_up_suffix());
            tracing::warn!(consumer = %made_up, "no `nats.consumer` is set: this instance's consumer is made up, and a restart will not resume it");
            made_up
        });
        if settings.ack_wait_ms < 100 {
            return Err(format!("`nats.ack_wait_ms` is {}; give at least 100", settings.ack_wait_ms).into());
        }
        if !consumer.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(format!("`nats.consumer` is \"{consumer}\"; use letters, digits, `-` and `_`").into());
        }
        tracing::info!(stream = %settings.stream, consumer = %consumer, "JetStream ready");
        Ok(JetStream {
            context,
            stream,
            subjects: settings.subjects,
            consumer,
            made_up,
            heard: Arc::default(),
            heard_shared: Mutex::default(),
            ack_wait: Duration::from_millis(settings.ack_wait_ms.max(1)),
            stream_lost: Arc::default(),
            limit,
        })
    }

    /// This instance's consumer.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// Reads the stream's `max_msg_size` again in a task of its own, unless a read is under
    /// way (or no runtime runs this thread).
    fn read_limit(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        if self.limit.reading.swap(true, Ordering::AcqRel) {
            return;
        }
        let (context, name, limit) = (self.context.clone(), self.stream.name.clone(), Arc::clone(&self.limit));
        runtime.spawn(async move {
            match context.get_stream(&name).await {
                Ok(stream) => limit.set(stream.cached_info().config.max_message_size.into()),
                Err(error) => {
                    tracing::debug!(stream = %name, %error, "reading the JetStream stream's max_msg_size failed")
                }
            }
            limit.reading.store(false, Ordering::Release);
        });
    }
}

/// When an instance last heard from a consumer.
type Heard = Arc<Mutex<Option<SystemTime>>>;

/// The durable consumer a group shares (`cluster-`, the group's letters, digits, `-` and `_`,
/// and a hash of the whole name, so that two groups differing in other characters differ):
/// `my_app::Mailer::on_shipped` is `cluster-my_app__Mailer__on_shipped-<16 hex digits>`.
fn shared_consumer(group: &str) -> String {
    // FNV-1a: the same in every process and every build, unlike std's hashers.
    let hash = group.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let readable: String = group
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(160)
        .collect();
    format!("cluster-{readable}-{hash:016x}")
}

/// A few characters that differ between processes started in the same second.
fn made_up_suffix() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{nanos:x}")
}

/// Whether `name` is one of NATS' own headers (`Nats-Msg-Id`, `Nats-Expected-Stream`, ...), which
/// an event's headers may not set and a subscription does not give as the event's.
fn is_nats_header(name: &str) -> bool {
    name.get(..5).is_some_and(|prefix| prefix.eq_ignore_ascii_case("nats-"))
}

/// The event's own headers a NATS message can carry: a name or value NATS does not take (a
/// line break, a `:` in a name) or one of NATS' own names is left out, with a warning naming
/// the header, never its value.
fn sendable<'a>(event: &Outgoing<'a>) -> impl Iterator<Item = (HeaderName, HeaderValue)> + 'a {
    let id = event.id;
    event.headers.iter().filter_map(move |(name, value)| {
        let parsed = match (name.parse::<HeaderName>(), value.parse::<HeaderValue>()) {
            (Ok(name), Ok(value)) if !is_nats_header(name.as_ref()) => Some((name, value)),
            _ => None,
        };
        if parsed.is_none() {
            tracing::warn!(header = ?name, id, "an event's header NATS cannot carry is left out");
        }
        parsed
    })
}

impl JetStream {
    /// The headers an event is sent with: its id, which JetStream stores one message per, and
    /// its own ([`Outgoing::headers`]).
    fn headers(event: &Outgoing<'_>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, event.id);
        for (name, value) in sendable(event) {
            headers.append(name, value);
        }
        headers
    }

    /// Sends `event` to the server; the future resolves once the server stored it.
    async fn send(&self, event: Outgoing<'_>) -> Result<jetstream::context::PublishAckFuture, BoxError> {
        let subject = format!("{}.{}", self.subjects, event.name);
        let sent =
            self.context.publish_with_headers(subject, Self::headers(&event), event.payload.to_vec().into()).await;
        sent.map_err(|error| self.failed(error))
    }

    /// A publish's failure, as the outbox tells them apart: a [`Refused`] event (too large for
    /// the server or the stream), or a passing failure. A stream the server no longer has (it
    /// restarted without its store) is created again, for the relay's next round.
    fn failed(&self, error: PublishError) -> BoxError {
        let too_large = match error.kind() {
            PublishErrorKind::MaxPayloadExceeded => true,
            PublishErrorKind::Other => {
                let stream_limit = std::error::Error::source(&error)
                    .and_then(|source| source.downcast_ref::<jetstream::Error>())
                    .is_some_and(|e| e.error_code() == jetstream::ErrorCode::STREAM_MESSAGE_EXCEEDS_MAXIMUM);
                if stream_limit {
                    // The stream's limit was lowered since it was read: `refuses` says so from
                    // the next event on.
                    self.read_limit();
                }
                stream_limit
            }
            PublishErrorKind::StreamNotFound => {
                self.stream_lost.notify_waiters();
                let (context, stream, limit) = (self.context.clone(), self.stream.clone(), Arc::clone(&self.limit));
                tokio::spawn(async move {
                    match context.get_or_create_stream(stream.clone()).await {
                        Ok(created) => {
                            limit.set(created.cached_info().config.max_message_size.into());
                            tracing::warn!(stream = %stream.name, "the JetStream stream was gone (a server restarted without its store?); created again")
                        }
                        Err(error) => {
                            tracing::warn!(stream = %stream.name, %error, "the JetStream stream is gone, and creating it again failed")
                        }
                    }
                });
                false
            }
            _ => false,
        };
        if too_large { Box::new(Refused(Box::new(error))) } else { Box::new(error) }
    }
}

impl Broker for JetStream {
    /// This instance's consumer's name (`nats.consumer`).
    fn receiver(&self) -> String {
        self.consumer.clone()
    }

    fn publish<'a>(&'a self, event: Outgoing<'a>) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            self.send(event).await?.await.map_err(|error| self.failed(error))?;
            Ok(())
        })
    }

    /// Sends the whole batch, then waits for the server's acknowledgements in order: one round
    /// trip for the batch instead of one per event.
    fn publish_all<'a>(&'a self, events: &'a [Outgoing<'a>]) -> BoxFuture<'a, (usize, Result<(), BoxError>)> {
        Box::pin(async move {
            let mut acks = Vec::with_capacity(events.len());
            let mut sent = Ok(());
            for event in events {
                match self.send(*event).await {
                    Ok(ack) => acks.push(ack),
                    Err(error) => {
                        sent = Err(error);
                        break;
                    }
                }
            }
            let count = acks.len();
            for (done, ack) in acks.into_iter().enumerate() {
                if let Err(error) = ack.await {
                    return (done, Err(self.failed(error)));
                }
            }
            // All sent were stored; if sending one failed, those before it.
            (count, sent)
        })
    }

    fn subscribe(&self) -> BoxFuture<'_, Result<Box<dyn Subscription>, BoxError>> {
        let own = Own {
            name: self.consumer.clone(),
            filter: format!("{}.>", self.subjects),
            heard: Arc::clone(&self.heard),
            inactive: if self.made_up { Duration::from_secs(3600) } else { Duration::ZERO },
            one_by_one: false,
        };
        Box::pin(self.subscribe_to(own))
    }

    /// The durable consumer `cluster-<group>-<hash>` on the subject of `event`,
    /// pulled one event at a time, so that none waits in one instance's buffer while another
    /// is free, or is taken over (after `ack_wait_ms`) while it waits.
    fn subscribe_shared<'a>(
        &'a self,
        group: &'a str,
        event: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn Subscription>, BoxError>> {
        let name = shared_consumer(group);
        let heard = {
            let mut shared = self.heard_shared.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(shared.entry(name.clone()).or_default())
        };
        let own = Own {
            name,
            filter: format!("{}.{event}", self.subjects),
            heard,
            inactive: Duration::ZERO,
            one_by_one: true,
        };
        Box::pin(self.subscribe_to(own))
    }

    fn shares(&self) -> bool {
        true
    }

    /// A third of `nats.ack_wait_ms`.
    fn progress_every(&self) -> Option<Duration> {
        Some(self.ack_wait / 3)
    }

    /// An event larger than the server or the stream takes (the server's `max_payload`, the
    /// stream's `max_msg_size`, headers included). The stream's limit is the one last read
    /// from its info; read longer than 5 s ago, it is read again in the background.
    fn refuses(&self, event: Outgoing<'_>) -> Option<String> {
        // As the client counts the headers (`Self::headers`): "NATS/1.0\r\n", then
        // "Nats-Msg-Id: <id>\r\n" and "<name>: <value>\r\n" for each of the event's, then "\r\n".
        let own: usize = event.headers.iter().map(|(name, value)| name.len() + ": \r\n".len() + value.len()).sum();
        let header_len = "NATS/1.0\r\n".len() + "Nats-Msg-Id: \r\n".len() + event.id.len() + own + "\r\n".len();
        let size = header_len + event.payload.len();
        if self.limit.stale() {
            self.read_limit();
        }
        // The smaller limit is the one said.
        let max = self.context.client().max_payload();
        match self.limit.get() {
            Some(stream_max) if stream_max < max => (size > stream_max).then(|| {
                format!(
                    "it is {size} bytes with its headers, more than the JetStream stream `{}`'s max_msg_size ({stream_max})",
                    self.stream.name
                )
            }),
            _ => (size > max)
                .then(|| format!("it is {size} bytes with its headers, more than the NATS server's max_payload ({max})")),
        }
    }
}

/// A durable consumer to subscribe to.
struct Own {
    name: String,
    filter: String,
    /// When this instance last heard from it.
    heard: Heard,
    /// How long the server keeps it once no one subscribes (zero: for ever).
    inactive: Duration,
    /// Whether to pull one message at a time ([`Source::OneByOne`]).
    one_by_one: bool,
}

impl JetStream {
    /// Subscribes to `own`, creating it (and the stream) if the server has not got it.
    async fn subscribe_to(&self, own: Own) -> Result<Box<dyn Subscription>, BoxError> {
        let stream = self.context.get_or_create_stream(self.stream.clone()).await?;
        self.limit.set(stream.cached_info().config.max_message_size.into());
        // A consumer made again (the server lost it) starts a little before this instance
        // last heard from the old one: nothing published meanwhile is missed.
        let heard = *own.heard.lock().unwrap_or_else(|e| e.into_inner());
        let deliver_policy = match heard {
            Some(heard) => {
                let since = heard.checked_sub(RESUME_MARGIN).unwrap_or(heard);
                let nanos = since.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
                let start_time = async_nats::datetime::from_nanos(i128::try_from(nanos).unwrap_or(0))?;
                consumer::DeliverPolicy::ByStartTime { start_time }
            }
            None => consumer::DeliverPolicy::New,
        };
        let config = consumer::pull::Config {
            durable_name: Some(own.name.clone()),
            deliver_policy,
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: self.ack_wait,
            filter_subject: own.filter,
            inactive_threshold: own.inactive,
            ..Default::default()
        };
        let filter = config.filter_subject.clone();
        let mut consumer = stream.get_or_create_consumer(&own.name, config).await?;
        // A consumer the server has already keeps its settings: one made with another
        // `ack_wait` (the setting changed since) or another subject (the handler's event
        // renamed) is updated, or the subscription fails saying so.
        let have = consumer.cached_info().config.clone();
        if have.ack_wait != self.ack_wait || have.filter_subject != filter {
            let update = consumer::Config { ack_wait: self.ack_wait, filter_subject: filter.clone(), ..have.clone() };
            stream.create_consumer(update).await.map_err(|error| {
                format!(
                    "the JetStream consumer `{}` has ack_wait {:?} and subject {:?}, this instance wants {:?} (`nats.ack_wait_ms`) and {filter:?}, and updating it failed: {error}; remove the consumer (`nats consumer rm {} {}`) for it to be made again",
                    own.name, have.ack_wait, have.filter_subject, self.ack_wait, self.stream.name, own.name
                )
            })?;
            tracing::warn!(consumer = %own.name, "the JetStream consumer's ack_wait or subject differed from this instance's; updated");
            consumer = stream.get_consumer(&own.name).await?;
        }
        let messages = if own.one_by_one {
            Source::OneByOne(Box::new(consumer))
        } else {
            Source::Pulled(Box::new(consumer.stream().heartbeat(HEARTBEAT).messages().await?))
        };
        own.heard.lock().unwrap_or_else(|e| e.into_inner()).replace(SystemTime::now());
        let prefix = format!("{}.", self.subjects);
        let subscription = Messages {
            messages,
            prefix,
            stream,
            consumer: own.name,
            heard: own.heard,
            stream_lost: Arc::clone(&self.stream_lost),
        };
        Ok(Box::new(subscription) as Box<dyn Subscription>)
    }
}

/// A consumer's messages, as events.
struct Messages {
    messages: Source,
    prefix: String,
    stream: jetstream::stream::Stream,
    consumer: String,
    heard: Arc<Mutex<Option<SystemTime>>>,
    stream_lost: Arc<tokio::sync::Notify>,
}

/// Where a subscription's messages come from.
enum Source {
    /// The client's stream of pulls, which keeps a batch ahead (an instance's own consumer).
    Pulled(Box<consumer::pull::Stream>),
    /// One pull of one message at a time, asked for when the last is handled (a shared
    /// consumer): no message waits in this instance while another is free, or passes its
    /// `ack_wait` there unhandled.
    OneByOne(Box<jetstream::consumer::PullConsumer>),
}

/// Why [`Source::next`] gave no message.
enum Fault {
    Pulled(consumer::pull::MessagesError),
    OneByOne(BoxError),
}

/// How long one pull of a shared consumer waits for a message before it asks again.
const PULL_WAIT: Duration = Duration::from_secs(5);

impl Source {
    async fn next(&mut self) -> Option<Result<jetstream::Message, Fault>> {
        match self {
            Source::Pulled(messages) => messages.next().await.map(|next| next.map_err(Fault::Pulled)),
            Source::OneByOne(consumer) => loop {
                let pulled = consumer.batch().max_messages(1).expires(PULL_WAIT).messages().await;
                let next = match pulled {
                    Ok(mut batch) => batch.next().await,
                    Err(error) => Some(Err(Box::new(error) as BoxError)),
                };
                match next {
                    Some(Ok(message)) => return Some(Ok(message)),
                    // Not a busy loop while the server is away.
                    Some(Err(error)) => {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        return Some(Err(Fault::OneByOne(error)));
                    }
                    // The pull expired empty: ask again.
                    None => {}
                }
            },
        }
    }
}

impl Messages {
    fn heard_now(&self) {
        self.heard.lock().unwrap_or_else(|e| e.into_inner()).replace(SystemTime::now());
    }

    /// Whether the server still has this consumer: `false` when it says it has not (or has no
    /// such stream); `true` when it says it has, or does not answer (it may be restarting).
    async fn consumer_exists(&self) -> bool {
        match self.stream.consumer_info(&self.consumer).await {
            Ok(_) => {
                self.heard_now();
                true
            }
            Err(error) => {
                use async_nats::jetstream::context::ConsumerInfoErrorKind as Kind;
                match error.kind() {
                    Kind::NotFound | Kind::StreamNotFound => false,
                    Kind::JetStream(e) => !matches!(
                        e.error_code(),
                        jetstream::ErrorCode::CONSUMER_NOT_FOUND | jetstream::ErrorCode::STREAM_NOT_FOUND
                    ),
                    _ => true,
                }
            }
        }
    }
}

impl Subscription for Messages {
    /// The next message; `None` once the server has lost the consumer (deleted, or a server
    /// restarted without its store), so that the outbox subscribes again.
    fn next(&mut self) -> BoxFuture<'_, Option<Result<Received, BoxError>>> {
        Box::pin(async move {
            let next = loop {
                tokio::select! {
                    next = self.messages.next() => break next?,
                    () = self.stream_lost.notified() => {
                        if !self.consumer_exists().await {
                            tracing::warn!(consumer = %self.consumer, "the server no longer has this instance's stream; subscribing again");
                            return None;
                        }
                    }
                }
            };
            let message = match next {
                Ok(message) => message,
                Err(fault) => {
                    use consumer::pull::MessagesErrorKind as Kind;
                    let (lost, error): (bool, BoxError) = match fault {
                        Fault::Pulled(error) => {
                            let lost = match error.kind() {
                                Kind::ConsumerDeleted => true,
                                Kind::MissingHeartbeat | Kind::NoResponders | Kind::Pull => {
                                    !self.consumer_exists().await
                                }
                                _ => false,
                            };
                            (lost, error.into())
                        }
                        Fault::OneByOne(error) => (!self.consumer_exists().await, error),
                    };
                    if lost {
                        tracing::warn!(consumer = %self.consumer, %error, "the server no longer has this consumer; subscribing again");
                        return None;
                    }
                    return Some(Err(error));
                }
            };
            self.heard_now();
            let id = message.headers.as_ref().and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID));
            let id = id.map(|id| id.as_str().to_owned()).unwrap_or_default();
            let name = message.subject.as_str().strip_prefix(&self.prefix).unwrap_or_default().to_owned();
            let payload = message.payload.to_vec();
            let headers = message.headers.as_ref().map_or_else(Vec::new, |headers| {
                let mut own = Vec::new();
                for (name, values) in headers.iter() {
                    let name: &str = name.as_ref();
                    if !is_nats_header(name) {
                        own.extend(values.iter().map(|value| (name.to_owned(), value.as_str().to_owned())));
                    }
                }
                own
            });
            Some(Ok(Received { id, name, payload, headers, ack: Box::new(MessageAck(message)) }))
        })
    }
}

/// Acknowledges one message.
struct MessageAck(jetstream::Message);

impl Ack for MessageAck {
    fn ack(self: Box<Self>) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move { self.0.ack().await })
    }

    /// `-NAK` with the delay: the server delivers the message again once it has passed.
    fn nak(self: Box<Self>, delay: Duration) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move { self.0.ack_with(jetstream::AckKind::Nak(Some(delay))).await })
    }

    /// `+WPI`: the server's wait for the acknowledgement starts again.
    fn progress(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(async move { self.0.ack_with(jetstream::AckKind::Progress).await })
    }
}
