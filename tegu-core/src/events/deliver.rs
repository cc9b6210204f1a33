//! Delivering an event a transport brought to this App's `after_commit` handlers, each
//! handler's outcome told apart: what a transport needs to retry one handler, or set the event
//! aside for it, without running the others again.

use std::any::TypeId;
use std::sync::{Arc, Weak};

use super::{AnyEvent, EventBus, EventPhase, Handler, Once, handlers_of, run_handler};
use crate::lineage::{Lineage, LinkedWork};

/// What one `after_commit` handler did with a delivered event ([`EventBus::deliver_each`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HandlerRun {
    /// The handler, as its proto's type and its method: `my_app::Mailer::on_shipped`; the
    /// handler of a second or third object of that type (two protos of one type) is
    /// `my_app::Mailer::on_shipped#2`, `#3`, in registration order. The name
    /// [`DeliverTo::only`] takes.
    pub handler: String,
    /// Its error (or its panic's message), as text; `None` if it succeeded.
    pub error: Option<String>,
}

/// What [`EventBus::deliver_each`] did: each handler's run, in registration order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Deliveries {
    /// The handlers that got the event, and how each did.
    pub runs: Vec<HandlerRun>,
    /// No handler could run: the App is gone (dropped without `shutdown()`) or shutting down.
    /// A broker's consumer leaves such an event unacknowledged, so that it comes again.
    pub refused: bool,
}

impl Deliveries {
    /// The runs that failed.
    pub fn failed(&self) -> impl Iterator<Item = &HandlerRun> {
        self.runs.iter().filter(|run| run.error.is_some())
    }
}

/// Which `after_commit` handlers [`EventBus::deliver_each`] runs, and what each one's scope
/// does before its handler: all of them by default.
///
/// # Examples
///
/// ```
/// use tegu_core::events::DeliverTo;
///
/// let handled = vec!["my_app::Stats::count".to_owned()];
/// let to = DeliverTo::all().except(&handled);
/// assert!(to.takes("my_app::Mailer::mail"));
/// assert!(!to.takes("my_app::Stats::count"));
/// assert!(!DeliverTo::only("my_app::Stats::count").takes("my_app::Mailer::mail"));
/// ```
#[derive(Clone, Copy, Default)]
pub struct DeliverTo<'a> {
    only: Option<&'a str>,
    once: Option<Once>,
    except: &'a [String],
    first: Option<&'a (dyn Fn(&str) + Sync)>,
}

impl<'a> DeliverTo<'a> {
    /// Every `after_commit` handler of the event.
    pub fn all() -> Self {
        DeliverTo::default()
    }

    /// The handler named `handler` alone (as [`HandlerRun::handler`] names it): to try one
    /// handler again, or replay an event it failed, without running the others twice.
    pub fn only(handler: &'a str) -> Self {
        DeliverTo { only: Some(handler), ..DeliverTo::default() }
    }

    /// The handlers that run `once` so alone: [`Once::PerInstance`] for what this instance's
    /// own subscription brings, [`Once::PerCluster`] for a subscription shared by the
    /// cluster.
    #[must_use]
    pub fn once(self, once: Once) -> Self {
        DeliverTo { once: Some(once), ..self }
    }

    /// Leaves out the handlers named in `handlers` (they handled the event already).
    #[must_use]
    pub fn except(self, handlers: &'a [String]) -> Self {
        DeliverTo { except: handlers, ..self }
    }

    /// Calls `first` with each handler's name in that handler's scope, before the handler
    /// runs. What it emits there is held by the scope like the handler's own events: an
    /// [`EventTransport`](crate::events::EventTransport) sends it in the scope's completion
    /// phase, in the handler's transaction when the handler has one (the outbox's record that
    /// the handler handled the event, committed with what the handler wrote), and only if the
    /// handler succeeded.
    #[must_use]
    pub fn first(self, first: &'a (dyn Fn(&str) + Sync)) -> Self {
        DeliverTo { first: Some(first), ..self }
    }

    /// Whether the handler named `handler` is among these.
    pub fn takes(&self, handler: &str) -> bool {
        self.only.is_none_or(|only| only == handler) && !self.except.iter().any(|h| h == handler)
    }
}

impl std::fmt::Debug for DeliverTo<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliverTo")
            .field("only", &self.only)
            .field("once", &self.once)
            .field("except", &self.except)
            .field("first", &self.first.is_some())
            .finish()
    }
}

/// The name of `handlers[i]`: its proto's type and its method, `#n` after it for the n-th
/// object of that type ([`HandlerRun::handler`]).
fn handler_name(handlers: &[Handler], i: usize) -> String {
    let d = handlers[i].descriptor;
    // Objects of one type share their handler's descriptor: the how-manieth this is.
    let before = handlers[..i].iter().filter(|h| std::ptr::eq(h.descriptor, d)).count();
    match before {
        0 => format!("{}::{}", (d.proto_name)(), d.method),
        n => format!("{}::{}#{}", (d.proto_name)(), d.method, n + 1),
    }
}

/// An `after_commit` handler of an App ([`EventBus::handlers`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HandlerInfo {
    /// The event it takes.
    pub event: TypeId,
    /// Its name, as [`HandlerRun::handler`] gives it.
    pub name: String,
    /// How many instances run it.
    pub once: Once,
}

impl EventBus {
    /// The `after_commit` handlers of this App, by name (none once the App is gone): what a transport subscribes for, one shared subscription
    /// per [`Once::PerCluster`] handler.
    pub fn handlers(&self) -> Vec<HandlerInfo> {
        let Some(app) = self.app.get().and_then(Weak::upgrade) else { return Vec::new() };
        let Some(all) = handlers_of(&app) else { return Vec::new() };
        let mut infos = Vec::new();
        for (&event, handlers) in all.iter() {
            for (i, handler) in handlers.iter().enumerate() {
                if handler.descriptor.phase == EventPhase::AfterCommit {
                    infos.push(HandlerInfo { event, name: handler_name(handlers, i), once: handler.descriptor.once });
                }
            }
        }
        infos.sort_by(|a, b| a.name.cmp(&b.name));
        infos
    }

    /// As [`deliver_with`](Self::deliver_with), telling each handler's outcome apart, to the
    /// handlers `to` takes ([`DeliverTo::all`] for every one).
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use tegu_core::{handlers, singleton_proto, App, events::DeliverTo, lineage::Lineage};
    ///
    /// pub struct Shipped;
    ///
    /// #[singleton_proto]
    /// pub struct Mailer;
    ///
    /// #[handlers]
    /// impl Mailer {
    ///     #[event_handler]
    ///     async fn on_shipped(&self, _: &Shipped) -> Result<(), String> {
    ///         Err("the mail server is down".into())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tegu_core::DiError> {
    /// let app = App::builder().build().await?;
    /// let each = app.events().deliver_each(Shipped, &Lineage::new(), DeliverTo::all()).await;
    /// let failed: Vec<_> = each.failed().map(|run| run.handler.as_str()).collect();
    /// assert_eq!(failed, ["rust_out::Mailer::on_shipped"]);
    /// // That handler alone, again.
    /// let again = app.events().deliver_each(Shipped, &Lineage::new(), DeliverTo::only(failed[0])).await;
    /// assert_eq!(again.runs.len(), 1);
    /// # Ok(()) }
    /// ```
    pub async fn deliver_each<E: Send + Sync + 'static>(
        &self,
        event: E,
        lineage: &Lineage,
        to: DeliverTo<'_>,
    ) -> Deliveries {
        let mut each = Deliveries::default();
        let refused = Deliveries { runs: Vec::new(), refused: true };
        let Some(app) = self.app.get().and_then(Weak::upgrade) else {
            tracing::error!(
                event = core::any::type_name::<E>(),
                "an event was delivered to an App that is gone; refused"
            );
            return refused;
        };
        let Some(handlers) = handlers_of(&app).and_then(|h| h.get(&TypeId::of::<E>())) else { return each };
        let Some(_guard) = app.try_pending() else {
            tracing::error!(
                event = core::any::type_name::<E>(),
                "an event was delivered after the App shut down; refused"
            );
            return refused;
        };
        let event: AnyEvent = Arc::new(event);
        for (i, &handler) in handlers.iter().enumerate().filter(|(_, h)| h.descriptor.phase == EventPhase::AfterCommit)
        {
            if to.once.is_some_and(|once| once != handler.descriptor.once) {
                continue;
            }
            let name = handler_name(handlers, i);
            if !to.takes(&name) {
                continue;
            }
            let named = name.as_str();
            let first = to.first.map(|first| move || first(named));
            let first = first.as_ref().map(|f| f as &(dyn Fn() + Sync));
            let error = run_handler(&app, handler, event.clone(), lineage, LinkedWork::Delivered, first).await.err();
            each.runs.push(HandlerRun { handler: name, error });
        }
        each
    }
}
