//! The event bus: `#[event_handler]` methods of singletons, and [`EventBus::emit`].
//!
//! Dispatch rules:
//! - an event with no handler costs a map lookup and is dropped;
//! - inside a context scope of the bus's App, events are held by the scope until its completion
//!   phase ends. If it succeeded, `after_commit` handlers (the default) get them, before the
//!   destroy hooks run; if it failed, the scope was marked failed (`fail_scope`), its future
//!   panicked, or it was cancelled, `after_rollback` handlers do. Once the phase is over, the
//!   scope's later events (background tasks, destroy hooks) follow its result at once;
//! - `before_commit` handlers run inside the emitting scope, awaited one after the other at the
//!   start of its completion phase, before its completion hooks (so inside the transaction a
//!   unit of work commits in them); one that fails fails the phase;
//! - outside a scope (or in a scope of another App), and after a scope's phase has succeeded,
//!   `before_commit` and `after_commit` handlers get them at once; `after_rollback` ones never;
//! - each handler but a `before_commit` one runs on a task of its own, in a new context scope,
//!   counted by the App so that `App::shutdown` waits for it; a failing or panicking handler is
//!   logged with the event's and the handler's names and touches no other handler.

use std::any::{Any, TypeId};
use std::fmt;
use std::sync::{Arc, Weak};

mod deliver;
mod hold;

pub use deliver::{DeliverTo, Deliveries, HandlerInfo, HandlerRun};
pub use hold::EventHold;
use hold::Routed;

use crate::erased::{AnyArc, UnitFuture};
use crate::error::DiError;
use crate::graph::Graph;
use crate::lineage::{Lineage, LinkedWork};
use crate::proto::descriptor::ProtoDescriptor;
use crate::proto::kinds::Lifetime;
use crate::proto::traits::{Proto, SingletonProto};
use crate::resolver::Resolver;
use crate::runtime::{AppCell, AppInner, Handle, Handles};
use crate::scope;
use crate::scope::deferred::{HeldHooks, HeldItem};

/// An event as the bus carries it.
#[doc(hidden)]
pub type AnyEvent = Arc<dyn Any + Send + Sync>;

/// `#[event_handler]`'s event type: it crosses tasks, shared by every handler.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an event: events are `Send + Sync + 'static`",
    label = "taken by an `#[event_handler]`"
)]
pub trait Event: Send + Sync + 'static {}
impl<E: Send + Sync + 'static> Event for E {}

#[doc(hidden)]
pub const fn assert_event<E: Event>() {}

/// The event a handler takes, which the bus found by its type.
#[doc(hidden)]
#[inline]
pub fn event_ref<E: 'static>(event: &AnyEvent) -> &E {
    match event.downcast_ref::<E>() {
        Some(event) => event,
        None => unreachable!("the bus gives a handler the events of its type"),
    }
}

/// When an `#[event_handler]` runs, against the completion phase of the scope that emitted the
/// event: `#[event_handler(before_commit)]`, `#[event_handler]` (after the commit) or
/// `#[event_handler(after_rollback)]`.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventPhase {
    /// In the emitting scope, at the start of its completion phase; a failure fails it.
    BeforeCommit,
    /// Once the phase has succeeded, on a task of its own.
    AfterCommit,
    /// Once the scope has failed, on a task of its own.
    AfterRollback,
}

/// How many instances of a service run an `after_commit` handler of an event that crosses
/// instances (tegu-outbox's external events): each instance (`#[event_handler]`, the default)
/// or one (`#[event_handler(once_per_cluster)]`). A handler of an event that stays in the
/// process runs in the instance that emitted it, once either way.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use tegu_core::{handlers, singleton_proto, App, events::Once};
///
/// pub struct Shipped;
///
/// #[singleton_proto]
/// pub struct Mailer;
///
/// #[handlers]
/// impl Mailer {
///     /// One mail per shipment, whichever instance sends it.
///     #[event_handler(once_per_cluster)]
///     async fn on_shipped(&self, _: &Shipped) {}
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let handlers = app.events().handlers();
/// assert_eq!(handlers[0].name, "rust_out::Mailer::on_shipped");
/// assert_eq!(handlers[0].once, Once::PerCluster);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Once {
    /// Every instance runs it with every event: a cache to refresh, a local statistic.
    PerInstance,
    /// One instance of the service runs it with each event: a mail to send, a card to charge.
    PerCluster,
}

/// What `#[event_handler]` submits through `inventory`: a method of singleton `proto` that
/// takes `&E`.
#[doc(hidden)]
#[derive(Debug)]
pub struct HandlerDescriptor {
    pub proto: fn() -> TypeId,
    pub proto_name: fn() -> &'static str,
    pub event: fn() -> TypeId,
    pub event_name: fn() -> &'static str,
    pub method: &'static str,
    pub phase: EventPhase,
    /// How many instances run it (`once_per_cluster`).
    pub once: Once,
    /// The events it declares it emits (`emits(..)`): what `build()` checks against their
    /// handlers' lineage needs.
    pub emits: &'static [crate::lineage::Emitted],
    /// Calls the method on the erased object with the erased event.
    pub call: fn(AnyArc, AnyEvent) -> UnitFuture,
}

inventory::collect!(HandlerDescriptor);

/// One handler of an App: its proto and how to call it.
#[derive(Clone, Copy)]
pub(crate) struct Handler {
    pub(crate) proto: usize,
    pub(crate) descriptor: &'static HandlerDescriptor,
}

/// The handlers of an App, by event type, in registration order.
type Handlers = crate::maps::FastMap<TypeId, Vec<Handler>>;

/// The events feature's handle in an App: its handlers, and the transport that carries some
/// event types to every instance of the service.
struct Bus {
    handlers: Handlers,
    transport: Option<Arc<dyn EventTransport>>,
}

impl Bus {
    /// The transport, if it carries events of type `ty`.
    fn carrier(&self, ty: TypeId) -> Option<&Arc<dyn EventTransport>> {
        self.transport.as_ref().filter(|t| t.carries(ty))
    }
}

/// Carries the events of some types to the handlers of every instance of the service, instead
/// of this App's handlers directly: an outbox written in the emitting scope's transaction and
/// relayed to a broker (tegu-outbox), say. A singleton provides it (`provides(dyn
/// EventTransport)`); an App has at most one. Without one, every event stays in the process.
///
/// For a type it [`carries`](Self::carries), an event emitted in a context scope is
/// [`send`](Self::send)-ed at the start of the scope's completion phase, inside the scope and
/// before its completion hooks (so in the transaction a unit of work commits in them); a failed
/// send fails the phase. Then [`released`](Self::released) says how the scope ended. The
/// event's `after_commit` handlers do not get it from the emitting scope: the transport hands
/// it to [`EventBus::deliver`] in every instance, this one included. Its `before_commit`
/// handlers run in the scope as for any event, and its `after_rollback` ones if the scope fails.
/// Emitted outside a scope (or after the scope's phase), it is sent at once in a scope of its
/// own, on a task; a failure is logged.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::any::{Any, TypeId};
/// use std::sync::{Arc, Mutex};
/// use tegu_core::{singleton_proto, App, events::{EventBus, EventTransport}};
/// use tegu_core::futures::UnitFuture;
/// use tegu_core::lineage::Lineage;
///
/// pub struct Shipped(pub u32);
///
/// /// Carries `Shipped` to a queue (a broker, in a service).
/// #[singleton_proto(provides(dyn EventTransport))]
/// #[derive(Default)]
/// pub struct Queue { sent: Mutex<Vec<u32>> }
///
/// impl EventTransport for Queue {
///     fn carries(&self, event: TypeId) -> bool {
///         event == TypeId::of::<Shipped>()
///     }
///
///     fn send(&self, event: Arc<dyn Any + Send + Sync>, _lineage: &Lineage) -> UnitFuture {
///         let shipped = event.downcast_ref::<Shipped>().map(|s| s.0);
///         self.sent.lock().unwrap().extend(shipped);
///         Box::pin(async { Ok(()) })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let bus = app.events();
/// app.try_run_in_context(async { bus.emit(Shipped(7)) }).await?;
/// assert_eq!(*app.get_object::<Queue>()?.sent.lock().unwrap(), [7]);
/// // What the queue brings back, in each instance: to the handlers of `Shipped`.
/// let delivery = bus.deliver(Shipped(7)).await;
/// assert_eq!(delivery.failed, 0);
/// # Ok(()) }
/// ```
pub trait EventTransport: Send + Sync + 'static {
    /// Whether this transport carries the events of type `event`.
    fn carries(&self, event: TypeId) -> bool;

    /// Sends `event` (of a type it carries): in the emitting scope, before its commit.
    /// `lineage` is the emitting scope's when it emitted the event (its tenant, trace, request
    /// id): what the transport carries to the handlers' scopes in every instance
    /// ([`Lineage::headers`]), which may differ from the scope `send` runs in (an event held by
    /// a transaction begun in an outer scope).
    fn send(&self, event: Arc<dyn Any + Send + Sync>, lineage: &Lineage) -> UnitFuture;

    /// The scope that sent an event of type `event` ended: `committed` if its completion phase
    /// succeeded. An outbox wakes its relay then. Called once per event; by default, nothing.
    fn released(&self, event: TypeId, committed: bool) {
        let _ = (event, committed);
    }
}

/// What [`EventBus::deliver`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Delivery {
    /// How many handlers got the event.
    pub handlers: usize,
    /// How many of them failed or panicked (each logged).
    pub failed: usize,
    /// No handler could run: the App is gone (dropped without `shutdown()`) or shutting down.
    /// A broker's consumer leaves such an event unacknowledged, so that it comes again (to this
    /// instance once it runs again), rather than take it as handled.
    pub refused: bool,
}

/// The handlers of the protos in `graph` that `build()` built (or left lazy), from `inventory`.
fn handlers(graph: &Graph, available: impl Fn(usize) -> bool) -> Handlers {
    let mut map = Handlers::default();
    for descriptor in inventory::iter::<HandlerDescriptor> {
        for &proto in graph.of_type((descriptor.proto)()).iter().filter(|&&p| available(p)) {
            map.entry((descriptor.event)()).or_default().push(Handler { proto, descriptor });
        }
    }
    map
}

/// Gives the App's handles what the event bus needs: the handlers of the protos in `graph`
/// that `build()` built (or left lazy), and the App's transport (the singleton that provides
/// one: `build()` refuses two); and, if there is any of them, what a scope does with the events
/// it holds (the `before_commit` handlers and the transport's send in its completion phase, the
/// others at its end).
pub(crate) fn install(
    handles: &mut Handles,
    graph: &Graph,
    available: impl Fn(usize) -> bool,
    transport: Option<Arc<dyn EventTransport>>,
) -> Option<HeldHooks> {
    let handlers = handlers(graph, available);
    if handlers.is_empty() && transport.is_none() {
        return None;
    }
    handles.events = Handle::new(Bus { handlers, transport });
    Some(HeldHooks { prepare: before_commit, send: send_held, release })
}

/// The App's bus (none if no handler or transport is registered).
fn bus_of(app: &AppInner) -> Option<&Bus> {
    app.handles.events.get::<Bus>()
}

/// The App's handlers, by event type (none if no handler is registered).
fn handlers_of(app: &AppInner) -> Option<&Handlers> {
    bus_of(app).map(|bus| &bus.handlers)
}

/// Emits events to the `#[event_handler]` methods of an App's singletons. Inject it
/// (`#[inject] events: Arc<EventBus>`) or take it from [`App::events`](crate::App::events).
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use std::sync::Arc;
/// use tegu_core::{handlers, singleton_proto, App, events::EventBus};
///
/// pub struct TodoCompleted { pub id: u64 }
///
/// #[singleton_proto]
/// #[derive(Default)]
/// pub struct Stats { completed: AtomicUsize }
///
/// #[handlers]
/// impl Stats {
///     #[event_handler]
///     async fn on_completed(&self, _event: &TodoCompleted) {
///         self.completed.fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// #[singleton_proto]
/// pub struct Todos {
///     #[inject]
///     events: Arc<EventBus>,
/// }
///
/// impl Todos {
///     pub async fn complete(&self, id: u64) {
///         // Held by the request's scope, dispatched once it has ended well.
///         self.events.emit(TodoCompleted { id });
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let todos = app.get_object::<Todos>()?;
/// app.run_in_context(todos.complete(1)).await;
/// app.shutdown().await?; // waits for the handlers
/// assert_eq!(app.get_object::<Stats>()?.completed.load(Ordering::Relaxed), 1);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct EventBus {
    app: AppCell,
}

impl EventBus {
    pub(crate) fn new(app: AppCell) -> Self {
        EventBus { app }
    }

    /// Emits `event` to every `#[event_handler]` taking `&E`: at once outside a context scope;
    /// inside one, to the `before_commit` handlers at the start of the scope's completion phase,
    /// and at its end to the `after_commit` ones (the default) if it succeeded or the
    /// `after_rollback` ones if it failed. Each handler but a `before_commit` one runs on a task
    /// of its own, in a scope of its own. An event type with no handler costs one lookup.
    ///
    /// Logs an error (and drops the event) when the App has shut down, is gone, or there is no
    /// tokio runtime to run the handlers on.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// struct Nobody;
    /// app.events().emit(Nobody); // no handler: a lookup, nothing else
    /// // In a scope: held until the scope's completion phase succeeds.
    /// app.run_in_context(async { app.events().emit(Nobody) }).await;
    /// # Ok(()) }
    /// ```
    pub fn emit<E: Send + Sync + 'static>(&self, event: E) {
        let Some(app) = self.app.get().and_then(Weak::upgrade) else {
            tracing::error!(
                event = core::any::type_name::<E>(),
                "an event was emitted on the bus of an App that is gone or not built yet; dropped"
            );
            return;
        };
        let ty = TypeId::of::<E>();
        let Some(bus) = bus_of(&app) else { return };
        let carried = bus.carrier(ty).is_some();
        let handlers = bus.handlers.get(&ty);
        if !carried && handlers.is_none() {
            return;
        }
        let prepare =
            carried || handlers.is_some_and(|h| h.iter().any(|h| h.descriptor.phase == EventPhase::BeforeCommit));
        // The lineage of the scope it is emitted in, for its handlers' scopes.
        let lineage = scope::lineage::of_app(&app);
        let held = HeldItem { ty, value: Arc::new(event), prepare, lineage };
        match hold::route(&app, held) {
            Routed::Held => {}
            Routed::Release(held, ok) => release(&app, held, ok),
            Routed::Closed => tracing::error!(
                event = core::any::type_name::<E>(),
                "an event was emitted outside a scope after shutdown began; dropped"
            ),
        }
    }

    /// The lineage that a received message's `headers` carry, for this App's lineage types:
    /// [`App::lineage_from_headers`](crate::App::lineage_from_headers), for a transport that
    /// holds the bus rather than the App; empty once the App is gone.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::lineage::Tenant;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().without_inventory().lineage::<Tenant>().build().await?;
    /// let lineage = app.events().lineage_from_headers([("tegu-tenant", "acme")]);
    /// assert_eq!(lineage.get::<Tenant>().map(Tenant::key), Some("acme"));
    /// # Ok(()) }
    /// ```
    pub fn lineage_from_headers<'h>(&self, headers: impl IntoIterator<Item = (&'h str, &'h str)>) -> Lineage {
        match self.app.get().and_then(Weak::upgrade) {
            Some(app) => scope::lineage::from_headers(&app, headers),
            None => Lineage::new(),
        }
    }

    /// How many handlers events of type `E` have in this App.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = tegu_core::App::builder().build().await?;
    /// assert_eq!(app.events().handler_count::<String>(), 0);
    /// # Ok(()) }
    /// ```
    pub fn handler_count<E: 'static>(&self) -> usize {
        self.app
            .get()
            .and_then(Weak::upgrade)
            .map_or(0, |app| handlers_of(&app).and_then(|h| h.get(&TypeId::of::<E>())).map_or(0, Vec::len))
    }
}

impl EventBus {
    /// Hands `event`, received from an [`EventTransport`] (in every instance of the service),
    /// to the `after_commit` handlers of `E` in this App: one after the other, each in a scope
    /// of its own, as after a commit. Resolves when they have run; a failing handler is logged
    /// and counted in [`Delivery::failed`], and the others still run. What the transport calls;
    /// see [`EventTransport`] for an example.
    pub async fn deliver<E: Send + Sync + 'static>(&self, event: E) -> Delivery {
        self.deliver_with(event, &Lineage::new()).await
    }

    /// As [`deliver`](Self::deliver), each handler's scope seeded with `lineage`: that of the
    /// request that emitted the event, which the transport carried in the message's headers
    /// ([`App::lineage_from_headers`](crate::App::lineage_from_headers)).
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use std::sync::Mutex;
    /// use tegu_core::{handlers, singleton_proto, App, ContextRef, lineage::Tenant};
    ///
    /// pub struct Shipped;
    ///
    /// #[singleton_proto]
    /// pub struct Mailer {
    ///     #[inject]
    ///     tenant: ContextRef<Tenant>,
    ///     sent: Mutex<Vec<String>>,
    /// }
    ///
    /// #[handlers]
    /// impl Mailer {
    ///     #[event_handler]
    ///     async fn on_shipped(&self, _: &Shipped) -> Result<(), tegu_core::DiError> {
    ///         let tenant = self.tenant.try_get()?;
    ///         self.sent.lock().unwrap().push(tenant.key().to_owned());
    ///         Ok(())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().lineage::<Tenant>().build().await?;
    /// // What a broker brought: the event and its headers.
    /// let lineage = app.lineage_from_headers([("tegu-tenant", "acme")]);
    /// let delivery = app.events().deliver_with(Shipped, &lineage).await;
    /// assert_eq!(delivery.failed, 0);
    /// assert_eq!(*app.get_object::<Mailer>()?.sent.lock().unwrap(), ["acme"]);
    /// # Ok(()) }
    /// ```
    pub async fn deliver_with<E: Send + Sync + 'static>(&self, event: E, lineage: &Lineage) -> Delivery {
        let each = self.deliver_each(event, lineage, DeliverTo::all()).await;
        Delivery {
            handlers: each.runs.len(),
            failed: each.runs.iter().filter(|run| run.error.is_some()).count(),
            refused: each.refused,
        }
    }
}

impl fmt::Debug for EventBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventBus").finish_non_exhaustive()
    }
}

/// A held event at the end of its scope's completion phase (`ok`: it succeeded), or emitted
/// where nothing holds it: starts its `after_commit` handlers, and its `before_commit` ones if
/// they have not run in the phase; or its `after_rollback` ones. An event a transport carries
/// goes to no `after_commit` handler here (the transport delivers it), and is sent now if it
/// was not in the phase.
fn release(app: &Arc<AppInner>, held: HeldItem, ok: bool) {
    let Some(bus) = bus_of(app) else { return };
    let carrier = bus.carrier(held.ty);
    if let Some(transport) = carrier {
        if ok && held.prepare {
            send_alone(app, transport.clone(), held.value.clone(), held.lineage.clone());
        } else {
            transport.released(held.ty, ok);
        }
    }
    let Some(handlers) = bus.handlers.get(&held.ty) else { return };
    let runs = |h: &&Handler| match h.descriptor.phase {
        EventPhase::BeforeCommit => ok && held.prepare,
        EventPhase::AfterCommit => ok && carrier.is_none(),
        EventPhase::AfterRollback => !ok,
    };
    let mut handlers = handlers.iter().filter(runs).peekable();
    if handlers.peek().is_none() {
        if !ok && carrier.is_none() {
            let event = bus.handlers.get(&held.ty).and_then(|h| h.first());
            tracing::debug!(
                event = event.map_or("?", |h| (h.descriptor.event_name)()),
                "the event's scope failed, and no `after_rollback` handler takes it: dropped"
            );
        }
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        let event = handlers.peek().map_or("?", |h| (h.descriptor.event_name)());
        tracing::error!(event, "an event was emitted outside a tokio runtime; its handlers cannot run, dropped");
        return;
    };
    for &handler in handlers {
        let Some(guard) = app.try_pending() else {
            tracing::error!(
                event = (handler.descriptor.event_name)(),
                "an event was emitted after the App shut down; dropped"
            );
            return;
        };
        let app = app.clone();
        let event = held.value.clone();
        let lineage = held.lineage.clone();
        drop(runtime.spawn(async move {
            let _ = run_handler(&app, handler, event, &lineage, LinkedWork::Event, None).await;
            drop(guard);
        }));
    }
}

/// Sends an event that no scope's phase sent (emitted outside a scope, or after the phase) in
/// a scope of its own, on a task; a failure is logged (nobody is left to answer to).
fn send_alone(app: &Arc<AppInner>, transport: Arc<dyn EventTransport>, event: AnyEvent, lineage: Lineage) {
    let (Ok(runtime), Some(guard)) = (tokio::runtime::Handle::try_current(), app.try_pending()) else {
        tracing::error!(
            "an event for the event transport was emitted outside a tokio runtime, or after shutdown; dropped"
        );
        return;
    };
    let app = app.clone();
    drop(runtime.spawn(async move {
        // A busy database (an outbox's write waiting for a lock, a pool exhausted) passes:
        // tried again, within the App's background-task timeout, before the event is lost.
        let until = tokio::time::Instant::now() + app.background_timeout;
        let mut wait = std::time::Duration::from_millis(10);
        let sent = loop {
            let attempt = crate::isolate::catch_hook(|| transport.send(Arc::clone(&event), &lineage));
            let sent = scope::end::run_job(&app, &lineage, attempt).await;
            match &sent {
                Err(error) if crate::error::kind::is_busy(&**error) && tokio::time::Instant::now() + wait < until => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(std::time::Duration::from_millis(500));
                }
                _ => break sent,
            }
        };
        if let Err(error) = &sent {
            tracing::error!(%error, "an event emitted outside a scope could not be sent by the event transport; it is lost");
        }
        transport.released((*event).type_id(), sent.is_ok());
        drop(guard);
    }));
}

/// The `before_commit` handlers of a held event, one after the other, inside the scope that
/// holds it (its completion phase, its transaction): the first that fails or panics fails the
/// phase. Each runs in a span of its own (`event handler`) with the event's lineage. An event
/// emitted in a scope of another lineage than the committing one (a scope opened inside a
/// `#[transactional]` method: another user, trace or request) has its handlers run in a
/// scope of their own seeded with the emitter's lineage, still in the transaction; one of
/// another tenant is refused (its transaction shows the database the committing tenant).
fn before_commit(
    app: &Arc<AppInner>,
    held: HeldItem,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), DiError>> + Send>> {
    let app = app.clone();
    Box::pin(async move {
        let Some(bus) = bus_of(&app) else { return Ok(()) };
        let handlers: Vec<Handler> = bus
            .handlers
            .get(&held.ty)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter(|h| h.descriptor.phase == EventPhase::BeforeCommit)
            .copied()
            .collect();
        let Some(first) = handlers.first() else { return Ok(()) };
        let committing = scope::lineage::of_app(&app);
        let own_scope = held.lineage.same_values(&committing);
        if !own_scope && let Err(source) = same_tenant(&held.lineage, &committing) {
            let d = first.descriptor;
            return Err(DiError::EventHandler {
                event: (d.event_name)(),
                handler: format!("{}::{}", (d.proto_name)(), d.method),
                source: Arc::from(source),
            });
        }
        for handler in handlers {
            let d = handler.descriptor;
            let _running = app.metrics.handler();
            let span = handler_span(d);
            scope::lineage::link(&app, &span, &held.lineage, crate::lineage::LinkedWork::Event);
            let result = match app.instance_of(handler.proto) {
                Ok(object) => {
                    let event = held.value.clone();
                    let call = crate::isolate::catch_hook(|| (d.call)(object, event));
                    let call = async {
                        if own_scope { call.await } else { scope::end::run_job(&app, &held.lineage, call).await }
                    };
                    tracing::Instrument::instrument(call, span).await
                }
                Err(error) => Err(error.into()),
            };
            if let Err(source) = result {
                crate::telemetry::handler_failed((d.event_name)());
                return Err(DiError::EventHandler {
                    event: (d.event_name)(),
                    handler: format!("{}::{}", (d.proto_name)(), d.method),
                    source: Arc::from(source),
                });
            }
        }
        Ok(())
    })
}

/// Has the App's transport send a held event it carries (the outbox's write, in the scope's
/// transaction), after the `before_commit` handlers of every event the unit holds have run.
fn send_held(
    app: &Arc<AppInner>,
    held: HeldItem,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), DiError>> + Send>> {
    let transport = bus_of(app).and_then(|bus| bus.carrier(held.ty)).cloned();
    Box::pin(async move {
        let Some(transport) = transport else { return Ok(()) };
        crate::isolate::catch_hook(|| transport.send(held.value.clone(), &held.lineage))
            .await
            .map_err(|source| DiError::EventTransport { source: Arc::from(source) })
    })
}

/// The span of a handler's run, with the lineage's log fields empty until recorded.
fn handler_span(d: &HandlerDescriptor) -> tracing::Span {
    tracing::info_span!(
        "event handler",
        event = (d.event_name)(),
        handler = %format_args!("{}::{}", (d.proto_name)(), d.method),
        request_id = tracing::field::Empty,
        trace_id = tracing::field::Empty,
        tenant = tracing::field::Empty,
        otel.kind = tracing::field::Empty
    )
}

/// Refuses to run a `before_commit` handler in the scope that commits when the event was
/// emitted in a scope of another tenant (one opened inside a `#[transactional]` method): the
/// handler would write in a transaction that shows the database the committing tenant.
fn same_tenant(emitted: &Lineage, committing: &Lineage) -> Result<(), crate::error::BoxError> {
    use crate::lineage::Tenant;
    if emitted.get::<Tenant>() == committing.get::<Tenant>() {
        return Ok(());
    }
    Err("the event was emitted in a scope of another tenant than the scope committing it (a scope opened \
         inside a `#[transactional]` method), where this handler would run as the committing scope's \
         tenant; call the `#[transactional]` method inside the emitting tenant's scope instead"
        .into())
}

/// Runs one handler in a new scope seeded with `lineage`, in a span with the lineage's log
/// fields; logs its failure, and says whether it succeeded.
async fn run_handler(
    app: &Arc<AppInner>,
    handler: Handler,
    event: AnyEvent,
    lineage: &Lineage,
    work: LinkedWork,
    first: Option<&(dyn Fn() + Sync)>,
) -> Result<(), String> {
    let d = handler.descriptor;
    let _running = app.metrics.handler();
    let span = handler_span(d);
    scope::lineage::link(app, &span, lineage, work);
    let result = match app.instance_of(handler.proto) {
        Ok(object) => {
            // `first` runs in the handler's scope, before the handler: what it emits goes with
            // the handler's work.
            let call = || {
                if let Some(first) = first {
                    first();
                }
                (d.call)(object, event)
            };
            let work = scope::end::run_job(app, lineage, crate::isolate::catch_hook(call));
            tracing::Instrument::instrument(work, span.clone()).await
        }
        Err(error) => Err(error.into()),
    };
    let _entered = span.enter();
    if let Err(error) = &result {
        crate::telemetry::handler_failed((d.event_name)());
        tracing::error!(
            event = (d.event_name)(),
            handler = %format_args!("{}::{}", (d.proto_name)(), d.method),
            %error,
            "an event handler failed; the other handlers of the event are not affected"
        );
    }
    result.map_err(|error| error.to_string())
}

fn bus_factory(r: &Resolver<'_>) -> Result<AnyArc, DiError> {
    Ok(Arc::new(EventBus::new(r.cell.clone())))
}

const BUS: ProtoDescriptor = ProtoDescriptor::new::<EventBus>("eventBus", Lifetime::Singleton, bus_factory);

inventory::submit! { BUS }

impl Proto for EventBus {
    const DESCRIPTOR: ProtoDescriptor = BUS;
}
impl SingletonProto for EventBus {}

/// Withholds the events the current context scope holds, and those it emits from now on, from
/// their `before_commit` and `after_commit` handlers (its `after_rollback` handlers get them):
/// for a scope whose work failed without a completion hook failing. The same as
/// [`fail_scope`](crate::scope::fail_scope), which also tells a unit of work to roll back (tegu-http
/// calls it when a request is answered with a 4xx or 5xx status). Does nothing outside a scope.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use tegu_core::{handlers, singleton_proto, App};
///
/// pub struct Paid;
///
/// #[singleton_proto]
/// #[derive(Default)]
/// pub struct Receipts { sent: AtomicUsize }
///
/// #[handlers]
/// impl Receipts {
///     #[event_handler]
///     async fn on_paid(&self, _: &Paid) { self.sent.fetch_add(1, Ordering::Relaxed); }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let charged: Result<(), &str> = app
///     .run_in_context(async {
///         app.events().emit(Paid);
///         let result = Err("card declined"); // the job fails after emitting
///         if result.is_err() {
///             tegu_core::events::discard_events();
///         }
///         result
///     })
///     .await;
/// assert!(charged.is_err());
/// app.shutdown().await?;
/// assert_eq!(app.get_object::<Receipts>()?.sent.load(Ordering::Relaxed), 0);
/// # Ok(()) }
/// ```
pub fn discard_events() {
    scope::handle::drop_held();
}
