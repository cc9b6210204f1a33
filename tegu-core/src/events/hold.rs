//! [`EventHold`]: the events of a unit of work smaller than its scope (a transaction of a
//! method's own, a savepoint), held until it ends, so that they follow its outcome rather than
//! the scope's.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::DiError;
use crate::runtime::AppInner;
use crate::scope;
use crate::scope::deferred::HeldItem;

/// An event held, and the App that emitted it.
type Item = (Arc<AppInner>, HeldItem);

/// The items a hold has, shared with the task-local that routes emitted events to it (and with
/// tasks spawned in its unit, which may emit after it ended).
#[derive(Default)]
struct Items(Mutex<State>);

/// What a hold has, and where its unit's events go once it ended.
#[derive(Default)]
struct State {
    held: Vec<Item>,
    ended: Option<Ended>,
}

/// How a hold's unit ended: where an event emitted in it later goes (a task spawned in the
/// unit, still running).
enum Ended {
    /// Released with this outcome: released at once, with it.
    Released(bool),
    /// Of an unknown outcome: to no handler.
    Unknown,
    /// Handed to this hold (a savepoint released in its transaction).
    HandedTo(Arc<Items>),
    /// Handed up: where an event emitted without this hold goes.
    Up,
}

/// Where an item pushed to a hold went.
enum Pushed {
    Held,
    Release(Item, bool),
    Dropped,
    Up(Item),
}

impl Items {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds `item`, or sends it where the ended unit's events went.
    fn push(&self, item: Item) -> Pushed {
        let mut state = self.lock();
        match &state.ended {
            None => {
                state.held.push(item);
                Pushed::Held
            }
            Some(Ended::Released(ok)) => Pushed::Release(item, *ok),
            Some(Ended::Unknown) => Pushed::Dropped,
            Some(Ended::Up) => Pushed::Up(item),
            Some(Ended::HandedTo(outer)) => {
                let outer = Arc::clone(outer);
                drop(state);
                outer.push(item)
            }
        }
    }

    /// Takes what is held, and says where later events go.
    fn end(&self, ended: Ended) -> Vec<Item> {
        let mut state = self.lock();
        state.ended = Some(ended);
        std::mem::take(&mut state.held)
    }
}

tokio::task_local! {
    /// The innermost hold of the task's futures in progress.
    static HOLD: Arc<Items>;
}

// A task spawned in a unit of work (`tegu_core::spawn` in a `#[transactional]` method) is part
// of it: the events it emits are held by the unit's hold.
inventory::submit! {
    crate::scope::carry::Carrier {
        capture: || HOLD.try_with(|items| Arc::clone(items) as crate::scope::carry::CarriedValue).ok(),
        enter: |value, f| match Arc::clone(value).downcast::<Items>() {
            Ok(items) => HOLD.sync_scope(items, f),
            Err(_) => f(),
        },
    }
}

/// Holds the events emitted inside a unit of work smaller than its context scope (a
/// transaction of a method's own, a savepoint) until it ends, so that they follow its outcome:
/// its [`prepare`](Self::prepare) runs their `before_commit` handlers and sends those an
/// [`EventTransport`](crate::events::EventTransport) carries (an outbox write, in the unit's
/// transaction), and [`release`](Self::release) hands them to their `after_commit` or
/// `after_rollback` handlers once it has committed or rolled back. A unit that ends inside
/// another hands its events [`up`](Self::hand_up), to go with the outer one.
///
/// What tegu-tx does around a `#[transactional]` method's own transaction; a hold does nothing
/// to events emitted outside [`run`](Self::run), or on other tasks. Dropped with events still
/// held (its unit cut short), it releases them as rolled back.
///
/// # Examples
///
/// ```rust,standalone_crate
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use tegu_core::{handlers, singleton_proto, App, events::EventHold};
///
/// pub struct Paid;
///
/// #[singleton_proto]
/// #[derive(Default)]
/// pub struct Receipts { sent: AtomicUsize, voided: AtomicUsize }
///
/// #[handlers]
/// impl Receipts {
///     #[event_handler]
///     async fn on_paid(&self, _: &Paid) { self.sent.fetch_add(1, Ordering::Relaxed); }
///     #[event_handler(after_rollback)]
///     async fn on_voided(&self, _: &Paid) { self.voided.fetch_add(1, Ordering::Relaxed); }
/// }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
/// let app = App::builder().build().await?;
/// let events = app.events();
/// app.run_in_context(async {
///     // A unit of work of its own inside the request, which rolls back.
///     let hold = EventHold::new();
///     hold.run(async { events.emit(Paid) }).await;
///     hold.prepare().await?; // before its commit: the `before_commit` handlers
///     hold.release(false); // it rolled back: the `after_rollback` handlers
///     Ok::<(), tegu_core::DiError>(())
/// })
/// .await?; // the request itself succeeds
/// app.shutdown().await?;
/// let receipts = app.get_object::<Receipts>()?;
/// assert_eq!((receipts.sent.load(Ordering::Relaxed), receipts.voided.load(Ordering::Relaxed)), (0, 1));
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct EventHold {
    items: Arc<Items>,
}

impl std::fmt::Debug for EventHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventHold").field("held", &self.items.lock().held.len()).finish()
    }
}

impl EventHold {
    /// A hold with no events.
    pub fn new() -> Self {
        EventHold::default()
    }

    /// Runs `fut`, holding the events emitted in it (on this task, by any App) here.
    pub async fn run<F: Future>(&self, fut: F) -> F::Output {
        HOLD.scope(Arc::clone(&self.items), fut).await
    }

    /// Runs the `before_commit` handlers of the events held, one after the other, then has
    /// the event transport send those it carries, inside the caller's context (its
    /// transaction), as a scope's completion phase does; events they emit are held too.
    ///
    /// # Errors
    ///
    /// The first handler or send that fails ([`DiError::EventHandler`],
    /// [`DiError::EventTransport`]): the unit must not commit.
    pub async fn prepare(&self) -> Result<(), DiError> {
        let mut prepared = Vec::new();
        loop {
            let items: Vec<Item> = {
                let mut state = self.items.lock();
                let mut new = Vec::new();
                for (app, item) in state.held.iter_mut().filter(|(_, item)| item.prepare) {
                    new.push((Arc::clone(app), item.clone()));
                    item.prepare = false;
                }
                new
            };
            if items.is_empty() {
                break;
            }
            for (app, item) in items {
                let Some(hooks) = app.held else { continue };
                self.run((hooks.prepare)(&app, item.clone())).await?;
                prepared.push((app, item));
            }
        }
        // Sent once every handler has run: none leaves while another may still fail the unit.
        for (app, item) in prepared {
            let Some(hooks) = app.held else { continue };
            self.run((hooks.send)(&app, item)).await?;
        }
        Ok(())
    }

    /// Whether an event held has a `before_commit` step that [`prepare`](Self::prepare) has
    /// not run yet: one emitted since the last `prepare`, by work still running in the unit.
    /// A unit commits only once this is `false`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::events::EventHold;
    ///
    /// assert!(!EventHold::new().unprepared());
    /// ```
    pub fn unprepared(&self) -> bool {
        self.items.lock().held.iter().any(|(_, item)| item.prepare)
    }

    /// The unit ended: its events go to their `after_commit` handlers if it `committed` (and
    /// to the transport's `released`), else to their `after_rollback` ones; so do those a task
    /// spawned in the unit emits later.
    pub fn release(&self, committed: bool) {
        let items = self.items.end(Ended::Released(committed));
        for (app, item) in items {
            release_through_hooks(&app, item, committed);
        }
    }

    /// The unit's outcome is unknown (its commit was sent and its answer lost): its events go
    /// to no handler, neither `after_commit` nor `after_rollback` (either could be false); what
    /// an event transport wrote in the unit (an outbox row) follows the database's outcome. An
    /// error names how many events were held.
    ///
    /// # Examples
    ///
    /// ```
    /// use tegu_core::events::EventHold;
    ///
    /// let hold = EventHold::new();
    /// hold.release_unknown(); // nothing held: nothing logged
    /// ```
    pub fn release_unknown(&self) {
        let items = self.items.end(Ended::Unknown);
        if !items.is_empty() {
            tracing::error!(
                events = items.len(),
                "the outcome of a unit of work is unknown (its commit's answer was lost): its events go to no handler"
            );
        }
    }

    /// The unit ended inside `outer` (a savepoint released in its transaction): its events
    /// are held by `outer` from now on, to follow its outcome, and so are those a task spawned
    /// in the unit emits later.
    pub fn hand_to(&self, outer: &EventHold) {
        self.hand_to_items(&outer.items);
    }

    /// The unit ended inside the unit the calling task runs in now (a savepoint released
    /// inside another savepoint, or in its transaction): its events are held by that unit's
    /// hold, the innermost around the caller, or by `outer` if the caller runs in none (a
    /// savepoint of the request's transaction, set from the handler).
    pub fn hand_on(&self, outer: &EventHold) {
        let enclosing = HOLD.try_with(Arc::clone).ok().filter(|items| !Arc::ptr_eq(items, &self.items));
        self.hand_to_items(enclosing.as_ref().unwrap_or(&outer.items));
    }

    fn hand_to_items(&self, outer: &Arc<Items>) {
        let items = self.items.end(Ended::HandedTo(Arc::clone(outer)));
        for item in items {
            if let Pushed::Release((app, item), ok) = outer.push(item) {
                release_through_hooks(&app, item, ok);
            }
        }
    }

    /// The unit ended inside another (a savepoint released): its events go where an event
    /// emitted here now would, to the enclosing hold, the scope, or their handlers at once.
    pub fn hand_up(&self) {
        let items = self.items.end(Ended::Up);
        for (app, item) in items {
            match route(&app, item) {
                Routed::Held => {}
                Routed::Release(item, ok) => release_through_hooks(&app, item, ok),
                Routed::Closed => {
                    tracing::error!("an event was handed up outside a scope after shutdown began; dropped")
                }
            }
        }
    }
}

impl Drop for EventHold {
    /// Events still held: the unit was cut short, and did not commit.
    fn drop(&mut self) {
        let ended = self.items.lock().ended.is_some();
        if !ended {
            self.release(false);
        }
    }
}

/// Where an emitted event went ([`route`]).
pub(super) enum Routed {
    /// Held: by a hold, or by its scope until the completion phase's end.
    Held,
    /// To release at once, as committed or not (its scope's phase is over, or there is none).
    Release(HeldItem, bool),
    /// Emitted outside a scope after shutdown began: dropped.
    Closed,
}

/// Where an event emitted now goes: the innermost hold of the task, else the current scope of
/// its App until its completion phase's end, else its handlers at once.
pub(super) fn route(app: &Arc<AppInner>, item: HeldItem) -> Routed {
    let mut item = Some(item);
    let pushed = HOLD.try_with(|items| item.take().map(|item| items.push((Arc::clone(app), item))));
    let item = match pushed {
        Ok(Some(Pushed::Held | Pushed::Dropped)) => return Routed::Held,
        Ok(Some(Pushed::Release((_, item), ok))) => return Routed::Release(item, ok),
        Ok(Some(Pushed::Up((_, item)))) => item,
        _ => match item {
            Some(item) => item,
            None => return Routed::Held,
        },
    };
    match scope::handle::current_shared(app.id) {
        Some(shared) => match shared.hold_item(item) {
            None => Routed::Held,
            Some((item, ok)) => Routed::Release(item, ok),
        },
        // Once `shutdown` has begun, only what scopes still ending hold is drained: a steady
        // emitter outside them would keep it waiting until its deadline.
        None if app.lifecycle.reached(crate::runtime::phase::Phase::OutsideClosed) => Routed::Closed,
        None => Routed::Release(item, true),
    }
}

/// Releases `item` through the hooks the events feature installed in the App (its `release`),
/// as a scope's end does: a held event reaches its handlers or the transport the same way
/// whichever hold it ends in. An App without them has no handler and no transport.
fn release_through_hooks(app: &Arc<AppInner>, item: HeldItem, ok: bool) {
    if let Some(hooks) = &app.held {
        (hooks.release)(app, item, ok);
    }
}
