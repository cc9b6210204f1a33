//! Delivering an event a transport brought to this App's `after_commit` handlers, each
//! handler's outcome told apart: what a transport needs to retry one handler, or set the event
//! aside for it, without running the others again.

use std::any::TypeId;
use std::sync::{Arc, Weak};

use super::{AnyEvent, EventBus, EventPhase, handlers_of, run_handler};
use crate::lineage::{Lineage, LinkedWork};

/// What one `after_commit` handler did with a delivered event ([`EventBus::deliver_each`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HandlerRun {
    /// The handler, as its proto's type and its method: `my_app::Mailer::on_shipped`. The
    /// name [`EventBus::deliver_each`]'s `only` takes.
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

impl EventBus {
    /// As [`deliver_with`](Self::deliver_with), telling each handler's outcome apart; with
    /// `only`, to that handler alone (its name as [`HandlerRun::handler`] gives it): to try
    /// one handler again, or replay an event it failed, without running the others twice.
    ///
    /// # Examples
    ///
    /// ```rust,standalone_crate
    /// use tegu_core::{handlers, singleton_proto, App, lineage::Lineage};
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
    /// let each = app.events().deliver_each(Shipped, &Lineage::new(), None).await;
    /// let failed: Vec<_> = each.failed().map(|run| run.handler.as_str()).collect();
    /// assert_eq!(failed, ["rust_out::Mailer::on_shipped"]);
    /// // That handler alone, again.
    /// let again = app.events().deliver_each(Shipped, &Lineage::new(), Some(failed[0])).await;
    /// assert_eq!(again.runs.len(), 1);
    /// # Ok(()) }
    /// ```
    pub async fn deliver_each<E: Send + Sync + 'static>(
        &self,
        event: E,
        lineage: &Lineage,
        only: Option<&str>,
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
        for &handler in handlers.iter().filter(|h| h.descriptor.phase == EventPhase::AfterCommit) {
            let d = handler.descriptor;
            let name = format!("{}::{}", (d.proto_name)(), d.method);
            if only.is_some_and(|only| only != name) {
                continue;
            }
            let error = run_handler(&app, handler, event.clone(), lineage, LinkedWork::Delivered).await.err();
            each.runs.push(HandlerRun { handler: name, error });
        }
        each
    }
}
