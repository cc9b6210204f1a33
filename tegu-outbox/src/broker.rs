//! The broker the relay publishes to and each instance subscribes to: a trait, so that NATS
//! JetStream (tegu-nats) can be joined by Redis Streams or Kafka.

use tegu_core::error::BoxError;
use tegu_core::futures::BoxFuture;

/// An event on its way to the broker.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    /// Its id, unique across the service: the broker keeps one event per id.
    pub id: &'a str,
    /// Its name ([`external_event!`](crate::external_event)).
    pub name: &'a str,
    /// Its JSON.
    pub payload: &'a [u8],
    /// The lineage of the request that emitted it, as header name and value
    /// ([`Stored::headers`](crate::Stored::headers)), and, for an event of a key, its key and
    /// number (`tegu-event-key`, `tegu-event-seq`); empty when it had none. A broker sends
    /// them with the event (JetStream: as message headers) and gives them back in
    /// [`Received::headers`].
    pub headers: &'a [(String, String)],
}

/// Where events go between the instances of a service: the relay publishes each once it is
/// committed, and every instance subscribes to all of them. A singleton provides it
/// (`dyn Broker`); tegu-nats' `JetStream` is one.
pub trait Broker: Send + Sync + 'static {
    /// Publishes `event` (its payload and its [headers](Outgoing::headers)), and resolves once
    /// the broker has stored it. Publishing an id the broker has seen lately stores nothing
    /// more (a second relay of the same row).
    fn publish<'a>(&'a self, event: Outgoing<'a>) -> BoxFuture<'a, Result<(), BoxError>>;

    /// Publishes `events` in order, and resolves once the broker has stored them: how many, from
    /// the first, it stored before one failed (with that failure), or all of them. The relay
    /// calls this with a batch; by default one [`publish`](Self::publish) after the other, and a
    /// broker that can have several in flight (JetStream) overrides it.
    fn publish_all<'a>(&'a self, events: &'a [Outgoing<'a>]) -> BoxFuture<'a, (usize, Result<(), BoxError>)> {
        Box::pin(async move {
            for (done, event) in events.iter().enumerate() {
                if let Err(error) = self.publish(*event).await {
                    return (done, Err(error));
                }
            }
            (events.len(), Ok(()))
        })
    }

    /// The name this instance's [`subscription`](Self::subscribe) receives events under, the
    /// same after a restart (JetStream: its durable consumer's name): what the outbox's inbox
    /// records a handled event under ([`OutboxStore::record_handled`](crate::OutboxStore::record_handled)),
    /// so that an event brought again, also after a restart, is not handled twice. Two
    /// instances that each receive every event have two names.
    fn receiver(&self) -> String;

    /// This instance's subscription to every event: durable (it resumes where this instance
    /// left off, when the broker knows it by name), each event redelivered until acknowledged.
    fn subscribe(&self) -> BoxFuture<'_, Result<Box<dyn Subscription>, BoxError>>;

    /// A subscription this instance shares with every instance of the service that subscribes
    /// with the same `group`, to the events named `event`: each event goes to one of them, and
    /// one not acknowledged (its instance died, or stopped answering) goes to another. Durable
    /// like [`subscribe`](Self::subscribe): the group resumes where it left off, and a group
    /// made for the first time starts with the events published from then on. The outbox
    /// subscribes once per `#[event_handler(once_per_cluster)]`, its group the handler's name.
    ///
    /// A broker that has none says so in [`shares`](Self::shares), and this answers an error.
    fn subscribe_shared<'a>(
        &'a self,
        group: &'a str,
        event: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn Subscription>, BoxError>> {
        let _ = (group, event);
        Box::pin(std::future::ready(Err("this broker has no shared subscriptions".into())))
    }

    /// Whether it has [shared subscriptions](Self::subscribe_shared): the outbox refuses to
    /// build beside a once-per-cluster handler without them. `false` by default.
    fn shares(&self) -> bool {
        false
    }

    /// How often a subscriber tells the broker it is still working on an event ([`Ack::progress`]),
    /// so that the broker does not take a slow handler for a dead instance and give the event
    /// to another; `None` (the default): never.
    fn progress_every(&self) -> Option<std::time::Duration> {
        None
    }

    /// Why the broker would refuse `event` for good, if it can tell before it is published
    /// (JetStream: larger than the server's `max_payload` or the stream's `max_msg_size`,
    /// headers included). The outbox asks when the event is emitted, so that the request fails
    /// instead of acknowledging an event that could never be sent. `None` by default.
    fn refuses(&self, event: Outgoing<'_>) -> Option<String> {
        let _ = event;
        None
    }
}

/// What a [`Broker`] returns, boxed, from [`publish`](Broker::publish) or
/// [`publish_all`](Broker::publish_all) when it refuses an event for good: publishing it again
/// cannot succeed (too large for the server, a subject it does not take). The relay then sets
/// the event aside ([`OutboxStore::set_aside`](crate::OutboxStore::set_aside)) and goes on with
/// the events after it. Any other error is taken as passing (the broker down, a timeout): the
/// relay tries the event again in its next round, before any later one.
///
/// # Examples
///
/// ```
/// use tegu_outbox::Refused;
///
/// let error: tegu_core::error::BoxError = Box::new(Refused("larger than the server's max_payload".into()));
/// assert!(error.is::<Refused>());
/// assert_eq!(error.to_string(), "the broker refuses the event for good: larger than the server's max_payload");
/// ```
#[derive(Debug, thiserror::Error)]
#[error("the broker refuses the event for good: {0}")]
pub struct Refused(#[source] pub BoxError);

/// An instance's stream of events from the [`Broker`].
pub trait Subscription: Send {
    /// The next event; `None` when the subscription has ended (the connection is gone).
    fn next(&mut self) -> BoxFuture<'_, Option<Result<Received, BoxError>>>;
}

/// Acknowledges a received event: the broker will not deliver it to this instance again.
pub trait Ack: Send + Sync {
    /// Acknowledges.
    fn ack(self: Box<Self>) -> BoxFuture<'static, Result<(), BoxError>>;

    /// Tells the broker the event is still being handled ([`Broker::progress_every`]): its
    /// wait for the acknowledgement starts again. Nothing by default.
    fn progress(&self) -> BoxFuture<'_, Result<(), BoxError>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Gives the event back, to be delivered again in about `delay` (to this subscription or,
    /// shared, another of its group): it is not its turn yet (an earlier event of its key is
    /// still being handled). By default nothing is told, and the broker delivers it again once
    /// its wait for the acknowledgement is over.
    fn nak(self: Box<Self>, delay: std::time::Duration) -> BoxFuture<'static, Result<(), BoxError>> {
        let _ = delay;
        Box::pin(std::future::ready(Ok(())))
    }
}

/// An event the [`Subscription`] received.
pub struct Received {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its JSON.
    pub payload: Vec<u8>,
    /// The headers it was published with ([`Outgoing::headers`]), the broker's own left out
    /// (JetStream's `Nats-*`): the lineage of the request that emitted it, which the outbox
    /// reads for its handlers' scopes (`tegu_core::App::lineage_from_headers`). They come from
    /// the broker, so from anyone who can publish there: each value is checked by its lineage
    /// type, and one it refuses is left out.
    pub headers: Vec<(String, String)>,
    /// How to acknowledge it.
    pub ack: Box<dyn Ack>,
}

impl std::fmt::Debug for Received {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Received")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}
