//! `MemoryBroker`: a [`Broker`] in memory, failing on demand the ways a real one does.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tegu_core::{ProtoDef, error::BoxError};
use tokio::sync::watch;

use crate::broker::{Ack, Broker, Outgoing, Received, Refused, Subscription};
use tegu_core::futures::BoxFuture;

/// An event a [`MemoryBroker`] stores.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Published {
    /// Its id: the broker stores one event per id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its JSON.
    pub payload: Vec<u8>,
    /// Its headers, as published ([`Outgoing::headers`]), and as every delivery of it gives
    /// them ([`Received::headers`]).
    pub headers: Vec<(String, String)>,
}

/// A [`Broker`] in memory, for tests: it stores what is published (one event per id, with its
/// headers), delivers it, headers and all, to every instance's subscription, and fails on demand with each outcome the trait has.
///
/// - **Refused for good** ([`Refused`]): the events of a name ([`refuse`](Self::refuse)), of an
///   id ([`refuse_id`](Self::refuse_id)), or larger than a limit
///   ([`limit_payload`](Self::limit_payload), which [`Broker::refuses`] also reports, as
///   tegu-nats does for the server's `max_payload`).
/// - **Passing failures**: the next publishes ([`fail_next`](Self::fail_next)), every k-th
///   ([`fail_every`](Self::fail_every)), everything while it is down
///   ([`set_down`](Self::set_down): publishes and new subscriptions), the next receives
///   ([`fail_receives`](Self::fail_receives)) or acknowledgements
///   ([`fail_acks`](Self::fail_acks); the event comes again).
/// - **Its state lost** ([`forget`](Self::forget)): as a NATS server restarted without its
///   store, it loses what it stored and every consumer, and open subscriptions end; a consumer
///   made again starts with what was published since (tegu-nats' does, from a little before
///   its instance last heard from the old one).
/// - **At-least-once delivery**: [`redeliver`](Self::redeliver) brings an event once more.
/// - **Shared subscriptions** ([`Broker::subscribe_shared`]): the instances subscribed with one
///   group share its events, each to one of them; [`disconnect`](Self::disconnect) ends an
///   instance's subscriptions as its death would, and what it had not acknowledged goes to
///   another instance of the group at once (JetStream: after its `ack_wait`).
///
/// A clone is the same broker and the same consumer (the same instance of the service);
/// [`instance`](Self::instance) is another instance's handle on the same broker. Register it
/// with [`proto`](Self::proto), and keep a clone to steer and inspect it.
///
/// Like JetStream's durable consumers, an instance's first subscription starts with the events
/// published from then on; one made after the last ended resumes where it left off, with what
/// was delivered and not acknowledged first; one made again after the broker forgot starts
/// with everything it stored since. A publish stores the event at once, and an id it
/// stores again is ignored until [`forget`](Self::forget) (JetStream forgets ids after its
/// duplicate window).
///
/// # Examples
///
/// ```
/// use tegu_outbox::testing::MemoryBroker;
/// use tegu_outbox::{Broker, Outgoing, Refused};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::error::BoxError> {
/// let broker = MemoryBroker::new();
/// let mut subscription = broker.subscribe().await?;
/// let headers = [("tegu-tenant".to_owned(), "acme".to_owned())];
/// let paid = Outgoing { id: "e1", name: "billing.paid", payload: br#"{"cents":500}"#, headers: &headers };
/// broker.publish(paid).await?;
/// broker.publish(paid).await?; // the same id: stored once
/// assert_eq!((broker.published().len(), broker.duplicates()), (1, 1));
/// let received = subscription.next().await.expect("an event")?;
/// assert_eq!((received.id.as_str(), received.name.as_str()), ("e1", "billing.paid"));
/// assert_eq!(received.headers, headers);
/// received.ack.ack().await?;
///
/// // A passing failure, then one for good.
/// broker.fail_next(1);
/// assert!(broker.publish(paid).await.is_err_and(|e| !e.is::<Refused>()));
/// broker.refuse("billing.refunded", "a subject the broker does not take");
/// let refunded = Outgoing { id: "e2", name: "billing.refunded", payload: b"{}", headers: &[] };
/// assert!(broker.publish(refunded).await.is_err_and(|e| e.is::<Refused>()));
///
/// // Its state lost: the subscription ends, and a new one starts afresh.
/// broker.forget();
/// assert!(subscription.next().await.is_none());
/// assert!(broker.published().is_empty());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MemoryBroker {
    shared: Arc<Shared>,
    /// This handle's consumer: an index into `State::consumers`.
    consumer: usize,
}

/// What the handles of one broker share.
struct Shared {
    state: Mutex<State>,
    /// Bumped on every change a subscription may be waiting for.
    changed: watch::Sender<u64>,
}

/// The broker's store, its consumers, and what it was told to do.
#[derive(Default)]
struct State {
    /// What it stores, in the order published.
    log: Vec<Published>,
    /// The ids of `log`: publishing one again stores nothing.
    ids: HashSet<String>,
    /// Bumped by `forget`: subscriptions and deliveries of an earlier epoch are gone.
    epoch: u64,
    /// One per instance (handle made by `new` or `instance`).
    consumers: Vec<Consumer>,
    /// The shared consumers, by group.
    groups: HashMap<String, Group>,
    /// Bumped per instance by `disconnect`: its subscriptions of an earlier one are gone.
    connections: HashMap<usize, u64>,
    /// The number of the next subscription.
    numbered: u64,
    refused_names: HashMap<String, String>,
    refused_ids: HashMap<String, String>,
    max_payload: Option<usize>,
    fail_next: usize,
    fail_every: usize,
    down: bool,
    fail_receives: usize,
    fail_acks: usize,
    attempts: usize,
    duplicates: usize,
    subscriptions: usize,
    acknowledged: usize,
}

/// An instance's durable consumer.
#[derive(Debug, Default)]
struct Consumer {
    /// Whether the broker has it: made by the instance's first subscription, lost with `forget`.
    exists: bool,
    /// Whether the instance had one that the broker lost (`forget`): made again, it starts
    /// with what the broker stored since, as tegu-nats makes a lost consumer again.
    lost: bool,
    /// The index in `log` of the next event to deliver.
    next: usize,
    /// Events to deliver again, before `next`.
    again: VecDeque<usize>,
    /// Events delivered and not acknowledged.
    unacked: BTreeSet<usize>,
}

/// A shared consumer: the events of one name, each to one of its subscriptions.
#[derive(Debug, Default)]
struct Group {
    /// The name of its events.
    event: String,
    /// As [`Consumer::lost`].
    lost: bool,
    /// The index in `log` of the next event to look at.
    next: usize,
    /// Events to deliver again, before `next`.
    again: VecDeque<usize>,
    /// Events delivered and not acknowledged, with the subscription that has each and its
    /// instance.
    unacked: BTreeMap<usize, (u64, usize)>,
}

/// Whose events a subscription or an acknowledgement is: an instance's own consumer, or a
/// group's shared one.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Own(usize),
    Group(String),
}

impl State {
    /// The next event of `group` for subscription `number` of `instance`, if any, marked
    /// delivered to it.
    fn take_shared(&mut self, group: &str, number: u64, instance: usize) -> Option<usize> {
        let log = &self.log;
        let group = self.groups.get_mut(group)?;
        let index = match group.again.pop_front() {
            Some(index) => index,
            None => {
                let skip = log[group.next.min(log.len())..].iter().take_while(|e| e.name != group.event).count();
                group.next += skip;
                if group.next >= log.len() {
                    return None;
                }
                group.next += 1;
                group.next - 1
            }
        };
        group.unacked.insert(index, (number, instance));
        Some(index)
    }

    /// Gives what the subscriptions `held` takes had not acknowledged to their group again.
    fn release(&mut self, held: impl Fn(&str, u64, usize) -> bool) {
        for (name, group) in &mut self.groups {
            let taken: Vec<usize> =
                group.unacked.iter().filter(|(_, (n, i))| held(name, *n, *i)).map(|(index, _)| *index).collect();
            for index in taken.into_iter().rev() {
                group.unacked.remove(&index);
                group.again.push_front(index);
            }
        }
    }

    /// Marks event `index` of `target` acknowledged by subscription `number` (a shared one's
    /// event taken over by another instance since is not).
    fn acked(&mut self, target: &Target, index: usize, number: u64) {
        match target {
            Target::Own(consumer) => {
                self.consumers[*consumer].unacked.remove(&index);
            }
            Target::Group(group) => {
                if let Some(group) = self.groups.get_mut(group)
                    && group.unacked.get(&index).is_some_and(|(n, _)| *n == number)
                {
                    group.unacked.remove(&index);
                }
            }
        }
    }

    /// Event `index` of `target`, delivered to subscription `number` and not acknowledged, to
    /// be delivered again.
    fn unack(&mut self, target: &Target, index: usize, number: u64) {
        match target {
            Target::Own(consumer) => {
                let consumer = &mut self.consumers[*consumer];
                if consumer.unacked.remove(&index) {
                    consumer.again.push_back(index);
                }
            }
            Target::Group(group) => {
                if let Some(group) = self.groups.get_mut(group)
                    && group.unacked.get(&index).is_some_and(|(n, _)| *n == number)
                {
                    group.unacked.remove(&index);
                    group.again.push_back(index);
                }
            }
        }
    }

    /// The next event for `consumer`, if any, marked delivered.
    fn take_next(&mut self, consumer: usize) -> Option<usize> {
        let len = self.log.len();
        let consumer = &mut self.consumers[consumer];
        let index = match consumer.again.pop_front() {
            Some(index) => index,
            None if consumer.next < len => {
                consumer.next += 1;
                consumer.next - 1
            }
            None => return None,
        };
        consumer.unacked.insert(index);
        Some(index)
    }

    /// Why an event is refused for good, if it is.
    fn refusal(&self, event: &Outgoing<'_>) -> Option<String> {
        self.refused_names
            .get(event.name)
            .or_else(|| self.refused_ids.get(event.id))
            .cloned()
            .or_else(|| self.too_large(event))
    }

    fn too_large(&self, event: &Outgoing<'_>) -> Option<String> {
        let max = self.max_payload?;
        let len = event.payload.len();
        (len > max).then(|| format!("{len} bytes, more than the {max} this broker takes"))
    }
}

impl Default for MemoryBroker {
    fn default() -> Self {
        MemoryBroker::new()
    }
}

impl std::fmt::Debug for MemoryBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state();
        f.debug_struct("MemoryBroker")
            .field("consumer", &self.consumer)
            .field("groups", &state.groups.len())
            .field("stored", &state.log.len())
            .field("attempts", &state.attempts)
            .field("duplicates", &state.duplicates)
            .field("subscriptions", &state.subscriptions)
            .field("acknowledged", &state.acknowledged)
            .field("down", &state.down)
            .finish_non_exhaustive()
    }
}

impl MemoryBroker {
    /// An empty broker that fails nothing, and a handle for one instance of the service.
    pub fn new() -> MemoryBroker {
        let state = State { consumers: vec![Consumer::default()], ..State::default() };
        let shared = Shared { state: Mutex::new(state), changed: watch::Sender::new(0) };
        MemoryBroker { shared: Arc::new(shared), consumer: 0 }
    }

    /// A handle for another instance of the service: the same broker (what it stores, what it
    /// was told to fail), with a consumer of its own, which receives every event too.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_outbox::testing::MemoryBroker;
    /// use tegu_outbox::{Broker, Outgoing};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::error::BoxError> {
    /// let a = MemoryBroker::new();
    /// let b = a.instance();
    /// let (mut on_a, mut on_b) = (a.subscribe().await?, b.subscribe().await?);
    /// a.publish(Outgoing { id: "e1", name: "todos.completed", payload: b"{}", headers: &[] }).await?;
    /// assert_eq!(on_a.next().await.expect("an event")?.id, "e1");
    /// assert_eq!(on_b.next().await.expect("an event")?.id, "e1");
    /// # Ok(()) }
    /// ```
    pub fn instance(&self) -> MemoryBroker {
        let mut state = self.state();
        state.consumers.push(Consumer::default());
        MemoryBroker { shared: Arc::clone(&self.shared), consumer: state.consumers.len() - 1 }
    }

    /// The proto that provides this broker to an App, as `dyn Broker` (and as `MemoryBroker`,
    /// this handle):
    /// `App::builder().register(broker.proto())`.
    pub fn proto(&self) -> ProtoDef {
        let broker = self.clone();
        ProtoDef::singleton::<MemoryBroker>(move |_| Ok(broker.clone())).provides::<MemoryBroker, dyn Broker>(|b| b)
    }

    /// Refuses the events named `name` for good, from now on: a publish fails with
    /// [`Refused`], carrying `reason`, as a broker that does not take their subject.
    /// [`Broker::refuses`] does not tell (the outbox writes them, and its relay sets them aside).
    pub fn refuse(&self, name: &str, reason: &str) {
        self.state().refused_names.insert(name.to_owned(), reason.to_owned());
    }

    /// Takes the events named `name` again, after [`refuse`](Self::refuse): a subject made.
    pub fn accept(&self, name: &str) {
        self.state().refused_names.remove(name);
    }

    /// Refuses the event of id `id` for good, from now on, as [`refuse`](Self::refuse) does.
    pub fn refuse_id(&self, id: &str, reason: &str) {
        self.state().refused_ids.insert(id.to_owned(), reason.to_owned());
    }

    /// Refuses for good the events whose payload is longer than `bytes`, as a NATS server does
    /// those over its `max_payload`: a publish fails with [`Refused`], and [`Broker::refuses`]
    /// says so beforehand (the outbox then fails the request that emits one).
    pub fn limit_payload(&self, bytes: usize) {
        self.state().max_payload = Some(bytes);
    }

    /// The next `count` publishes fail with a passing error (the broker busy, a timeout): the
    /// outbox tries again in its next round. `usize::MAX` fails them until `fail_next(0)`.
    pub fn fail_next(&self, count: usize) {
        self.state().fail_next = count;
    }

    /// Every `k`-th publish from the first (the `k`-th, the `2k`-th, ...) fails with a passing
    /// error, a flaky broker: a batch may fail halfway. `0` stops it.
    pub fn fail_every(&self, k: usize) {
        self.state().fail_every = k;
    }

    /// While `down`, every publish and every new subscription fails with a passing error.
    /// Open subscriptions stay open (a client reconnecting keeps them) and get nothing new.
    pub fn set_down(&self, down: bool) {
        self.state().down = down;
    }

    /// The next `count` receives ([`Subscription::next`]) fail at once with a passing error;
    /// nothing is lost, the receive after brings the event.
    pub fn fail_receives(&self, count: usize) {
        self.state().fail_receives = count;
        self.changed();
    }

    /// The next `count` acknowledgements fail: the event is not acknowledged, and the broker
    /// delivers it again (at once; JetStream after its `ack_wait`).
    pub fn fail_acks(&self, count: usize) {
        self.state().fail_acks = count;
    }

    /// Loses the broker's state, as a NATS server restarted without its JetStream store: what
    /// it stored (and the ids it would have ignored), and every consumer. Open subscriptions
    /// end (`next` gives `None`). An instance that had a consumer gets one again at its next
    /// subscription, starting with everything published since the broker forgot (what another
    /// instance published before it subscribed again included), as tegu-nats makes a lost
    /// consumer again from a little before its instance last heard from the old one; an
    /// instance subscribing for the first time starts with the events published from then on.
    /// What it was told to fail stays.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_outbox::testing::MemoryBroker;
    /// use tegu_outbox::{Broker, Outgoing};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::error::BoxError> {
    /// let a = MemoryBroker::new();
    /// let b = a.instance();
    /// let _on_b = b.subscribe().await?;
    /// a.forget();
    /// // Published after the restart, before B subscribed again: B gets it.
    /// a.publish(Outgoing { id: "e1", name: "todos.completed", payload: b"{}", headers: &[] }).await?;
    /// let mut on_b = b.subscribe().await?;
    /// assert_eq!(on_b.next().await.expect("an event")?.id, "e1");
    /// # Ok(()) }
    /// ```
    pub fn forget(&self) {
        {
            let mut state = self.state();
            state.log.clear();
            state.ids.clear();
            state.epoch += 1;
            for consumer in &mut state.consumers {
                let lost = consumer.exists || consumer.lost;
                *consumer = Consumer { lost, ..Consumer::default() };
            }
            for group in state.groups.values_mut() {
                *group = Group { event: std::mem::take(&mut group.event), lost: true, ..Group::default() };
            }
        }
        self.changed();
    }

    /// Ends this handle's instance's subscriptions, its own and its shared ones, as its death
    /// or a lost connection would: each gives `None`. What its shared subscriptions had not
    /// acknowledged goes to another instance of their group; what its own had waits for its
    /// next subscription, as ever.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_outbox::testing::MemoryBroker;
    /// use tegu_outbox::{Broker, Outgoing};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::error::BoxError> {
    /// let a = MemoryBroker::new();
    /// let b = a.instance();
    /// let mut on_a = a.subscribe_shared("mailer", "shop.shipped").await?;
    /// let mut on_b = b.subscribe_shared("mailer", "shop.shipped").await?;
    /// a.publish(Outgoing { id: "e1", name: "shop.shipped", payload: b"{}", headers: &[] }).await?;
    /// let _held = on_a.next().await.expect("an event")?; // A has it, and dies
    /// a.disconnect();
    /// assert!(on_a.next().await.is_none());
    /// assert_eq!(on_b.next().await.expect("an event")?.id, "e1");
    /// # Ok(()) }
    /// ```
    pub fn disconnect(&self) {
        {
            let mut state = self.state();
            *state.connections.entry(self.consumer).or_default() += 1;
            let instance = self.consumer;
            state.release(|_, _, i| i == instance);
        }
        self.changed();
    }

    /// Delivers the event of id `id` once more to every instance subscribed, and to one of
    /// each group that takes it, as a broker does when an acknowledgement was lost (delivery
    /// is at least once). Whether it stores such an event.
    pub fn redeliver(&self, id: &str) -> bool {
        let found = {
            let mut state = self.state();
            let found = state.log.iter().position(|event| event.id == id);
            if let Some(index) = found {
                for consumer in state.consumers.iter_mut().filter(|c| c.exists) {
                    consumer.again.push_back(index);
                }
                let name = state.log[index].name.clone();
                for group in state.groups.values_mut().filter(|g| g.event == name) {
                    group.again.push_back(index);
                }
            }
            found.is_some()
        };
        self.changed();
        found
    }

    /// What it stores, in the order published: one event per id, since it last
    /// [forgot](Self::forget).
    pub fn published(&self) -> Vec<Published> {
        self.state().log.clone()
    }

    /// How many events it was asked to publish, stored or not (each of a batch counts).
    pub fn attempts(&self) -> usize {
        self.state().attempts
    }

    /// How many publishes stored nothing, since it already had their id: a relay published
    /// an event again.
    pub fn duplicates(&self) -> usize {
        self.state().duplicates
    }

    /// How many subscriptions it gave, to every instance.
    pub fn subscriptions(&self) -> usize {
        self.state().subscriptions
    }

    /// How many received events were acknowledged, by every instance.
    pub fn acknowledged(&self) -> usize {
        self.state().acknowledged
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.shared.state()
    }

    /// A new subscription of this handle's instance, unless the broker is down: `made` makes
    /// or resumes its consumer (given the state and how many events the broker stores) and
    /// says whose events it takes.
    fn open(&self, made: impl FnOnce(&mut State, usize) -> Target) -> Result<Box<dyn Subscription>, BoxError> {
        let mut state = self.state();
        if state.down {
            return Err("the broker is down (MemoryBroker::set_down)".into());
        }
        state.subscriptions += 1;
        let (len, epoch) = (state.log.len(), state.epoch);
        let target = made(&mut state, len);
        state.numbered += 1;
        Ok(Box::new(MemorySubscription {
            shared: Arc::clone(&self.shared),
            target,
            number: state.numbered,
            instance: self.consumer,
            connection: state.connections.get(&self.consumer).copied().unwrap_or(0),
            epoch,
            changed: self.shared.changed.subscribe(),
        }))
    }

    fn changed(&self) {
        self.shared.changed();
    }

    /// Publishes `event`: stored, ignored (an id it has), or the failure it was told to give.
    fn store(&self, event: &Outgoing<'_>) -> Result<(), BoxError> {
        let stored = {
            let mut state = self.state();
            state.attempts += 1;
            if state.down {
                return Err("the broker is down (MemoryBroker::set_down)".into());
            }
            if state.fail_next > 0 {
                state.fail_next -= 1;
                return Err("the broker failed a publish (MemoryBroker::fail_next)".into());
            }
            if state.fail_every > 0 && state.attempts.is_multiple_of(state.fail_every) {
                return Err("the broker failed a publish (MemoryBroker::fail_every)".into());
            }
            if let Some(reason) = state.refusal(event) {
                return Err(Box::new(Refused(reason.into())));
            }
            let stored = state.ids.insert(event.id.to_owned());
            if !stored {
                state.duplicates += 1;
            } else {
                let published = Published {
                    id: event.id.to_owned(),
                    name: event.name.to_owned(),
                    payload: event.payload.to_vec(),
                    headers: event.headers.to_vec(),
                };
                state.log.push(published);
            }
            stored
        };
        if stored {
            self.changed();
        }
        Ok(())
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn changed(&self) {
        self.changed.send_modify(|version| *version = version.wrapping_add(1));
    }
}

impl Broker for MemoryBroker {
    /// `instance-N`, N this handle's consumer: 0 for [`new`](MemoryBroker::new)'s, then one
    /// per [`instance`](MemoryBroker::instance).
    fn receiver(&self) -> String {
        format!("instance-{}", self.consumer)
    }

    fn publish<'a>(&'a self, event: Outgoing<'a>) -> BoxFuture<'a, Result<(), BoxError>> {
        let result = self.store(&event);
        Box::pin(std::future::ready(result))
    }

    fn subscribe(&self) -> BoxFuture<'_, Result<Box<dyn Subscription>, BoxError>> {
        let result = self.open(|state, len| {
            let consumer = &mut state.consumers[self.consumer];
            if consumer.exists {
                // Resumes: what was delivered and not acknowledged comes first.
                let unacked = std::mem::take(&mut consumer.unacked);
                for index in unacked.into_iter().rev() {
                    consumer.again.push_front(index);
                }
            } else {
                // Made again after the broker lost it: from the start of what it stores now,
                // all published since; made for the first time: from now on.
                let next = if consumer.lost { 0 } else { len };
                *consumer = Consumer { exists: true, next, ..Consumer::default() };
            }
            Target::Own(self.consumer)
        });
        Box::pin(std::future::ready(result))
    }

    /// Shares `group`'s consumer, made for the events named `event` when the first instance
    /// subscribes (starting with those published from then on; made again after the broker
    /// forgot, with everything it stored since).
    fn subscribe_shared<'a>(
        &'a self,
        group: &'a str,
        event: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn Subscription>, BoxError>> {
        let result = self.open(|state, len| {
            let made = state.groups.entry(group.to_owned()).or_default();
            if made.event.is_empty() || made.lost {
                let next = if made.lost { made.next } else { len };
                *made = Group { event: event.to_owned(), next, ..Group::default() };
            }
            Target::Group(group.to_owned())
        });
        Box::pin(std::future::ready(result))
    }

    fn shares(&self) -> bool {
        true
    }

    fn refuses(&self, event: Outgoing<'_>) -> Option<String> {
        self.state().too_large(&event)
    }
}

/// An instance's subscription to a [`MemoryBroker`].
struct MemorySubscription {
    shared: Arc<Shared>,
    target: Target,
    /// Its number: what a group's events delivered to it are marked with.
    number: u64,
    /// Its instance, and that instance's connection when it was made: it ends at `disconnect`.
    instance: usize,
    connection: u64,
    /// The broker's epoch when it was made: it ends when the broker forgets.
    epoch: u64,
    changed: watch::Receiver<u64>,
}

impl Drop for MemorySubscription {
    /// A shared subscription's events not acknowledged go to another of its group.
    fn drop(&mut self) {
        if let Target::Group(group) = &self.target {
            self.shared.state().release(|g, n, _| g == group && n == self.number);
            self.shared.changed();
        }
    }
}

impl Subscription for MemorySubscription {
    fn next(&mut self) -> BoxFuture<'_, Option<Result<Received, BoxError>>> {
        Box::pin(async move {
            loop {
                // Marked seen before looking, so that a change made after the look wakes us.
                self.changed.borrow_and_update();
                {
                    let mut state = self.shared.state();
                    let connection = state.connections.get(&self.instance).copied().unwrap_or(0);
                    if state.epoch != self.epoch || connection != self.connection {
                        if let Target::Group(group) = &self.target {
                            state.release(|g, n, _| g == group && n == self.number);
                        }
                        return None;
                    }
                    if state.fail_receives > 0 {
                        state.fail_receives -= 1;
                        return Some(Err("receiving from the broker failed (MemoryBroker::fail_receives)".into()));
                    }
                    let next = match &self.target {
                        Target::Own(consumer) => state.take_next(*consumer),
                        Target::Group(group) => state.take_shared(group, self.number, self.instance),
                    };
                    if let Some(index) = next {
                        let Published { id, name, payload, headers } = state.log[index].clone();
                        let ack = MemoryAck {
                            shared: Arc::clone(&self.shared),
                            target: self.target.clone(),
                            number: self.number,
                            epoch: self.epoch,
                            index,
                        };
                        return Some(Ok(Received { id, name, payload, headers, ack: Box::new(ack) }));
                    }
                }
                if self.changed.changed().await.is_err() {
                    return None;
                }
            }
        })
    }
}

/// Acknowledges one delivery of a [`MemoryBroker`].
struct MemoryAck {
    shared: Arc<Shared>,
    target: Target,
    number: u64,
    epoch: u64,
    index: usize,
}

impl Ack for MemoryAck {
    fn ack(self: Box<Self>) -> BoxFuture<'static, Result<(), BoxError>> {
        let result: Result<(), BoxError> = {
            let mut state = self.shared.state();
            let current = state.epoch == self.epoch;
            if state.fail_acks > 0 {
                state.fail_acks -= 1;
                // Not acknowledged: delivered again.
                if current {
                    state.unack(&self.target, self.index, self.number);
                }
                Err("acknowledging failed (MemoryBroker::fail_acks); the event comes again".into())
            } else {
                if current {
                    state.acked(&self.target, self.index, self.number);
                }
                state.acknowledged += 1;
                Ok(())
            }
        };
        if result.is_err() {
            self.shared.changed();
        }
        Box::pin(std::future::ready(result))
    }

    /// Delivered again once `delay` has passed (a task of the runtime waits for it), as
    /// JetStream does: the subscription goes on with the next events meanwhile.
    fn nak(self: Box<Self>, delay: std::time::Duration) -> BoxFuture<'static, Result<(), BoxError>> {
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            {
                let mut state = self.shared.state();
                if state.epoch == self.epoch {
                    state.unack(&self.target, self.index, self.number);
                }
            }
            self.shared.changed();
        });
        Box::pin(std::future::ready(Ok(())))
    }
}
