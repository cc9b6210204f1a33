//! NATS JetStream as di-outbox's [`Broker`]: [`JetStream`].
//!
//! - **Publishing**: each event goes to the subject `{subjects}.{name}` (`events.todos.completed`)
//!   of one stream, with its id as `Nats-Msg-Id`: JetStream stores one message per id within
//!   the stream's duplicate window (two minutes), so two relays of the same outbox row store
//!   it once. The relay deletes the row once the server has acknowledged it.
//! - **Subscribing**: each instance has a durable pull consumer of its own (`consumer` in the
//!   settings, a stable name per instance), on every subject of the stream, with explicit
//!   acknowledgements: it receives every event, resumes where it left off after a restart,
//!   and gets again what it did not acknowledge. A consumer made anew starts with the events
//!   published from then on.
//!
//! Register it with `App::builder().register(JetStream::proto())`; settings in `[nats]`: `url`
//! (required), `stream` (`"DI_EVENTS"`), `subjects` (`"events"`), `consumer` (this instance's
//! name; by default one made up at start, which a restart does not resume and the server removes
//! an hour after the instance is gone), `max_age_hours` (how long the stream keeps an event when
//! this instance creates it: a week).

use std::time::Duration;

use async_nats::HeaderMap;
use async_nats::jetstream::{self, consumer};
use di_core::{BoxError, ProtoDef, Scope};
use di_outbox::{Ack, BoxFuture, Broker, Outgoing, Received, Subscription};
use futures_util::StreamExt;
use serde::Deserialize;

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

/// NATS JetStream, as the [`Broker`] of di-outbox's `Outbox`. See the crate's documentation.
pub struct JetStream {
    context: jetstream::Context,
    stream: jetstream::stream::Stream,
    subjects: String,
    consumer: String,
    /// Whether `consumer` was made up at start: the server removes it an hour after its
    /// instance is gone, since no restart will resume it.
    made_up: bool,
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
        ProtoDef::new_async::<JetStream, _, _>(Scope::Singleton, |r| {
            let settings: Settings = r.config().get("nats")?;
            Ok(JetStream::connect(settings))
        })
        .provides::<JetStream, dyn Broker>(|js| js)
    }

    async fn connect(settings: Settings) -> Result<JetStream, BoxError> {
        if !di_outbox::valid_name(&settings.subjects) {
            return Err(format!("`nats.subjects` is \"{}\", which is no subject prefix", settings.subjects).into());
        }
        let client = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(5))
            .connect(settings.url.as_str())
            .await
            .map_err(|e| format!("connecting to NATS: {e}"))?;
        let context = jetstream::new(client);
        let stream = context
            .get_or_create_stream(jetstream::stream::Config {
                name: settings.stream.clone(),
                subjects: vec![format!("{}.>", settings.subjects)],
                duplicate_window: DUPLICATE_WINDOW,
                max_age: Duration::from_secs(settings.max_age_hours.saturating_mul(3600)),
                ..Default::default()
            })
            .await
            .map_err(|e| format!("creating the JetStream stream `{}`: {e}", settings.stream))?;
        let made_up = settings.consumer.is_none();
        let consumer = settings.consumer.unwrap_or_else(|| {
            let made_up = format!("instance-{}-{}", std::process::id(), made_up_suffix());
            tracing::warn!(consumer = %made_up, "no `nats.consumer` is set: this instance's consumer is made up, and a restart will not resume it");
            made_up
        });
        if !consumer.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(format!("`nats.consumer` is \"{consumer}\"; use letters, digits, `-` and `_`").into());
        }
        tracing::info!(stream = %settings.stream, consumer = %consumer, "JetStream ready");
        Ok(JetStream { context, stream, subjects: settings.subjects, consumer, made_up })
    }

    /// This instance's consumer.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }
}

/// A few characters that differ between processes started in the same second.
fn made_up_suffix() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{nanos:x}")
}

impl JetStream {
    /// Sends `event` to the server; the future resolves once the server stored it.
    async fn send(&self, event: Outgoing<'_>) -> Result<jetstream::context::PublishAckFuture, BoxError> {
        let mut headers = HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, event.id);
        let subject = format!("{}.{}", self.subjects, event.name);
        Ok(self.context.publish_with_headers(subject, headers, event.payload.to_vec().into()).await?)
    }
}

impl Broker for JetStream {
    fn publish<'a>(&'a self, event: Outgoing<'a>) -> BoxFuture<'a, Result<(), BoxError>> {
        Box::pin(async move {
            self.send(event).await?.await?;
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
                    return (done, Err(error.into()));
                }
            }
            // All sent were stored; if sending one failed, those before it.
            (count, sent)
        })
    }

    fn subscribe(&self) -> BoxFuture<'_, Result<Box<dyn Subscription>, BoxError>> {
        Box::pin(async move {
            let config = consumer::pull::Config {
                durable_name: Some(self.consumer.clone()),
                deliver_policy: consumer::DeliverPolicy::New,
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(30),
                filter_subject: format!("{}.>", self.subjects),
                inactive_threshold: if self.made_up { Duration::from_secs(3600) } else { Duration::ZERO },
                ..Default::default()
            };
            let consumer = self.stream.get_or_create_consumer(&self.consumer, config).await?;
            let messages = consumer.messages().await?;
            let prefix = format!("{}.", self.subjects);
            Ok(Box::new(Messages { messages, prefix }) as Box<dyn Subscription>)
        })
    }
}

/// A consumer's messages, as events.
struct Messages {
    messages: consumer::pull::Stream,
    prefix: String,
}

impl Subscription for Messages {
    fn next(&mut self) -> BoxFuture<'_, Option<Result<Received, BoxError>>> {
        Box::pin(async move {
            let message = match self.messages.next().await? {
                Ok(message) => message,
                Err(error) => return Some(Err(error.into())),
            };
            let id = message.headers.as_ref().and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID));
            let id = id.map(|id| id.as_str().to_owned()).unwrap_or_default();
            let name = message.subject.as_str().strip_prefix(&self.prefix).unwrap_or_default().to_owned();
            let payload = message.payload.to_vec();
            Some(Ok(Received { id, name, payload, ack: Box::new(MessageAck(message)) }))
        })
    }
}

/// Acknowledges one message.
struct MessageAck(jetstream::Message);

impl Ack for MessageAck {
    fn ack(self: Box<Self>) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move { self.0.ack().await })
    }
}
